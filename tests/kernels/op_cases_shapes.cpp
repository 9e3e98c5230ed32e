// defines: shape_cases(): op cases at the shapes that pick a kernel's path on a vectorised backend (CUDA's typed
//          16-byte paths and their generic fallbacks): row lengths that are not multiples of 8 (77, 3075), views
//          starting one element past a 16-byte boundary, strided rows, and (large) GPT-2-sized shapes that spread
//          over many blocks (kept small enough for the CPU's runs of every large case); the cross-entropy backward
//          as a case. References written from ops.h's formulas.
#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "op_cases.h"

namespace lmforge::kernels::testing {
namespace {

using Out = std::vector<std::vector<double>>;
using In = std::vector<std::vector<float>>;
using Ids = std::vector<std::vector<int32_t>>;

std::vector<float> noise(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

OpCase named(std::string name, Op op) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  return c;
}

// The view of t's elements [first, first + count) of a 1-D tensor: `first` = 1 puts it one element past the
// allocation's (16-byte aligned) start.
Tensor shifted(const Tensor& t, int64_t first, int64_t count) {
  Tensor v = t;
  v.data = static_cast<char*>(t.data) + (size_t)first * dtype_size(t.dtype);
  v.shape[0] = count;
  v.row_stride = 0;
  return v;
}

double gelu_tanh(double v) { return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }

// GELU over n values; `shift`: the operands are views one element into their buffers (the generic path).
OpCase gelu_shape_case(const std::string& name, int64_t rows, int64_t cols, int64_t shift) {
  const int64_t n = rows * cols;
  OpCase c = named("gelu tanh " + name, Op::GELU);
  std::vector<float> x = noise((size_t)(n + shift), 31, 2.0f);
  c.in = {{"inp", {n + shift}, x}};
  c.out = {{{n + shift}}};
  // the elements before the shifted view by a call of their own
  c.forward = [n, shift](const OpRun& r) {
    if (shift > 0) gelu_forward(shifted(r.out[0], 0, shift), shifted(r.in[0], 0, shift), GeluKind::TANH);
    gelu_forward(shifted(r.out[0], shift, n), shifted(r.in[0], shift, n), GeluKind::TANH);
  };
  c.backward = [n, shift](const OpRun& r) {
    if (shift > 0)
      gelu_backward(shifted(r.din[0], 0, shift), shifted(r.in[0], 0, shift), shifted(r.dout[0], 0, shift),
                    GeluKind::TANH);
    gelu_backward(shifted(r.din[0], shift, n), shifted(r.in[0], shift, n), shifted(r.dout[0], shift, n),
                  GeluKind::TANH);
  };
  c.reference = [n, shift](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(n + shift)));
    for (int64_t i = 0; i < n + shift; i++) o[0][(size_t)i] = gelu_tanh(in[0][(size_t)i]);
    return o;
  };
  return c;
}

OpCase add_shape_case(const std::string& name, int64_t n, int64_t shift) {
  OpCase c = named("add " + name, Op::ADD);
  c.in = {{"a", {n + shift}, noise((size_t)(n + shift), 32, 1.0f)},
          {"b", {n + shift}, noise((size_t)(n + shift), 33, 1.0f)}};
  c.out = {{{n + shift}}};
  c.forward = [n, shift](const OpRun& r) {
    for (auto [first, len] : {std::pair<int64_t, int64_t>{0, shift}, {shift, n}})
      if (len > 0)
        add_forward(shifted(r.out[0], first, len), shifted(r.in[0], first, len), shifted(r.in[1], first, len));
  };
  c.backward = [n, shift](const OpRun& r) {
    for (auto [first, len] : {std::pair<int64_t, int64_t>{0, shift}, {shift, n}})
      if (len > 0)
        add_backward(shifted(r.din[0], first, len), shifted(r.din[1], first, len), shifted(r.dout[0], first, len));
  };
  c.reference = [n, shift](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(n + shift)));
    for (int64_t i = 0; i < n + shift; i++) o[0][(size_t)i] = (double)in[0][(size_t)i] + in[1][(size_t)i];
    return o;
  };
  return c;
}

// LayerNorm of an [N, C] input (ops.h takes contiguous rows).
OpCase layernorm_shape_case(const std::string& name, int64_t N, int64_t C) {
  OpCase c = named("layernorm " + name, Op::LAYERNORM);
  c.in = {{"inp", {N, C}, noise((size_t)(N * C), 34, 2.0f)},
          {"weight", {C}, noise((size_t)C, 35, 1.0f)},
          {"bias", {C}, noise((size_t)C, 36, 1.0f)}};
  c.saved = {{N}, {N}};
  c.out = {{{N, C}}};
  c.forward = [](const OpRun& r) {
    layernorm_forward(r.out[0], r.saved[0], r.saved[1], r.in[0], r.in[1], r.in[2], 1e-5f);
  };
  c.backward = [](const OpRun& r) {
    layernorm_backward(r.din[0], r.din[1], r.din[2], r.dout[0], r.in[0], r.in[1], r.saved[0], r.saved[1]);
  };
  c.reference = [N, C](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * C)));
    for (int64_t n = 0; n < N; n++) {
      const float* x = in[0].data() + n * C;
      double m = 0, v = 0;
      for (int64_t j = 0; j < C; j++) m += x[j];
      m /= (double)C;
      for (int64_t j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
      v /= (double)C;
      for (int64_t j = 0; j < C; j++)
        o[0][(size_t)(n * C + j)] = (x[j] - m) / std::sqrt(v + 1e-5) * in[1][(size_t)j] + in[2][(size_t)j];
    }
    return o;
  };
  return c;
}

OpCase bias_add_shape_case(const std::string& name, int64_t N, int64_t C) {
  OpCase c = named("bias_add " + name, Op::BIAS_ADD);
  c.in = {{"x", {N, C}, noise((size_t)(N * C), 37, 1.0f)}, {"bias", {C}, noise((size_t)C, 38, 1.0f)}};
  c.out = {{{N, C}}};
  c.forward = [](const OpRun& r) {
    copy(r.out[0], r.in[0]);
    bias_add_forward(r.out[0], r.in[1]);
  };
  c.backward = [](const OpRun& r) {
    add_backward(r.din[0], Tensor{}, r.dout[0]);
    bias_add_backward(r.din[1], r.dout[0]);
  };
  c.reference = [N, C](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * C)));
    for (int64_t n = 0; n < N; n++)
      for (int64_t j = 0; j < C; j++) o[0][(size_t)(n * C + j)] = (double)in[0][(size_t)(n * C + j)] + in[1][(size_t)j];
    return o;
  };
  return c;
}

// Embedding lookup (overwrite) and its scatter-add with a third of the positions on one row (a long run for the
// row-ownership backward) and ids outside the piece.
OpCase embedding_shape_case(const std::string& name, int64_t N, int64_t C, int64_t R) {
  const int64_t offset = 2;
  OpCase c = named("embedding " + name, Op::EMBEDDING);
  c.in = {{"table", {R, C}, noise((size_t)(R * C), 39, 1.0f)}};
  std::mt19937 rng(40);
  std::vector<int32_t> ids((size_t)N);
  for (auto& id : ids) id = rng() % 3 == 0 ? (int32_t)(offset + 1) : (int32_t)(rng() % (uint32_t)(R + 2 * offset));
  c.ids = {{"ids", {N}, ids}};
  c.out = {{{N, C}}};
  c.forward = [offset](const OpRun& r) { embedding_forward(r.out[0], r.ids[0], r.in[0], offset, false); };
  c.backward = [offset](const OpRun& r) { embedding_backward(r.din[0], r.dout[0], r.ids[0], offset); };
  c.reference = [N, C, R, offset](const In& in, const Ids& id) {
    Out o(1, std::vector<double>((size_t)(N * C), 0.0));
    for (int64_t n = 0; n < N; n++) {
      const int64_t row = id[0][(size_t)n] - offset;
      if (row >= 0 && row < R)
        for (int64_t j = 0; j < C; j++) o[0][(size_t)(n * C + j)] = in[0][(size_t)(row * C + j)];
    }
    return o;
  };
  return c;
}

// Cross-entropy statistics and the backward (dloss·softmax − dloss at the target) from given lse and dloss,
// copied to the f32 tensors the op takes; V not a multiple of 8 gives unaligned rows (the generic path).
OpCase crossentropy_shape_case(const std::string& name, int64_t N, int64_t V) {
  const int64_t col_offset = 3;
  OpCase c = named("crossentropy stats + backward " + name, Op::CROSSENTROPY);
  std::vector<float> logits = noise((size_t)(N * V), 41, 2.0f), lse((size_t)N), dloss((size_t)N);
  for (int64_t n = 0; n < N; n++) {
    double mx = -1e30, s = 0;
    for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)logits[(size_t)(n * V + v)]);
    for (int64_t v = 0; v < V; v++) s += std::exp(logits[(size_t)(n * V + v)] - mx);
    lse[(size_t)n] = (float)(mx + std::log(s));
    dloss[(size_t)n] = (float)(n % 5) / (float)N;  // 0 for a masked row
  }
  std::mt19937 rng(42);
  std::vector<int32_t> targets((size_t)N);
  for (auto& t : targets) t = (int32_t)(rng() % (uint32_t)(V + 2 * col_offset));
  c.in = {{"logits", {N, V}, logits, false}, {"lse", {N}, lse, false}, {"dloss", {N}, dloss, false}};
  c.ids = {{"targets", {N}, targets}};
  c.saved = {{N}, {N}};
  c.out = {{{N}, true}, {{N}, true}, {{N}, true}, {{N, V}}};
  c.forward = [](const OpRun& r) {
    crossentropy_stats(r.out[0], r.out[1], r.out[2], r.in[0], r.ids[0], col_offset);
    copy(r.saved[0], r.in[1]);
    copy(r.saved[1], r.in[2]);
    crossentropy_backward(r.out[3], r.in[0], r.saved[0], r.ids[0], r.saved[1], col_offset);
  };
  c.reference = [N, V](const In& in, const Ids& ids) {
    Out o(3, std::vector<double>((size_t)N, 0.0));
    o.emplace_back((size_t)(N * V), 0.0);
    for (int64_t n = 0; n < N; n++) {
      const float* l = in[0].data() + n * V;
      double mx = -1e300, s = 0;
      for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)l[v]);
      for (int64_t v = 0; v < V; v++) s += std::exp(l[v] - mx);
      const int64_t t = ids[0][(size_t)n] - col_offset;
      o[0][(size_t)n] = mx, o[1][(size_t)n] = s, o[2][(size_t)n] = t >= 0 && t < V ? l[t] : 0.0;
      const double w = in[2][(size_t)n];
      for (int64_t v = 0; v < V; v++)
        o[3][(size_t)(n * V + v)] = w * std::exp(l[v] - (double)in[1][(size_t)n]) - (v == t ? w : 0.0);
    }
    return o;
  };
  return c;
}

// A conversion copy (f32 scratch ← the run's dtype and back) of the columns [first, first + C) of an [N, W] source,
// W rounded up to a multiple of 8: with `first` a multiple of 8 the rows are 16-byte aligned (the strided fast path),
// else not (the generic one); the way back is a contiguous (flat) conversion.
OpCase copy_shape_case(const std::string& name, int64_t N, int64_t C, int64_t first) {
  const int64_t W = (C + first + 5 + 7) / 8 * 8;
  OpCase c = named("copy through f32 " + name, Op::COPY);
  c.in = {{"src", {N, W}, noise((size_t)(N * W), 43, 1.0f), false}};
  c.saved = {{N, C}};
  c.out = {{{N, C}}};
  c.forward = [C, first](const OpRun& r) {
    copy(r.saved[0], columns(r.in[0], first, C));
    copy(r.out[0], r.saved[0]);
  };
  c.reference = [N, C, W, first](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * C)));
    for (int64_t n = 0; n < N; n++)
      for (int64_t j = 0; j < C; j++) o[0][(size_t)(n * C + j)] = in[0][(size_t)(n * W + first + j)];
    return o;
  };
  return c;
}

}  // namespace

std::vector<OpCase> shape_cases(bool large) {
  std::vector<OpCase> cases;
  if (large) {
    cases.push_back(gelu_shape_case("1024x3072", 1024, 3072, 0));
    cases.push_back(gelu_shape_case("64x3075 shifted", 64, 3075, 1));
    cases.push_back(add_shape_case("300003", 300003, 0));
    cases.push_back(add_shape_case("300003 shifted", 300003, 1));
    // below the CPU kernels' parallel threshold (2^15 elements): the CPU's fp32 LayerNorm backward adds its
    // threads' parameter-gradient partials in arrival order, so its bits would vary from run to run above it
    cases.push_back(layernorm_shape_case("40x768", 40, 768));
    cases.push_back(layernorm_shape_case("10x3075", 10, 3075));
    cases.push_back(bias_add_shape_case("256x3072", 256, 3072));
    cases.push_back(bias_add_shape_case("100x3075", 100, 3075));
    cases.push_back(embedding_shape_case("2048x768", 2048, 768, 1000));
    cases.push_back(embedding_shape_case("2000x77", 2000, 77, 300));
    cases.push_back(crossentropy_shape_case("128x50304", 128, 50304));
    cases.push_back(crossentropy_shape_case("32x3075", 32, 3075));
    cases.push_back(copy_shape_case("512x768", 512, 768, 8));
    cases.push_back(copy_shape_case("100x3075", 100, 3075, 1));
  } else {
    cases.push_back(gelu_shape_case("3x77", 3, 77, 0));
    cases.push_back(gelu_shape_case("2x77 shifted", 2, 77, 1));
    cases.push_back(add_shape_case("77", 77, 0));
    cases.push_back(add_shape_case("77 shifted", 77, 1));
    cases.push_back(layernorm_shape_case("3x16", 3, 16));
    cases.push_back(layernorm_shape_case("3x13", 3, 13));
    cases.push_back(bias_add_shape_case("5x16", 5, 16));
    cases.push_back(bias_add_shape_case("3x77", 3, 77));
    cases.push_back(embedding_shape_case("12x16", 12, 16, 4));
    cases.push_back(embedding_shape_case("9x13", 9, 13, 3));
    cases.push_back(crossentropy_shape_case("3x32", 3, 32));
    cases.push_back(crossentropy_shape_case("3x77", 3, 77));
    cases.push_back(copy_shape_case("4x16", 4, 16, 8));
    cases.push_back(copy_shape_case("3x13", 3, 13, 1));
  }
  return cases;
}

}  // namespace lmforge::kernels::testing
