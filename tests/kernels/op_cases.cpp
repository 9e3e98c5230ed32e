// defines: the op cases of op_cases.h and their double-precision references (each written from the formula that
//          kernels/ops.h states, without looking at how a kernel computes it)
#include "op_cases.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/backend.h"

namespace lmforge::kernels::testing {
namespace {

using Out = std::vector<std::vector<double>>;
using In = std::vector<std::vector<float>>;
using Ids = std::vector<std::vector<int32_t>>;

std::vector<float> normal(size_t n, std::mt19937& rng, float scale = 1.0f) {
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

// ---- embedding -----------------------------------------------------------------------------------------------------
// A vocabulary-parallel piece (rows [offset, offset + R) of a larger table) accumulating into a non-zero output:
// ids below, inside and above the piece, repeated ids for the scatter-add.
OpCase embedding_case(bool large) {
  const int64_t N = large ? 2048 : 10, C = large ? 96 : 7, R = large ? 50 : 6, offset = 3;
  std::mt19937 rng(1);
  OpCase c = named("embedding (vocabulary piece, accumulate)", Op::EMBEDDING);
  c.in = {{"base", {N, C}, normal((size_t)(N * C), rng)}, {"table", {R, C}, normal((size_t)(R * C), rng)}};
  std::vector<int32_t> ids((size_t)N);
  for (auto& id : ids) id = (int32_t)(rng() % (uint32_t)(R + 2 * offset));  // [0, R + 2·offset)
  c.ids = {{"ids", {N}, ids}};
  c.out = {{{N, C}}};
  c.forward = [](const OpRun& r) {
    copy(r.out[0], r.in[0]);
    embedding_forward(r.out[0], r.ids[0], r.in[1], offset, /*accumulate=*/true);
  };
  c.backward = [](const OpRun& r) {
    add_backward(r.din[0], Tensor{}, r.dout[0]);
    embedding_backward(r.din[1], r.dout[0], r.ids[0], offset);
  };
  c.reference = [N, C, R](const In& in, const Ids& id) {
    Out o(1, std::vector<double>(in[0].begin(), in[0].end()));
    for (int64_t n = 0; n < N; n++) {
      const int64_t row = id[0][(size_t)n] - offset;
      if (row < 0 || row >= R) continue;
      for (int64_t j = 0; j < C; j++) o[0][(size_t)(n * C + j)] += in[1][(size_t)(row * C + j)];
    }
    return o;
  };
  return c;
}

// Without accumulate: rows outside the piece are written as zeros.
OpCase embedding_overwrite_case() {
  const int64_t N = 6, C = 3, R = 2, offset = 2;
  std::mt19937 rng(11);
  OpCase c = named("embedding (overwrite)", Op::EMBEDDING);
  c.in = {{"table", {R, C}, normal((size_t)(R * C), rng)}};
  c.ids = {{"ids", {N}, {0, 2, 3, 4, 3, 1}}};
  c.out = {{{N, C}}};
  c.forward = [](const OpRun& r) { embedding_forward(r.out[0], r.ids[0], r.in[0], offset, false); };
  c.backward = [](const OpRun& r) { embedding_backward(r.din[0], r.dout[0], r.ids[0], offset); };
  c.reference = [N, C, R](const In& in, const Ids& id) {
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

// ---- layernorm -----------------------------------------------------------------------------------------------------
OpCase layernorm_case(bool large, float eps) {
  const int64_t N = large ? 256 : 6, C = large ? 96 : 10;
  std::mt19937 rng(2);
  OpCase c = named("layernorm eps " + std::to_string(eps), Op::LAYERNORM);
  std::vector<float> x = normal((size_t)(N * C), rng, 2.0f);
  for (int64_t j = 0; j < C; j++) x[(size_t)j] += 3.0f;  // a row with a large mean
  c.in = {{"inp", {N, C}, x}, {"weight", {C}, normal((size_t)C, rng)}, {"bias", {C}, normal((size_t)C, rng)}};
  c.saved = {{N}, {N}};
  c.out = {{{N, C}}};
  c.forward = [eps](const OpRun& r) {
    layernorm_forward(r.out[0], r.saved[0], r.saved[1], r.in[0], r.in[1], r.in[2], eps);
  };
  c.backward = [](const OpRun& r) {
    layernorm_backward(r.din[0], r.din[1], r.din[2], r.dout[0], r.in[0], r.in[1], r.saved[0], r.saved[1]);
  };
  c.reference = [N, C, eps](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * C)));
    for (int64_t n = 0; n < N; n++) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < C; j++) m += in[0][(size_t)(n * C + j)];
      m /= (double)C;
      for (int64_t j = 0; j < C; j++) v += std::pow(in[0][(size_t)(n * C + j)] - m, 2);
      v /= (double)C;  // biased
      for (int64_t j = 0; j < C; j++)
        o[0][(size_t)(n * C + j)] = (in[0][(size_t)(n * C + j)] - m) / std::sqrt(v + eps) * in[1][(size_t)j] +
                                    in[2][(size_t)j];
    }
    return o;
  };
  return c;
}

// ---- linear --------------------------------------------------------------------------------------------------------
OpCase linear_case(bool large, WeightLayout layout, bool bias) {
  const int64_t N = large ? 256 : 5, IC = large ? 96 : 7, OC = large ? 288 : 4;
  std::mt19937 rng(3);
  OpCase c = named(std::string("linear ") + (layout == WeightLayout::IN_OUT ? "in_out" : "out_in") +
               (bias ? " + bias" : ""),
           Op::LINEAR);
  const std::vector<int64_t> wshape = layout == WeightLayout::IN_OUT ? std::vector<int64_t>{IC, OC}
                                                                      : std::vector<int64_t>{OC, IC};
  c.in = {{"inp", {N, IC}, normal((size_t)(N * IC), rng)}, {"weight", wshape, normal((size_t)(IC * OC), rng)}};
  if (bias) c.in.push_back({"bias", {OC}, normal((size_t)OC, rng)});
  c.out = {{{N, OC}}};
  c.forward = [layout, bias](const OpRun& r) {
    linear_forward(r.out[0], r.in[0], r.in[1], bias ? r.in[2] : Tensor{}, layout);
  };
  c.backward = [layout, bias](const OpRun& r) {
    linear_backward(r.din[0], r.din[1], bias ? r.din[2] : Tensor{}, r.dout[0], r.in[0], r.in[1], layout);
  };
  c.reference = [N, IC, OC, layout, bias](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * OC)));
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < OC; k++) {
        double s = bias ? in[2][(size_t)k] : 0.0;
        for (int64_t i = 0; i < IC; i++)
          s += (double)in[0][(size_t)(n * IC + i)] *
               (layout == WeightLayout::IN_OUT ? in[1][(size_t)(i * OC + k)] : in[1][(size_t)(k * IC + i)]);
        o[0][(size_t)(n * OC + k)] = s;
      }
    return o;
  };
  return c;
}

// ---- bias add, add -------------------------------------------------------------------------------------------------
OpCase bias_add_case(bool large) {
  const int64_t N = large ? 512 : 4, C = large ? 96 : 5;
  std::mt19937 rng(4);
  OpCase c = named("bias_add (in place)", Op::BIAS_ADD);
  c.in = {{"x", {N, C}, normal((size_t)(N * C), rng)}, {"bias", {C}, normal((size_t)C, rng)}};
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

OpCase add_case(bool large) {
  const int64_t N = large ? 100000 : 17;
  std::mt19937 rng(5);
  OpCase c = named("add", Op::ADD);
  c.in = {{"a", {N}, normal((size_t)N, rng)}, {"b", {N}, normal((size_t)N, rng)}};
  c.out = {{{N}}};
  c.forward = [](const OpRun& r) { add_forward(r.out[0], r.in[0], r.in[1]); };
  c.backward = [](const OpRun& r) { add_backward(r.din[0], r.din[1], r.dout[0]); };
  c.reference = [N](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (int64_t i = 0; i < N; i++) o[0][(size_t)i] = (double)in[0][(size_t)i] + in[1][(size_t)i];
    return o;
  };
  return c;
}

// ---- tanh ----------------------------------------------------------------------------------------------------------
OpCase tanh_case(bool large) {
  const int64_t N = large ? 100000 : 40;
  std::mt19937 rng(16);
  OpCase c = named("tanh", Op::TANH);
  std::vector<float> x = normal((size_t)N, rng, 1.5f);
  x[0] = 0.0f, x[1] = -9.0f, x[2] = 9.0f, x[3] = 1e-4f;
  c.in = {{"inp", {N}, x}};
  c.out = {{{N}}};
  c.forward = [](const OpRun& r) { tanh_forward(r.out[0], r.in[0]); };
  c.backward = [](const OpRun& r) { tanh_backward(r.din[0], r.in[0], r.dout[0]); };
  c.reference = [N](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (int64_t i = 0; i < N; i++) o[0][(size_t)i] = std::tanh((double)in[0][(size_t)i]);
    return o;
  };
  return c;
}

// ---- GELU ----------------------------------------------------------------------------------------------------------
OpCase gelu_case(bool large, GeluKind kind) {
  const int64_t N = large ? 100000 : 40;
  std::mt19937 rng(6);
  OpCase c = named(kind == GeluKind::TANH ? "gelu tanh" : "gelu erf", Op::GELU);
  std::vector<float> x = normal((size_t)N, rng, 2.0f);
  x[0] = 0.0f, x[1] = -6.0f, x[2] = 6.0f, x[3] = -12.0f;
  c.in = {{"inp", {N}, x}};
  c.out = {{{N}}};
  c.forward = [kind](const OpRun& r) { gelu_forward(r.out[0], r.in[0], kind); };
  c.backward = [kind](const OpRun& r) { gelu_backward(r.din[0], r.in[0], r.dout[0], kind); };
  c.reference = [N, kind](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (int64_t i = 0; i < N; i++) {
      const double v = in[0][(size_t)i];
      o[0][(size_t)i] = kind == GeluKind::TANH
                            ? 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)))
                            : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    }
    return o;
  };
  return c;
}

// ---- dropout -------------------------------------------------------------------------------------------------------
OpCase dropout_case(bool large, float p) {
  const int64_t N = large ? 100003 : 37;  // not a multiple of 4: the last Philox block is partly used
  std::mt19937 rng(7);
  const DropoutKey key{p, 0x1234567890abcdefULL, 42};
  OpCase c = named("dropout p " + std::to_string(p), Op::DROPOUT);
  c.in = {{"inp", {N}, normal((size_t)N, rng)}};
  c.out = {{{N}}};
  c.forward = [key](const OpRun& r) { dropout_forward(r.out[0], r.in[0], key); };
  c.backward = [key](const OpRun& r) { dropout_backward(r.din[0], r.dout[0], key); };
  c.reference = [N, key](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (int64_t i = 0; i < N; i++)
      o[0][(size_t)i] = reference_keep(key.p, key.seed, key.stream, (uint64_t)i) ? in[0][(size_t)i] / (1.0 - key.p) : 0.0;
    return o;
  };
  return c;
}

// ---- attention -----------------------------------------------------------------------------------------------------
struct AttentionSetup {
  int64_t B, Tq, Tk, H, hs;
  AttentionMask mask;
  bool padding;
  bool fused;  // q, k, v as strided column views of one [B, T, 3C] operand (self-attention only)
  float p;     // attention dropout
  int64_t head_offset, total_heads;
};

// out[b,t,h·hs + i] = Σ_j drop(p_tj)·v[b,j,h·hs + i], p = softmax over the allowed keys of q_t·k_j/√hs.
Out attention_reference(const AttentionSetup& s, const DropoutKey& key, const std::vector<float>& q,
                        const std::vector<float>& k, const std::vector<float>& v, int64_t ldq, int64_t ldk,
                        int64_t ldv, const std::vector<int32_t>* pad) {
  const int64_t C = s.H * s.hs;
  Out o(1, std::vector<double>((size_t)(s.B * s.Tq * C), 0.0));
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.H; h++)
      for (int64_t t = 0; t < s.Tq; t++) {
        std::vector<double> score((size_t)s.Tk, 0.0);
        std::vector<bool> allowed((size_t)s.Tk, false);
        double mx = -1e300;
        bool any = false;
        for (int64_t j = 0; j < s.Tk; j++) {
          allowed[(size_t)j] = (s.mask != AttentionMask::CAUSAL || j <= t) && (!pad || (*pad)[(size_t)(b * s.Tk + j)]);
          if (!allowed[(size_t)j]) continue;
          double d = 0;
          for (int64_t i = 0; i < s.hs; i++)
            d += (double)q[(size_t)((b * s.Tq + t) * ldq + h * s.hs + i)] * k[(size_t)((b * s.Tk + j) * ldk + h * s.hs + i)];
          score[(size_t)j] = d / std::sqrt((double)s.hs);
          mx = std::max(mx, score[(size_t)j]);
          any = true;
        }
        if (!any) continue;
        double sum = 0;
        for (int64_t j = 0; j < s.Tk; j++)
          if (allowed[(size_t)j]) sum += (score[(size_t)j] = std::exp(score[(size_t)j] - mx));
        for (int64_t j = 0; j < s.Tk; j++) {
          if (!allowed[(size_t)j]) continue;
          double pj = score[(size_t)j] / sum;
          if (s.p > 0.0f) {
            const uint64_t idx = (uint64_t)((((b * s.total_heads + s.head_offset + h) * s.Tq + t) * s.Tk) + j);
            pj = reference_keep(key.p, key.seed, key.stream, idx) ? pj / (1.0 - key.p) : 0.0;
          }
          for (int64_t i = 0; i < s.hs; i++)
            o[0][(size_t)((b * s.Tq + t) * C + h * s.hs + i)] += pj * v[(size_t)((b * s.Tk + j) * ldv + h * s.hs + i)];
        }
      }
  return o;
}

OpCase attention_case(std::string name, AttentionSetup s) {
  std::mt19937 rng(8);
  const int64_t C = s.H * s.hs;
  const AttentionDropout drop{{s.p, 99, 7}, s.head_offset, s.total_heads};
  OpCase c = named(std::move(name), Op::ATTENTION);
  if (s.fused) {
    c.in = {{"qkv", {s.B, s.Tq, 3 * C}, normal((size_t)(s.B * s.Tq * 3 * C), rng)}};
  } else {
    c.in = {{"q", {s.B, s.Tq, C}, normal((size_t)(s.B * s.Tq * C), rng)},
            {"k", {s.B, s.Tk, C}, normal((size_t)(s.B * s.Tk * C), rng)},
            {"v", {s.B, s.Tk, C}, normal((size_t)(s.B * s.Tk * C), rng)}};
  }
  if (s.padding) {
    std::vector<int32_t> pad((size_t)(s.B * s.Tk), 1);
    for (int64_t b = 0; b < s.B; b++)  // row b pads its last b + 1 keys; the last row pads every key
      for (int64_t j = 0; j < s.Tk; j++)
        if (j >= s.Tk - (b + 1) || b == s.B - 1) pad[(size_t)(b * s.Tk + j)] = 0;
    c.ids = {{"key_padding", {s.B, s.Tk}, pad}};
  }
  // Room for the largest saved state (the CPU's probabilities); each device's view of it is attention_saved_view.
  c.saved = {{s.B, s.H, s.Tq, s.Tk}};
  c.out = {{{s.B, s.Tq, C}}};
  const int H = (int)s.H;
  auto saved = [s](const Tensor& room) {
    return attention_saved_view(room.data, room.device, s.B, s.H, s.Tq, s.Tk);
  };
  auto views = [s, C](const std::vector<Tensor>& t, Tensor& q, Tensor& k, Tensor& v) {
    if (s.fused) {
      q = columns(t[0], 0, C), k = columns(t[0], C, C), v = columns(t[0], 2 * C, C);
    } else {
      q = t[0], k = t[1], v = t[2];
    }
  };
  const AttentionMask mask = s.mask;
  const bool padding = s.padding;
  c.forward = [views, saved, H, mask, padding, drop](const OpRun& r) {
    Tensor q, k, v;
    views(r.in, q, k, v);
    attention_forward(r.out[0], saved(r.saved[0]), q, k, v, H, mask, padding ? r.ids[0] : Tensor{}, drop);
  };
  c.backward = [views, saved, H, mask, padding, drop](const OpRun& r) {
    Tensor q, k, v, dq, dk, dv;
    views(r.in, q, k, v);
    views(r.din, dq, dk, dv);
    attention_backward(dq, dk, dv, r.dout[0], r.out[0], q, k, v, saved(r.saved[0]), H, mask,
                       padding ? r.ids[0] : Tensor{}, drop);
  };
  c.reference = [s, C, drop](const In& in, const Ids& ids) {
    const std::vector<int32_t>* pad = s.padding ? &ids[0] : nullptr;
    if (s.fused) return attention_reference(s, drop.key, in[0], std::vector<float>(in[0].begin() + C, in[0].end()),
                                            std::vector<float>(in[0].begin() + 2 * C, in[0].end()), 3 * C, 3 * C,
                                            3 * C, pad);
    return attention_reference(s, drop.key, in[0], in[1], in[2], C, C, C, pad);
  };
  return c;
}

// Decoding with a cache: the causal attention row len − 1 of the cached prefix.
OpCase attention_decode_case(bool large) {
  const int64_t B = 2, P = large ? 128 : 6, H = 2, hs = large ? 32 : 3, C = H * hs;
  const int len = large ? 100 : 4;
  std::mt19937 rng(9);
  OpCase c = named("attention_decode", Op::ATTENTION_DECODE);
  c.in = {{"q", {B, C}, normal((size_t)(B * C), rng), false},
          {"kcache", {B, P, C}, normal((size_t)(B * P * C), rng), false},
          {"vcache", {B, P, C}, normal((size_t)(B * P * C), rng), false}};
  c.saved = {{B, H, P}};
  c.out = {{{B, C}}};
  c.forward = [len](const OpRun& r) {
    attention_decode_forward(r.out[0], r.saved[0], r.in[0], r.in[1], r.in[2], len, (int)H);
  };
  c.reference = [B, P, C, H, hs, len](const In& in, const Ids&) {
    // The query as row len − 1 of a causal self-attention over the prefix: a [B, len] problem whose other query
    // rows are irrelevant.
    AttentionSetup s{B, 1, len, H, hs, AttentionMask::NONE, false, false, 0.0f, 0, H};
    std::vector<float> k, v;
    for (int64_t b = 0; b < B; b++) {
      k.insert(k.end(), in[1].begin() + b * P * C, in[1].begin() + (b * P + len) * C);
      v.insert(v.end(), in[2].begin() + b * P * C, in[2].begin() + (b * P + len) * C);
    }
    return attention_reference(s, {}, in[0], k, v, C, C, C, nullptr);
  };
  return c;
}

// ---- copy between strided views ------------------------------------------------------------------------------------
// Large: 4096 × 64 = 2^18 elements, the CPU copy's threshold for splitting rows over the team (copy_cpu.cpp).
OpCase copy_case(bool large) {
  const int64_t N = large ? 4096 : 5, C = large ? 64 : 3;
  std::mt19937 rng(10);
  OpCase c = named("copy (strided source)", Op::COPY);
  c.in = {{"src", {N, 3 * C}, normal((size_t)(N * 3 * C), rng), false}};
  c.out = {{{N, C}}};
  c.forward = [C](const OpRun& r) { copy(r.out[0], columns(r.in[0], C, C)); };
  c.reference = [N, C](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)(N * C)));
    for (int64_t n = 0; n < N; n++)
      for (int64_t j = 0; j < C; j++) o[0][(size_t)(n * C + j)] = in[0][(size_t)(n * 3 * C + C + j)];
    return o;
  };
  return c;
}

// Contiguous to contiguous; large: 8193 × 64 elements, over the CPU backend's 2 MB threshold for copying over the
// team, and not a whole number of its 1 MB chunks.
OpCase copy_contiguous_case(bool large) {
  const int64_t N = large ? 8193 : 5, C = large ? 64 : 3;
  std::mt19937 rng(11);
  OpCase c = named("copy (contiguous)", Op::COPY);
  c.in = {{"src", {N, C}, normal((size_t)(N * C), rng), false}};
  c.out = {{{N, C}}};
  c.forward = [](const OpRun& r) { copy(r.out[0], r.in[0]); };
  c.reference = [](const In& in, const Ids&) { return Out{std::vector<double>(in[0].begin(), in[0].end())}; };
  return c;
}

// ---- cross-entropy statistics (the backward is checked by its own test, which composes the loss) ------------------
OpCase crossentropy_case(bool large) {
  const int64_t N = large ? 64 : 4, V = large ? 5000 : 9, col_offset = 5;
  std::mt19937 rng(12);
  OpCase c = named("crossentropy row_max/sumexp (vocabulary piece)", Op::CROSSENTROPY);
  c.in = {{"logits", {N, V}, normal((size_t)(N * V), rng, 3.0f), false}};
  std::vector<int32_t> targets((size_t)N);
  for (auto& t : targets) t = (int32_t)(rng() % (uint32_t)(V + 2 * col_offset));  // some outside the piece
  c.ids = {{"targets", {N}, targets}};
  c.out = {{{N}, true}, {{N}, true}, {{N}, true}};
  c.forward = [](const OpRun& r) {
    crossentropy_row_max(r.out[0], r.in[0]);
    crossentropy_sumexp(r.out[1], r.out[2], r.in[0], r.out[0], r.ids[0], col_offset);
  };
  c.reference = [N, V](const In& in, const Ids& ids) {
    Out o(3, std::vector<double>((size_t)N, 0.0));
    for (int64_t n = 0; n < N; n++) {
      double mx = -1e300;
      for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)in[0][(size_t)(n * V + v)]);
      double s = 0;
      for (int64_t v = 0; v < V; v++) s += std::exp(in[0][(size_t)(n * V + v)] - mx);
      o[0][(size_t)n] = mx, o[1][(size_t)n] = s;
      const int64_t col = ids[0][(size_t)n] - col_offset;
      o[2][(size_t)n] = col >= 0 && col < V ? in[0][(size_t)(n * V + col)] : 0.0;
    }
    return o;
  };
  return c;
}

// ---- optimizer steps and gradient passes (f32 only, no backward) --------------------------------------------------
// The tensors an op updates in place are outputs: the forward copies the inputs into them and runs the op there.
// Scalar results (sums, counts) are written to an f32 output through the backend.

std::vector<float> squares(size_t n, std::mt19937& rng, float scale) {
  std::vector<float> v = normal(n, rng, scale);
  for (auto& x : v) x *= x;
  return v;
}

void write_scalars(const Tensor& out, const std::vector<float>& values) {
  backend_for(out.device).copy_to_device(out.data, values.data(), values.size() * sizeof(float));
}

OpCase adamw_case(bool large) {
  const int64_t N = large ? 100000 : 33;  // large: several work items of 16384
  std::mt19937 rng(13);
  OpCase c = named("adamw update", Op::ADAMW);
  c.in = {{"param", {N}, normal((size_t)N, rng), false},
          {"grad", {N}, normal((size_t)N, rng, 0.1f), false},
          {"m", {N}, normal((size_t)N, rng, 0.05f), false},
          {"v", {N}, squares((size_t)N, rng, 0.1f), false}};
  c.out = {{{N}}, {{N}}, {{N}}};
  // Step 3, lr 1e-3, weight decay 0.1, betas (0.9, 0.999), eps 1e-8.
  const AdamWScalars s{1.0f - 1e-4f, 0.9f, 0.1f, 0.999f, 0.001f, (float)std::sqrt(1.0 - std::pow(0.999, 3)), 1e-8f,
                       (float)(-1e-3 / (1.0 - std::pow(0.9, 3)))};
  c.forward = [s](const OpRun& r) {
    copy(r.out[0], r.in[0]), copy(r.out[1], r.in[2]), copy(r.out[2], r.in[3]);
    adamw_update(r.out[0], r.in[1], r.out[1], r.out[2], s);
  };
  c.reference = [N, s](const In& in, const Ids&) {
    Out o(3, std::vector<double>((size_t)N));
    for (size_t i = 0; i < (size_t)N; i++) {
      const double g = in[1][i];
      const double m = s.beta1 * (double)in[2][i] + s.one_minus_beta1 * g;
      const double v = s.beta2 * (double)in[3][i] + s.one_minus_beta2 * g * g;
      o[0][i] = in[0][i] * (double)s.decay + s.neg_step_size * m / (std::sqrt(v) / s.bias_correction2_sqrt + s.eps);
      o[1][i] = m, o[2][i] = v;
    }
    return o;
  };
  return c;
}

// Both phases with the tensor's own norms: rate = lr·‖p‖/‖u‖.
OpCase lamb_case(bool large) {
  const int64_t N = large ? 16384 : 29;  // one work item of src/optim
  std::mt19937 rng(14);
  OpCase c = named("lamb moments + apply", Op::LAMB);
  c.in = {{"param", {N}, normal((size_t)N, rng), false},
          {"grad", {N}, normal((size_t)N, rng, 0.1f), false},
          {"m", {N}, normal((size_t)N, rng, 0.05f), false},
          {"v", {N}, squares((size_t)N, rng, 0.1f), false}};
  c.out = {{{N}}, {{N}}, {{N}}, {{2}, true}};
  const LambScalars s{0.9f, 0.1f, 0.999f, 1.0f - 0.999f, (float)(1.0 - std::pow(0.9, 2)),
                      (float)(1.0 - std::pow(0.999, 2)), 1e-6f};
  const float wd = 0.01f;
  const double lr = 2e-3;
  c.forward = [s, wd, lr](const OpRun& r) {
    copy(r.out[0], r.in[0]), copy(r.out[1], r.in[2]), copy(r.out[2], r.in[3]);
    const LambSums sums = lamb_moments(r.out[0], r.in[1], r.out[1], r.out[2], s, wd);
    lamb_apply(r.out[0], r.out[1], r.out[2], s, wd, (float)(lr * (std::sqrt(sums.p_sq) / std::sqrt(sums.u_sq))));
    write_scalars(r.out[3], {(float)sums.p_sq, (float)sums.u_sq});
  };
  c.reference = [N, s, wd, lr](const In& in, const Ids&) {
    Out o(3, std::vector<double>((size_t)N));
    std::vector<double> u((size_t)N);
    double pp = 0, uu = 0;
    for (size_t i = 0; i < (size_t)N; i++) {
      const double g = in[1][i], p = in[0][i];
      o[1][i] = s.beta1 * (double)in[2][i] + s.beta3 * g;
      o[2][i] = s.beta2 * (double)in[3][i] + s.one_minus_beta2 * g * g;
      u[i] = (o[1][i] / s.bias_correction1) / (std::sqrt(o[2][i] / s.bias_correction2) + s.eps) + wd * p;
      pp += p * p, uu += u[i] * u[i];
    }
    const double rate = lr * std::sqrt(pp) / std::sqrt(uu);
    for (size_t i = 0; i < (size_t)N; i++) o[0][i] = in[0][i] - rate * u[i];
    o.push_back({pp, uu});
    return o;
  };
  return c;
}

// momentum: with a buffer (first: its first step), else plain SGD.
OpCase sgd_case(bool large, bool momentum, bool first) {
  const int64_t N = large ? 100000 : 21;
  std::mt19937 rng(15);
  OpCase c = named(std::string("sgd") + (momentum ? first ? " momentum, first step" : " momentum" : ""), Op::SGD);
  c.in = {{"param", {N}, normal((size_t)N, rng), false},
          {"grad", {N}, normal((size_t)N, rng, 0.1f), false},
          {"buffer", {N}, normal((size_t)N, rng, 0.1f), false}};
  c.out = {{{N}}, {{N}}};
  const SgdScalars s{true, first, 0.01f, 0.9f, -0.05f};
  c.forward = [s, momentum](const OpRun& r) {
    copy(r.out[0], r.in[0]), copy(r.out[1], r.in[2]);
    sgd_update(r.out[0], r.in[1], momentum ? r.out[1] : Tensor{}, s);
  };
  c.reference = [N, s, momentum](const In& in, const Ids&) {
    Out o(2, std::vector<double>((size_t)N));
    for (size_t i = 0; i < (size_t)N; i++) {
      const double d = (double)in[0][i] * s.weight_decay + in[1][i];
      const double b = !momentum ? (double)in[2][i] : s.first ? d : (double)in[2][i] * s.momentum + d;
      o[0][i] = in[0][i] + s.neg_lr * (momentum ? b : d);
      o[1][i] = b;
    }
    return o;
  };
  return c;
}

OpCase scale_case(bool large) {
  const int64_t N = large ? 100000 : 19;  // large: above the 65536 of the parallel loop
  std::mt19937 rng(16);
  OpCase c = named("scale", Op::SCALE);
  c.in = {{"x", {N}, normal((size_t)N, rng), false}};
  c.out = {{{N}}};
  c.forward = [](const OpRun& r) {
    copy(r.out[0], r.in[0]);
    scale(r.out[0], 0.37f);
  };
  c.reference = [N](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (size_t i = 0; i < (size_t)N; i++) o[0][i] = (double)in[0][i] * (double)0.37f;
    return o;
  };
  return c;
}

// Both orders, each continuing from a start value.
OpCase sum_squares_case(bool large) {
  const int64_t N = large ? 100000 : 23;
  std::mt19937 rng(17);
  OpCase c = named("sum_squares parallel / sequential", Op::SUM_SQUARES);
  c.in = {{"x", {N}, normal((size_t)N, rng), false}};
  c.out = {{{2}, true}};
  c.forward = [](const OpRun& r) {
    write_scalars(r.out[0], {(float)sum_squares(r.in[0], SumOrder::PARALLEL, 0.5),
                             (float)sum_squares(r.in[0], SumOrder::SEQUENTIAL, 0.25)});
  };
  c.reference = [](const In& in, const Ids&) {
    double s = 0;
    for (float x : in[0]) s += (double)x * x;
    return Out{{0.5 + s, 0.25 + s}};
  };
  return c;
}

OpCase count_nonfinite_case(bool large) {
  const int64_t N = large ? 100000 : 17;
  std::mt19937 rng(18);
  OpCase c = named("count_nonfinite", Op::COUNT_NONFINITE);
  std::vector<float> x = normal((size_t)N, rng, 1e4f);
  x[1] = INFINITY, x[4] = -INFINITY, x[9] = NAN, x[(size_t)N - 1] = NAN;
  x[2] = 3.4e38f;  // finite
  c.in = {{"x", {N}, x, false}};
  c.out = {{{1}, true}};
  c.forward = [](const OpRun& r) { write_scalars(r.out[0], {(float)count_nonfinite(r.in[0])}); };
  c.reference = [](const In& in, const Ids&) {
    double n = 0;
    for (float v : in[0]) n += std::isinf(v) || std::isnan(v) ? 1 : 0;
    return Out{{n}};
  };
  return c;
}

// The nearest binary16 value of x (|x| < 65504), ties to even: spacing 2^(e−10) for x in [2^e, 2^(e+1)), e >= −14;
// the subnormals below 2^−14 share the spacing 2^−24.
double nearest_f16(double x) {
  if (x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // |x| = f·2^e, f in [0.5, 1)
  const double spacing = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  return std::nearbyint(x / spacing) * spacing;
}

OpCase round_to_f16_case(bool large) {
  const int64_t N = large ? 100003 : 31;
  std::mt19937 rng(19);
  OpCase c = named("round_to_f16_storage", Op::ROUND_F16);
  std::vector<float> x = normal((size_t)N, rng, 100.0f);
  x[0] = 65000.0f, x[1] = -3e-6f, x[2] = 4.5e-7f, x[3] = 1e-8f, x[4] = 2049.0f, x[5] = 2051.0f;  // ties to even
  c.in = {{"x", {N}, x, false}};
  c.out = {{{N}}};
  c.forward = [](const OpRun& r) {
    copy(r.out[0], r.in[0]);
    round_to_f16_storage(r.out[0]);
  };
  c.reference = [N](const In& in, const Ids&) {
    Out o(1, std::vector<double>((size_t)N));
    for (size_t i = 0; i < (size_t)N; i++) o[0][i] = nearest_f16(in[0][i]);
    return o;
  };
  return c;
}

uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t& hi) {
  const uint64_t p = (uint64_t)a * b;
  hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

}  // namespace

Philox4 philox4x32_10(Philox4 x, uint32_t k0, uint32_t k1) {
  // Random123 philox4x32: multipliers 0xD2511F53, 0xCD9E8D57; Weyl key increments 0x9E3779B9, 0xBB67AE85.
  for (int round = 0; round < 10; round++) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, x.v[0], hi0);
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, x.v[2], hi1);
    x = Philox4{{hi1 ^ x.v[1] ^ k0, lo1, hi0 ^ x.v[3] ^ k1, lo0}};
  }
  return x;
}

bool reference_keep(float p, uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t j = i / 4;
  const Philox4 r = philox4x32_10({{(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)}},
                                  (uint32_t)seed, (uint32_t)(seed >> 32));
  const double u = (double)(r.v[i % 4] >> 8) * (1.0 / 16777216.0);
  return u >= (double)p;
}

Tensor columns(const Tensor& t, int64_t first, int64_t count) {
  Tensor v = t;
  v.data = static_cast<char*>(t.data) + (size_t)first * dtype_size(t.dtype);
  v.row_stride = t.stride();
  v.shape[(size_t)t.ndim - 1] = count;
  return v;
}

std::vector<OpCase> op_cases(bool large) {
  std::vector<OpCase> cases;
  cases.push_back(embedding_case(large));
  cases.push_back(embedding_overwrite_case());
  cases.push_back(layernorm_case(large, 1e-5f));
  cases.push_back(layernorm_case(large, 1e-12f));  // BERT's epsilon
  for (WeightLayout layout : {WeightLayout::IN_OUT, WeightLayout::OUT_IN})
    for (bool bias : {true, false}) cases.push_back(linear_case(large, layout, bias));
  cases.push_back(bias_add_case(large));
  cases.push_back(add_case(large));
  cases.push_back(gelu_case(large, GeluKind::TANH));
  cases.push_back(gelu_case(large, GeluKind::ERF));
  cases.push_back(tanh_case(large));
  cases.push_back(dropout_case(large, 0.0f));
  cases.push_back(dropout_case(large, 0.1f));
  cases.push_back(dropout_case(large, 0.5f));
  const int64_t T = large ? 64 : 5, hs = large ? 32 : 3;
  cases.push_back(attention_case("attention causal, fused q|k|v",
                                 {2, T, T, 3, hs, AttentionMask::CAUSAL, false, true, 0.0f, 0, 3}));
  cases.push_back(attention_case("attention causal, dropout 0.2, heads 2-4 of 6",
                                 {2, T, T, 3, hs, AttentionMask::CAUSAL, false, true, 0.2f, 2, 6}));
  // Causal attention runs in blocks of 64 query rows against their keys only: 70 rows are a whole block and a
  // partial one (with dropout, whose factors cover whole rows).
  cases.push_back(attention_case("attention causal, two row blocks, dropout 0.1",
                                 {1, large ? 150 : 70, large ? 150 : 70, 1, 2, AttentionMask::CAUSAL, false, true,
                                  0.1f, 0, 1}));
  cases.push_back(attention_case("attention padding mask",
                                 {3, T, T, 2, hs, AttentionMask::NONE, true, false, 0.0f, 0, 2}));
  cases.push_back(attention_case("cross-attention Tq != Tk, padding, dropout 0.3",
                                 {3, T, T + 3, 2, hs, AttentionMask::NONE, true, false, 0.3f, 0, 2}));
  // The CUDA flash kernels' edges (head sizes 32/64/128 on tiles of 16·W rows and 32/64 keys or queries; other
  // head sizes take the row kernels): lengths off every tile multiple, cross attention with few queries, causal with
  // key padding (the last batch row has no allowed key at all), dropout with a head offset, strided fused q|k|v
  // views, and enough (batch, head, tile) blocks to fill many CTAs.
  if (large) {
    cases.push_back(attention_case("attention causal, 77 rows, hs 64, padding, fused q|k|v",
                                   {2, 77, 77, 2, 64, AttentionMask::CAUSAL, true, true, 0.0f, 0, 2}));
    cases.push_back(attention_case("attention causal, 130 rows, hs 32, dropout 0.1, heads 1-2 of 5",
                                   {3, 130, 130, 2, 32, AttentionMask::CAUSAL, false, true, 0.1f, 1, 5}));
    cases.push_back(attention_case("cross-attention Tq 5, Tk 77, hs 128, padding",
                                   {2, 5, 77, 2, 128, AttentionMask::NONE, true, false, 0.0f, 0, 2}));
    cases.push_back(attention_case("cross-attention Tq 130, Tk 77, hs 64, padding, dropout 0.3",
                                   {2, 130, 77, 2, 64, AttentionMask::NONE, true, false, 0.3f, 0, 2}));
    cases.push_back(attention_case("attention causal, 77 rows, hs 24 (row kernels), padding, dropout 0.1",
                                   {2, 77, 77, 2, 24, AttentionMask::CAUSAL, true, true, 0.1f, 0, 2}));
    cases.push_back(attention_case("attention B 4, 8 heads, 130 rows, hs 64, padding, dropout 0.2",
                                   {4, 130, 130, 8, 64, AttentionMask::NONE, true, false, 0.2f, 0, 8}));
  } else {
    cases.push_back(attention_case("attention causal, 70 rows, hs 32, dropout 0.1, fused q|k|v",
                                   {1, 70, 70, 1, 32, AttentionMask::CAUSAL, false, true, 0.1f, 0, 1}));
    cases.push_back(attention_case("cross-attention Tq 5, Tk 70, hs 32, padding",
                                   {2, 5, 70, 1, 32, AttentionMask::NONE, true, false, 0.0f, 0, 1}));
  }
  cases.push_back(attention_decode_case(large));
  cases.push_back(copy_case(large));
  cases.push_back(copy_contiguous_case(large));
  cases.push_back(crossentropy_case(large));
  cases.push_back(adamw_case(large));
  cases.push_back(lamb_case(large));
  cases.push_back(sgd_case(large, true, true));
  cases.push_back(sgd_case(large, true, false));
  cases.push_back(sgd_case(large, false, false));
  cases.push_back(scale_case(large));
  cases.push_back(sum_squares_case(large));
  cases.push_back(count_nonfinite_case(large));
  cases.push_back(round_to_f16_case(large));
  for (OpCase& c : shape_cases(large)) cases.push_back(std::move(c));
  return cases;
}

}  // namespace lmforge::kernels::testing
