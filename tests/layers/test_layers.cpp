// Layer library checks that need no reference model: every layer configuration's backward against central finite
// differences of its own forward (a scalar loss Σ r·y with random r), dropout included (its masks are a pure function
// of the step, so the forward is a deterministic function of the input); key/value-cache decoding against the full
// forward; streaming initialisation against the whole-tensor stream.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"
#include "layers/workspace.h"

namespace {

using namespace lmforge;
using kernels::Tensor;

struct LayerSetup {
  bool pre_ln = true;
  bool causal = true;
  bool fused = true;
  bool cross = false;
  bool padding = false;
  bool per_head = false;  // Megatron's per-head fused query_key_value (with fused)
  float dropout = 0.0f;
  kernels::GeluKind gelu = kernels::GeluKind::TANH;
};

layers::TransformerLayerSpec spec_for(const LayerSetup& s, int64_t C, int64_t H) {
  layers::TransformerLayerSpec spec;
  spec.layer = 3;
  spec.hidden = C;
  spec.pre_layernorm = s.pre_ln;
  spec.layernorm_eps = 1e-5f;
  spec.ln1 = "ln1";
  spec.ln2 = "ln2";
  spec.ln_cross = "lnc";
  spec.attention.name = "attn";
  spec.attention.fused_qkv = s.fused;
  spec.attention.qkv_per_head = s.fused && s.per_head;
  spec.attention.hidden = C;
  spec.attention.heads = H;
  spec.attention.layout = s.fused ? kernels::WeightLayout::IN_OUT : kernels::WeightLayout::OUT_IN;
  spec.attention.causal = s.causal;
  spec.attention.init_std = 0.3;
  spec.attention.out_init_std = 0.3;
  spec.attention.attention_dropout = s.dropout;
  spec.attention.layer = 3;
  if (s.cross) {
    layers::AttentionSpec cross = spec.attention;
    cross.name = "cross";
    cross.fused_qkv = false;
    cross.qkv_per_head = false;
    cross.fused_kv = s.per_head;  // Megatron's key_value [2C,C], per head
    cross.cross = true;
    cross.causal = false;
    spec.cross_attention = cross;
  }
  spec.mlp.fc = "fc";
  spec.mlp.proj = "proj";
  spec.mlp.hidden = C;
  spec.mlp.ffn = 3 * C;
  spec.mlp.layout = spec.attention.layout;
  spec.mlp.gelu = s.gelu;
  spec.mlp.init_std = 0.3;
  spec.mlp.out_init_std = 0.3;
  spec.hidden_dropout = s.dropout;
  return spec;
}

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void check_layer(const LayerSetup& s) {
  const int B = 2, T = 5, Tk = 3;
  const int64_t C = 8, H = 2, N = B * T, Nk = B * Tk;
  kernels::Backend& be = kernels::cpu_backend();
  layers::TensorParallel tp;
  layers::ParameterStore store(be, 0, 1);
  layers::Workspace ws(be);
  layers::TransformerLayer layer(store, tp, ws, spec_for(s, C, H));
  store.allocate();
  store.init(11);
  // Biases and LayerNorm parameters away from 0/1 so that their gradients matter.
  std::mt19937 rng(5);
  for (size_t i = 0; i < store.table().size(); i++) {
    const param::Parameter& p = store.table()[i];
    if (p.shape.size() == 1) {
      std::vector<float> v = randn(p.numel, rng, 0.2f);
      if (p.name.find("ln") != std::string::npos && p.name.find(".weight") != std::string::npos)
        for (float& x : v) x += 1.0f;
      std::copy(v.begin(), v.end(), store.values() + p.offset);
    }
  }
  std::vector<float> x = randn((size_t)(N * C), rng), mem = randn((size_t)(Nk * C), rng);
  std::vector<float> r = randn((size_t)(N * C), rng);
  std::vector<int32_t> pad((size_t)(B * T), 1), mpad((size_t)(B * Tk), 1);
  if (s.padding) pad[(size_t)(T - 1)] = pad[(size_t)(T - 2)] = 0, mpad[(size_t)(2 * Tk - 1)] = 0;
  layers::ForwardStep step;
  step.training = s.dropout > 0.0f;
  step.seed = 42;
  step.iteration = 7;
  step.micro_batch = 1;
  const Tensor xt = kernels::make_view(x.data(), {N, C}), mt = kernels::make_view(mem.data(), {Nk, C});
  const Tensor pt = s.padding ? kernels::make_view(pad.data(), {B, T}) : Tensor{};
  const Tensor mpt = s.padding && s.cross ? kernels::make_view(mpad.data(), {B, Tk}) : Tensor{};
  layers::TransformerLayer::Saved saved;
  auto loss = [&]() {
    const Tensor y = layer.forward(xt, {B, T, pt, s.cross ? mt : Tensor{}, mpt, s.cross ? Tk : 0}, step, saved);
    double l = 0.0;
    const float* yp = y.f32();
    for (int64_t i = 0; i < N * C; i++) l += (double)r[(size_t)i] * yp[i];
    return l;
  };
  loss();
  store.zero_grads();
  std::vector<float> d = r, dmem((size_t)(Nk * C), 0.0f);
  layer.backward(kernels::make_view(d.data(), {N, C}), s.cross ? kernels::make_view(dmem.data(), {Nk, C}) : Tensor{},
                 saved);
  std::vector<float> grads(store.grads(), store.grads() + store.local_numel());
  // Central differences on a sample of inputs, memory entries and parameters.
  const float eps = 1e-2f;
  double worst = 0.0;
  auto probe = [&](float* value, double analytic, const char* what, int64_t i) {
    const float keep = *value;
    *value = keep + eps;
    const double up = loss();
    *value = keep - eps;
    const double down = loss();
    *value = keep;
    const double numeric = (up - down) / (2.0 * eps);
    // Absolute error against a floor of 1e-3: the loss is O(N·C), its gradients O(0.01..1).
    const double err = std::fabs(numeric - analytic) / std::max(1e-1, std::fabs(numeric));
    worst = std::max(worst, err);
    EXPECT_LT(err, 2e-2) << what << " " << i << ": numeric " << numeric << " analytic " << analytic;
  };
  for (int64_t i = 0; i < N * C; i += 7) probe(&x[(size_t)i], d[(size_t)i], "input", i);
  if (s.cross)
    for (int64_t i = 0; i < Nk * C; i += 5) probe(&mem[(size_t)i], dmem[(size_t)i], "memory", i);
  for (size_t i = 0; i < store.local_numel(); i += 13) probe(store.values() + i, grads[i], "parameter", (int64_t)i);
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(TransformerLayer, PreLayerNormCausalFusedMatchesFiniteDifferences) { check_layer({}); }
TEST(TransformerLayer, PreLayerNormWithDropoutMatchesFiniteDifferences) {
  LayerSetup s;
  s.dropout = 0.3f;
  check_layer(s);
}
TEST(TransformerLayer, PostLayerNormPaddingSeparateErfMatchesFiniteDifferences) {
  LayerSetup s;
  s.pre_ln = false;
  s.causal = false;
  s.fused = false;
  s.padding = true;
  s.gelu = kernels::GeluKind::ERF;
  check_layer(s);
}
TEST(TransformerLayer, PostLayerNormWithDropoutMatchesFiniteDifferences) {
  LayerSetup s;
  s.pre_ln = false;
  s.causal = false;
  s.fused = false;
  s.dropout = 0.2f;
  check_layer(s);
}
TEST(TransformerLayer, MegatronPerHeadQkvAndKeyValueWithPaddingMatchFiniteDifferences) {
  LayerSetup s;
  s.per_head = true;
  s.cross = true;
  s.padding = true;
  check_layer(s);
}
TEST(TransformerLayer, DecoderWithCrossAttentionMatchesFiniteDifferences) {
  LayerSetup s;
  s.fused = false;
  s.cross = true;
  s.padding = true;
  s.dropout = 0.2f;
  check_layer(s);
}

// Decoding one position at a time through the cache gives the full forward's rows (pre- and post-LN).
void check_decode(bool pre_ln, bool per_head = false) {
  const int B = 2, T = 6;
  const int64_t C = 8, H = 2, N = B * T;
  kernels::Backend& be = kernels::cpu_backend();
  layers::TensorParallel tp;
  layers::ParameterStore store(be, 0, 1);
  layers::Workspace ws(be);
  LayerSetup s;
  s.pre_ln = pre_ln;
  s.fused = pre_ln;
  s.per_head = per_head;
  layers::TransformerLayer layer(store, tp, ws, spec_for(s, C, H));
  store.allocate();
  store.init(3);
  std::mt19937 rng(9);
  std::vector<float> x = randn((size_t)(N * C), rng);
  layers::TransformerLayer::Saved saved;
  const Tensor y = layer.forward(kernels::make_view(x.data(), {N, C}), {B, T, {}, {}, {}, 0}, {}, saved);
  const std::vector<float> full(y.f32(), y.f32() + N * C);
  layer.decode_begin(B, T);
  std::vector<float> row((size_t)(B * C));
  for (int t = 0; t < T; t++) {
    for (int b = 0; b < B; b++)
      std::copy(x.begin() + ((int64_t)b * T + t) * C, x.begin() + ((int64_t)b * T + t + 1) * C, row.begin() + b * C);
    layer.decode_step(kernels::make_view(row.data(), {B, C}), t);
    for (int b = 0; b < B; b++)
      for (int64_t c = 0; c < C; c++)
        EXPECT_NEAR(row[(size_t)(b * C + c)], full[(size_t)(((int64_t)b * T + t) * C + c)], 1e-5)
            << "row " << b << " position " << t << " channel " << c;
  }
}

TEST(TransformerLayer, PreLayerNormCacheDecodingEqualsTheFullForward) { check_decode(true); }
TEST(TransformerLayer, PostLayerNormCacheDecodingEqualsTheFullForward) { check_decode(false); }
TEST(TransformerLayer, PerHeadFusedQkvCacheDecodingEqualsTheFullForward) { check_decode(true, true); }

// The streaming initialisation keeps exactly the whole tensor's elements of each piece.
TEST(ParameterStore, InitialisationDoesNotDependOnTheTensorParallelLayout) {
  kernels::Backend& be = kernels::cpu_backend();
  auto build = [&](int rank, int size) {
    auto store = std::make_unique<layers::ParameterStore>(be, rank, size);
    store->add("a", {6, 12}, true, layers::Init::normal(0.5), 1, 3);  // fused columns, 3 blocks
    store->add("b", {7}, false, layers::Init::ones());
    store->add("c", {8, 5}, true, layers::Init::normal(1.0), 0);     // rows
    store->add("d", {9}, false, layers::Init::normal(2.0));          // odd length: the last Box-Muller pair
    store->allocate();
    store->init(77);
    return store;
  };
  auto whole = build(0, 1);
  for (int rank = 0; rank < 2; rank++) {
    auto piece = build(rank, 2);
    for (size_t i = 0; i < whole->table().size(); i++) {
      std::vector<float> expect(piece->table()[i].numel);
      piece->table().slice(i, whole->values() + whole->table()[i].offset, expect.data());
      for (size_t k = 0; k < expect.size(); k++)
        EXPECT_EQ(piece->values()[piece->table()[i].offset + k], expect[k]) << whole->table()[i].name << " " << k;
    }
  }
}

// The bf16 working weights carry an fp32 mirror (Tensor::widened) exactly where the backend wants one (a CPU whose
// bf16 products are widened: always under tests/CMakeLists.txt's LayersBf16Mirror), holding exactly the widened bf16
// values after init() and after every sync; fp32 weights never have one.
TEST(ParameterStore, Bf16WorkingWeightsCarryTheirExactFp32MirrorWhereTheBackendWantsOne) {
  kernels::Backend& be = kernels::cpu_backend();
  layers::ParameterStore store(be, 0, 1);
  store.add("w", {300, 700}, true, layers::Init::normal(0.7));  // more than one piece of the chunked sync
  store.add("b", {13}, false, layers::Init::normal(3.0));
  store.allocate();
  store.init(5);
  EXPECT_EQ(store.compute_value(0).widened, nullptr);  // fp32
  store.set_compute_dtype(kernels::DType::BF16);
  auto check = [&](const char* when) {
    for (size_t i = 0; i < store.table().size(); i++) {
      const kernels::Tensor t = store.compute_value(i);
      ASSERT_EQ(t.widened != nullptr, be.wants_widened_bf16_weights()) << when;
      if (t.widened == nullptr) continue;
      const uint16_t* bits = t.bf16();
      const float* master = store.value(i).f32();
      for (int64_t k = 0; k < t.numel(); k++) {
        ASSERT_EQ(t.widened[k], std::bit_cast<float>((uint32_t)bits[k] << 16)) << when << " " << i << "," << k;
        ASSERT_LE(std::fabs(t.widened[k] - master[k]), std::ldexp(std::fabs(master[k]), -8)) << when;
      }
      // a slice keeps its own part of the mirror
      const kernels::Tensor rows = t.slice0(t.dim(0) - 1, 1);
      ASSERT_EQ(rows.widened, t.widened + (t.numel() - rows.numel())) << when;
    }
  };
  check("after set_compute_dtype");
  for (size_t k = 0; k < store.local_numel(); k++) store.values()[k] = 1.0f + 0.001f * (float)k;  // an update
  store.sync_compute_copy();
  check("after a sync");
  store.set_compute_dtype(kernels::DType::F32);
  EXPECT_EQ(store.compute_value(0).widened, nullptr);
}

}  // namespace
