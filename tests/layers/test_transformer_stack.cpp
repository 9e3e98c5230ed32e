// TransformerStack: full activation recomputation runs exactly the layers the method names again (uniform: every
// layer once; block: the first num_layers), and the stack's output and every gradient are bit for bit those of a
// stack that kept its activations (dropout on, so the recomputed forward must draw the same masks); several
// micro-batches in flight, each in its own caller-owned Saved (a 1F1B stage), give bit for bit the gradients of
// running them one after the other, each forward once; selective recomputation (the attention cores) keeps no
// layer's attention probabilities between its forward and backward, in any layer's own memory either, and the
// per-head projection layout's scratch is shared by the layers;
// Recompute::validate takes Megatron's settings only.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "layers/parameter_store.h"
#include "layers/transformer_stack.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"
#include "layers/workspace.h"

namespace {

using namespace lmforge;
using kernels::Tensor;

layers::TransformerLayerSpec spec(int l, int64_t C, int64_t H) {
  const std::string p = "l" + std::to_string(l) + ".";
  layers::TransformerLayerSpec s;
  s.layer = l + 1;
  s.hidden = C;
  s.ln1 = p + "ln1";
  s.ln2 = p + "ln2";
  s.attention.name = p + "attn";
  s.attention.hidden = C;
  s.attention.heads = H;
  s.attention.causal = false;
  s.attention.attention_dropout = 0.2f;
  s.attention.layer = l + 1;
  s.mlp.fc = p + "fc";
  s.mlp.proj = p + "proj";
  s.mlp.hidden = C;
  s.mlp.ffn = 2 * C;
  s.hidden_dropout = 0.2f;
  return s;
}

struct Result {
  std::vector<float> out, dx, grads;
  int forward_runs = 0;
};

constexpr int B = 2, T = 4, L = 3;
constexpr int64_t C = 8, H = 2, N = B * T;

// Three layers with random weights, and micro-batch inputs x_k and loss weights r_k (loss_k = Σ r_k·y_k).
struct StackRun {
  kernels::Backend& be = kernels::cpu_backend();
  layers::TensorParallel tp;
  layers::ParameterStore store{be, 0, 1};
  layers::Workspace ws{be};
  layers::TransformerStack stack;
  std::vector<std::vector<float>> x, r;

  StackRun(const layers::Recompute& recompute, int micro_batches) {
    layers::TransformerStack::Layers list;
    for (int l = 0; l < L; l++) list.push_back(std::make_unique<layers::TransformerLayer>(store, tp, ws, spec(l, C, H)));
    stack = layers::TransformerStack(std::move(list), recompute);
    store.allocate();
    store.init(7);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int k = 0; k < micro_batches; k++) {
      x.emplace_back((size_t)(N * C));
      r.emplace_back((size_t)(N * C));
      for (float& v : x.back()) v = normal(rng);
      for (float& v : r.back()) v = normal(rng);
    }
  }
  layers::ForwardStep step(int k) const {
    layers::ForwardStep s;
    s.training = true;
    s.seed = 9;
    s.micro_batch = (uint64_t)k;
    return s;
  }
  Tensor forward(int k, layers::TransformerStack::Saved& saved) {
    return stack.forward(kernels::make_view(x[(size_t)k].data(), {N, C}), {B, T, {}, {}, {}, 0}, step(k), saved);
  }
  // d(loss_k)/dx_k (the gradients accumulate into the store).
  std::vector<float> backward(int k, layers::TransformerStack::Saved& saved) {
    std::vector<float> d = r[(size_t)k];
    stack.backward(kernels::make_view(d.data(), {N, C}), Tensor{}, saved);
    return d;
  }
  std::vector<float> grads() const { return std::vector<float>(store.grads(), store.grads() + store.local_numel()); }
};

// Three layers, forward then backward of Σ r·y, under `recompute`.
Result run_stack(const layers::Recompute& recompute) {
  StackRun s(recompute, 1);
  layers::TransformerStack::Saved saved;
  Result res;
  const Tensor y = s.forward(0, saved);
  res.out.assign(y.f32(), y.f32() + N * C);
  res.dx = s.backward(0, saved);
  res.grads = s.grads();
  res.forward_runs = (int)s.stack.layer_forwards();
  return res;
}

layers::Recompute full(const std::string& method, int n) {
  layers::Recompute r;
  r.granularity = "full";
  r.method = method;
  r.num_layers = n;
  return r;
}

void expect_same(const Result& got, const Result& want, const char* what) {
  EXPECT_EQ(got.out, want.out) << what;
  EXPECT_EQ(got.dx, want.dx) << what;
  EXPECT_EQ(got.grads, want.grads) << what;
}

TEST(TransformerStack, RecomputesTheNamedLayersAndGivesTheSameGradientsBitForBit) {
  const Result kept = run_stack(layers::Recompute{});
  EXPECT_EQ(kept.forward_runs, 3);
  const Result uniform2 = run_stack(full("uniform", 2));  // chunks {0,1} and {2}: every layer again
  EXPECT_EQ(uniform2.forward_runs, 6);
  expect_same(uniform2, kept, "uniform 2");
  const Result uniform1 = run_stack(full("uniform", 1));
  EXPECT_EQ(uniform1.forward_runs, 6);
  expect_same(uniform1, kept, "uniform 1");
  const Result block2 = run_stack(full("block", 2));  // layers 0 and 1 again, layer 2 kept
  EXPECT_EQ(block2.forward_runs, 5);
  expect_same(block2, kept, "block 2");
  // More layers per chunk than the stack (a pipeline stage's share of the model) holds: one chunk of every layer
  // (uniform), every layer recomputed one by one (block), as Megatron's per-stage transformer chunks its own layers.
  const Result uniform5 = run_stack(full("uniform", 5));
  EXPECT_EQ(uniform5.forward_runs, 6);
  expect_same(uniform5, kept, "uniform 5 over 3 layers");
  const Result block5 = run_stack(full("block", 5));
  EXPECT_EQ(block5.forward_runs, 6);
  expect_same(block5, kept, "block 5 over 3 layers");
  layers::Recompute selective;
  selective.granularity = "selective";  // the attention cores, not whole layers: nothing here runs again
  EXPECT_EQ(run_stack(selective).forward_runs, 3);
}

// A 1F1B stage's order (forwards of micro-batches 0, 1, 2 in flight, then their backwards oldest first) against one
// micro-batch at a time: the same outputs, input gradients and accumulated parameter gradients, bit for bit, with
// one forward per layer and micro-batch (without recomputation) — the activations live in the caller's Saved.
TEST(TransformerStack, MicroBatchesInFlightEachInTheirOwnSavedMatchOneAtATime) {
  for (const layers::Recompute& recompute : {layers::Recompute{}, full("uniform", 2)}) {
    StackRun one(recompute, 3), inflight(recompute, 3);
    std::vector<std::vector<float>> out_one, dx_one, out_inflight, dx_inflight;
    layers::TransformerStack::Saved saved;
    for (int k = 0; k < 3; k++) {
      const Tensor y = one.forward(k, saved);
      out_one.emplace_back(y.f32(), y.f32() + N * C);
      dx_one.push_back(one.backward(k, saved));
    }
    layers::TransformerStack::Saved slots[3];
    for (int k = 0; k < 3; k++) {
      const Tensor y = inflight.forward(k, slots[k]);
      out_inflight.emplace_back(y.f32(), y.f32() + N * C);
    }
    for (int k = 0; k < 3; k++) dx_inflight.push_back(inflight.backward(k, slots[k]));
    EXPECT_EQ(out_inflight, out_one) << recompute.granularity;
    EXPECT_EQ(dx_inflight, dx_one) << recompute.granularity;
    EXPECT_EQ(inflight.grads(), one.grads()) << recompute.granularity;
    EXPECT_EQ(inflight.stack.layer_forwards(), one.stack.layer_forwards()) << recompute.granularity;
    if (recompute.granularity.empty()) {
      EXPECT_EQ(inflight.stack.layer_forwards(), 3 * L);
    }
  }
}

// The CPU backend, counting the bytes it holds (alloc minus free).
class CountingBackend final : public kernels::Backend {
 public:
  kernels::Device device() const override { return cpu_.device(); }
  const char* name() const override { return cpu_.name(); }
  std::string info() const override { return cpu_.info(); }
  void* alloc(size_t bytes) override {
    void* p = cpu_.alloc(bytes);
    live_[p] = bytes;
    held_ += bytes;
    return p;
  }
  void free(void* p) override {
    if (const auto it = live_.find(p); it != live_.end()) held_ -= it->second, live_.erase(it);
    cpu_.free(p);
  }
  void copy_to_device(void* d, const void* s, size_t n) override { cpu_.copy_to_device(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { cpu_.copy_to_host(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override { cpu_.copy_on_device(d, s, n); }
  void fill_zero(void* p, size_t n) override { cpu_.fill_zero(p, n); }
  void synchronize() override { cpu_.synchronize(); }
  void set_num_threads(int n) override { cpu_.set_num_threads(n); }
  int num_threads() const override { return cpu_.num_threads(); }
  size_t held() const { return held_; }

 private:
  kernels::Backend& cpu_ = kernels::cpu_backend();
  std::map<void*, size_t> live_;
  size_t held_ = 0;
};

// Bytes the backend holds after a forward of 6 layers over 64 tokens (the saved states alive, as before a backward),
// with and without selective recomputation; the run's gradients with it.
struct HeldAfterForward {
  size_t bytes = 0;
  std::vector<float> dx;
};

HeldAfterForward held_after_forward(bool selective, bool qkv_per_head = false) {
  constexpr int kB = 2, kT = 64, kL = 6;
  CountingBackend be;
  layers::TensorParallel tp;
  layers::ParameterStore store{be, 0, 1};
  layers::Workspace ws{be};
  layers::TransformerStack::Layers list;
  for (int l = 0; l < kL; l++) {
    layers::TransformerLayerSpec s = spec(l, C, H);
    s.attention.recompute_core = selective;
    s.attention.qkv_per_head = qkv_per_head;  // Megatron's [head][q|k|v][d] rows (T5), staged through scratch
    list.push_back(std::make_unique<layers::TransformerLayer>(store, tp, ws, s));
  }
  layers::Recompute recompute;
  if (selective) recompute.granularity = "selective";
  layers::TransformerStack stack(std::move(list), recompute);
  store.allocate();
  store.init(7);
  std::vector<float> x((size_t)(kB * kT * C), 0.5f), d((size_t)(kB * kT * C), 1.0f);
  for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  layers::ForwardStep step;
  step.training = true;
  step.seed = 9;
  layers::TransformerStack::Saved saved;
  stack.forward(kernels::make_view(x.data(), {kB * kT, C}), {kB, kT, {}, {}, {}, 0}, step, saved);
  HeldAfterForward r;
  r.bytes = be.held();
  stack.backward(kernels::make_view(d.data(), {kB * kT, C}), Tensor{}, saved);
  r.dx = d;
  return r;
}

// Selective recomputation drops the attention probabilities [B, H, T, T] of every layer between its forward and its
// backward: one scratch buffer of the shared workspace serves them all. (A scratch buffer per layer held as much as
// keeping them: GPT-2 124M at 1,024 tokens used 3,338 MB with and without selective recomputation.)
TEST(TransformerStack, SelectiveRecomputationHoldsOneLayersAttentionStateNotOnePerLayer) {
  const size_t probs = 2 * 2 * 64 * 64 * sizeof(float);  // one layer's [B, H, T, T]
  const HeldAfterForward kept = held_after_forward(false), selective = held_after_forward(true);
  EXPECT_GE(kept.bytes, selective.bytes + 5 * probs) << "kept " << kept.bytes << " B, selective " << selective.bytes;
  EXPECT_EQ(selective.dx, kept.dx);  // and the gradients are the kept run's
}

// Megatron's per-head q|k|v rows (T5) pass through fp32 scratch on the way in and out of the projection: one buffer
// of the shared workspace for all layers, not one per layer held between calls (T5-base at 4,096 tokens: 38 MB a
// layer, each way).
TEST(TransformerStack, PerHeadProjectionScratchIsSharedByTheLayers) {
  const size_t scratch = 2 * 64 * 3 * C * sizeof(float);  // one layer's [N, 3C] fp32
  const HeldAfterForward plain = held_after_forward(false), per_head = held_after_forward(false, true);
  EXPECT_LE(per_head.bytes, plain.bytes + scratch) << "plain " << plain.bytes << " B, per head " << per_head.bytes;
}

TEST(TransformerStack, ValidateTakesMegatronsSettingsOnly) {
  EXPECT_THROW(full("uniform", 0).validate(3), std::exception);
  EXPECT_THROW(full("uniform", 4).validate(3), std::exception);
  EXPECT_THROW(full("chunks", 1).validate(3), std::exception);
  layers::Recompute bad;
  bad.granularity = "partial";
  EXPECT_THROW(bad.validate(3), std::exception);
  EXPECT_NO_THROW(full("block", 3).validate(3));
}

}  // namespace
