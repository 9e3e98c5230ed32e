// StackRecomputation (full activation recomputation over a stack of TransformerLayers): the backward runs exactly
// the layers the method names again (uniform: every layer once; block: the first num_layers), and the stack's
// output and every gradient are bit for bit those of a stack that kept its activations (dropout on, so the
// recomputed forward must draw the same masks); Recompute::validate takes Megatron's settings only.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "layers/parameter_store.h"
#include "layers/recompute.h"
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

// Three layers, forward then backward of Σ r·y, under `recompute`.
Result run_stack(const layers::Recompute& recompute) {
  const int B = 2, T = 4, L = 3;
  const int64_t C = 8, H = 2, N = B * T;
  kernels::Backend& be = kernels::cpu_backend();
  layers::TensorParallel tp;
  layers::ParameterStore store(be, 0, 1);
  layers::Workspace ws(be);
  layers::StackRecomputation::Layers stack;
  for (int l = 0; l < L; l++) stack.push_back(std::make_unique<layers::TransformerLayer>(store, tp, ws, spec(l, C, H)));
  store.allocate();
  store.init(7);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x((size_t)(N * C)), r((size_t)(N * C));
  for (float& v : x) v = normal(rng);
  for (float& v : r) v = normal(rng);
  kernels::Buffer xb, db;
  xb.resize(be, kernels::DType::F32, x.size());
  std::memcpy(xb.data(), x.data(), x.size() * sizeof(float));
  layers::ForwardStep step;
  step.training = true;
  step.seed = 9;
  Result res;
  const layers::StackRecomputation::Run layer_run = [&](layers::TransformerLayer& layer, const Tensor& in) {
    res.forward_runs++;
    return layer.forward(in, {B, T, {}, {}, {}, 0}, step);
  };
  layers::StackRecomputation sr(recompute, L);
  const Tensor y = sr.forward(stack, xb.view({N, C}), layer_run, be);
  res.out.assign(y.f32(), y.f32() + N * C);
  db.resize(be, kernels::DType::F32, r.size());
  std::memcpy(db.data(), r.data(), r.size() * sizeof(float));
  const Tensor d = db.view({N, C});
  sr.backward(stack, layer_run, [&](size_t l) { stack[l]->backward(d, Tensor{}); });
  res.dx.assign(d.f32(), d.f32() + N * C);
  res.grads.assign(store.grads(), store.grads() + store.local_numel());
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

TEST(StackRecomputation, RecomputesTheNamedLayersAndGivesTheSameGradientsBitForBit) {
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

TEST(StackRecomputation, ValidateTakesMegatronsSettingsOnly) {
  EXPECT_THROW(full("uniform", 0).validate(3), std::exception);
  EXPECT_THROW(full("uniform", 4).validate(3), std::exception);
  EXPECT_THROW(full("chunks", 1).validate(3), std::exception);
  layers::Recompute bad;
  bad.granularity = "partial";
  EXPECT_THROW(bad.validate(3), std::exception);
  EXPECT_NO_THROW(full("block", 3).validate(3));
}

}  // namespace
