// TransformerStack: full activation recomputation runs exactly the layers the method names again (uniform: every
// layer once; block: the first num_layers), and the stack's output and every gradient are bit for bit those of a
// stack that kept its activations (dropout on, so the recomputed forward must draw the same masks); several
// micro-batches in flight, each in its own caller-owned Saved (a 1F1B stage), give bit for bit the gradients of
// running them one after the other, each forward once; Recompute::validate takes Megatron's settings only.
#include <gtest/gtest.h>

#include <cstring>
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
