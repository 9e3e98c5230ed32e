// defines: the ops of kernels/ops.h: operand checks and ONE dispatch per op on (device, dtype); op_supported()
#include "kernels/ops.h"

#include <string>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/linear_f16.h"
#include "kernels/cpu/lowp.h"
#include "util/error.h"

namespace lmforge::kernels {
namespace {

[[noreturn]] void fail(Op op, const std::string& why) { throw Error(std::string("kernel ") + op_name(op) + ": " + why); }

void need(bool ok, Op op, const std::string& why) {
  if (!ok) fail(op, why);
}

// Every present operand on the first one's device; floating operands f32 or the op's low-precision dtype; ids i32.
// The op's dtype is the low-precision dtype among its floating operands (bf16 or f16; f32 when all are f32): a
// low-precision op may take fp32 operands beside its own dtype — the fp32 main gradients of bf16 weights, fp32
// logits from bf16 activations, the always-f32 statistics — but never bf16 and f16 together.
struct Checked {
  Op op;
  Device device;
  DType dtype;
};

Checked check(Op op, const Tensor& first, std::initializer_list<const Tensor*> floats,
              std::initializer_list<const Tensor*> ids = {}) {
  need(first.present(), op, "missing operand");
  Checked c{op, first.device, DType::F32};
  auto floating = [&](const Tensor& t) {
    if (!t.present()) return;
    need(t.device == c.device, op, "operands on different devices: " + first.describe() + " and " + t.describe());
    need(is_floating(t.dtype), op, "operands of different dtypes: " + first.describe() + " and " + t.describe() +
                                       " (a floating operand is expected)");
    if (t.dtype == DType::F32) return;
    need(c.dtype == DType::F32 || c.dtype == t.dtype, op,
         "operands of different dtypes: " + std::string(dtype_name(c.dtype)) + " and " + t.describe());
    c.dtype = t.dtype;
  };
  if (first.dtype != DType::I32) floating(first);
  for (const Tensor* t : floats) floating(*t);
  for (const Tensor* t : ids) {
    if (!t->present()) continue;
    need(t->device == c.device, op, "operands on different devices: " + first.describe() + " and " + t->describe());
    need(t->dtype == DType::I32, op, "ids must be i32, got " + t->describe());
  }
  if (!op_supported(op, c.device, c.dtype))
    fail(op, std::string("not implemented for ") + dtype_name(c.dtype) + " on " + device_name(c.device));
  return c;
}

void same_numel(Op op, const Tensor& a, const Tensor& b) {
  need(a.numel() == b.numel(), op, "size mismatch: " + a.describe() + " vs " + b.describe());
}

void contiguous(Op op, const Tensor& t) { need(!t.present() || t.contiguous(), op, "strided operand " + t.describe()); }

// An op whose dtype is BF16 or F16 goes to its cpu::*_lowp kernel (kernels/cpu/lowp_ops.cpp, attention.cpp), which
// converts a row or block at a time into a thread's fp32 scratch; the linear layer's bf16 GEMMs run on the bf16 data
// itself (cpu::linear_forward_bf16), its f16 ones on f16 blocks converted into reused fp32 scratch
// (cpu::linear_forward_f16). The fp32 kernels take the rest: F32 operands as they are, and through cpu::AsF32
// (whole operands converted into temporaries) the few low-precision combinations without a *_lowp path (attention
// decoding, bf16 linear layers on a CPU without AVX512-BF16).
using In = cpu::AsF32;
constexpr cpu::AsF32::Mode IN = cpu::AsF32::IN, OUT = cpu::AsF32::OUT, INOUT = cpu::AsF32::INOUT;
const int32_t* ids(const Tensor& t) { return t.present() ? static_cast<const int32_t*>(t.data) : nullptr; }

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::EMBEDDING: return "embedding";
    case Op::LAYERNORM: return "layernorm";
    case Op::LINEAR: return "linear";
    case Op::BIAS_ADD: return "bias_add";
    case Op::ADD: return "add";
    case Op::GELU: return "gelu";
    case Op::DROPOUT: return "dropout";
    case Op::ATTENTION: return "attention";
    case Op::ATTENTION_DECODE: return "attention_decode";
    case Op::COPY: return "copy";
    case Op::CROSSENTROPY: return "crossentropy";
  }
  return "?";
}

// The CPU implements every op in fp32 and on bf16 and f16 storage. A backend or dtype added later lists its ops here.
bool op_supported(Op op, Device device, DType dtype) {
  (void)op;
  return device == Device::CPU && is_floating(dtype);
}

bool bf16_gemm_native() { return cpu::has_avx512_bf16(); }

// ---- embedding ----------------------------------------------------------------------------------------------------

void embedding_forward(const Tensor& out, const Tensor& ids_, const Tensor& table, int64_t row_offset, bool accumulate) {
  const Checked c = check(Op::EMBEDDING, out, {&table}, {&ids_});
  need(table.ndim == 2 && out.dim(-1) == table.dim(1) && out.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes out " + out.describe() + ", ids " + ids_.describe() + ", table " + table.describe());
  contiguous(Op::EMBEDDING, out);
  if (c.dtype != DType::F32) return cpu::embedding_forward_lowp(out, ids(ids_), table, row_offset, accumulate);
  const In o(out, accumulate ? INOUT : OUT), tb(table, IN);
  cpu::embedding_forward(o, ids(ids_), tb, table.dim(0), row_offset, (int)out.rows(), (int)out.dim(-1),
                         accumulate);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids_, int64_t row_offset) {
  const Checked c = check(Op::EMBEDDING, dtable, {&dout}, {&ids_});
  need(dtable.ndim == 2 && dout.dim(-1) == dtable.dim(1) && dout.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes dtable " + dtable.describe() + ", dout " + dout.describe() + ", ids " + ids_.describe());
  if (c.dtype != DType::F32) return cpu::embedding_backward_lowp(dtable, dout, ids(ids_), row_offset);
  const In dt(dtable, INOUT), d(dout, IN);
  cpu::embedding_backward(dt, d, ids(ids_), dtable.dim(0), row_offset, (int)dout.rows(),
                          (int)dout.dim(-1));
}

// ---- layernorm ----------------------------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, float eps) {
  const Checked c = check(Op::LAYERNORM, out, {&inp, &weight, &bias, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(out.numel() == N * C && weight.numel() == C && bias.numel() == C && mean.numel() >= N && rstd.numel() >= N,
       Op::LAYERNORM, "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  if (c.dtype != DType::F32) {
    need(mean.dtype == DType::F32 && rstd.dtype == DType::F32, Op::LAYERNORM, "mean and rstd must be f32");
    need(inp.contiguous() && out.contiguous(), Op::LAYERNORM, "strided operand");
    return cpu::layernorm_forward_lowp(out, mean.f32(), rstd.f32(), inp, weight, bias, eps);
  }
  const In o(out, OUT), mu(mean, OUT), rs(rstd, OUT), x(inp, IN), w(weight, IN), b(bias, IN);
  cpu::layernorm_forward(o, mu, rs, x, w, b, (int)N, (int)C, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const Checked c = check(Op::LAYERNORM, dinp, {&dweight, &dbias, &dout, &inp, &weight, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(dinp.numel() == N * C && dout.numel() == N * C && dweight.numel() == C && dbias.numel() == C, Op::LAYERNORM,
       "shapes dinp " + dinp.describe() + ", dout " + dout.describe() + ", dweight " + dweight.describe());
  if (c.dtype != DType::F32) {
    need(mean.dtype == DType::F32 && rstd.dtype == DType::F32, Op::LAYERNORM, "mean and rstd must be f32");
    need(inp.contiguous() && dout.contiguous() && dinp.contiguous(), Op::LAYERNORM, "strided operand");
    return cpu::layernorm_backward_lowp(dinp, dweight, dbias, dout, inp, weight, mean.f32(), rstd.f32());
  }
  const In dx(dinp, INOUT), dw(dweight, INOUT), db(dbias, INOUT), d(dout, IN), x(inp, IN), w(weight, IN), mu(mean, IN),
      rs(rstd, IN);
  cpu::layernorm_backward(dx, dw, db, d, x, w, mu, rs, (int)N, (int)C);
}

// ---- linear -------------------------------------------------------------------------------------------------------

namespace {
void linear_shapes(const Tensor& out, const Tensor& inp, const Tensor& weight, WeightLayout layout, int64_t& N,
                   int64_t& IC, int64_t& OC) {
  N = inp.rows(), IC = inp.dim(-1);
  need(weight.ndim == 2, Op::LINEAR, "weight must be 2-D, got " + weight.describe());
  OC = layout == WeightLayout::IN_OUT ? weight.dim(1) : weight.dim(0);
  const int64_t wi = layout == WeightLayout::IN_OUT ? weight.dim(0) : weight.dim(1);
  need(wi == IC && out.rows() == N && out.dim(-1) == OC, Op::LINEAR,
       "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  contiguous(Op::LINEAR, out);
  contiguous(Op::LINEAR, inp);
}
}  // namespace

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                    WeightLayout layout) {
  const Checked c = check(Op::LINEAR, out, {&inp, &weight, &bias});
  int64_t N, IC, OC;
  linear_shapes(out, inp, weight, layout, N, IC, OC);
  need(!bias.present() || bias.numel() == OC, Op::LINEAR, "bias " + bias.describe());
  if (c.dtype == DType::BF16 && bf16_gemm_native()) {
    cpu::linear_forward_bf16(out, inp, weight, bias, (int)N, (int)IC, (int)OC, layout);
    return;
  }
  if (c.dtype == DType::F16) return cpu::linear_forward_f16(out, inp, weight, bias, (int)N, (int)IC, (int)OC, layout);
  const In o(out, OUT), x(inp, IN), w(weight, IN), b(bias, IN);
  cpu::linear_forward(o, x, w, b, (int)N, (int)IC, (int)OC, layout);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const Checked c = check(Op::LINEAR, dout, {&dinp, &dweight, &dbias, &inp, &weight});
  int64_t N, IC, OC;
  linear_shapes(dout, inp, weight, layout, N, IC, OC);
  need(!dinp.present() || dinp.numel() == N * IC, Op::LINEAR, "dinp " + dinp.describe());
  need(!dweight.present() || dweight.numel() == IC * OC, Op::LINEAR, "dweight " + dweight.describe());
  need(!dbias.present() || dbias.numel() == OC, Op::LINEAR, "dbias " + dbias.describe());
  contiguous(Op::LINEAR, dinp);
  if (c.dtype == DType::BF16 && bf16_gemm_native()) {
    cpu::linear_backward_bf16(dinp, dweight, dbias, dout, inp, weight, (int)N, (int)IC, (int)OC, layout);
    return;
  }
  if (c.dtype == DType::F16)
    return cpu::linear_backward_f16(dinp, dweight, dbias, dout, inp, weight, (int)N, (int)IC, (int)OC, layout);
  const In dx(dinp, INOUT), dw(dweight, INOUT), db(dbias, INOUT), d(dout, IN), x(inp, IN), w(weight, IN);
  cpu::linear_backward(dx, dw, db, d, x, w, (int)N, (int)IC, (int)OC, layout);
}

void bias_add_forward(const Tensor& x, const Tensor& bias) {
  const Checked c = check(Op::BIAS_ADD, x, {&bias});
  need(bias.numel() == x.dim(-1), Op::BIAS_ADD, "bias " + bias.describe() + " for " + x.describe());
  contiguous(Op::BIAS_ADD, x);
  if (c.dtype != DType::F32) return cpu::bias_add_forward_lowp(x, bias);
  const In y(x, INOUT), b(bias, IN);
  cpu::bias_add_forward(y, b, (int)x.rows(), (int)x.dim(-1));
}

void bias_add_backward(const Tensor& dbias, const Tensor& dout) {
  const Checked c = check(Op::BIAS_ADD, dbias, {&dout});
  need(dbias.numel() == dout.dim(-1), Op::BIAS_ADD, "dbias " + dbias.describe() + " for " + dout.describe());
  if (c.dtype != DType::F32) return cpu::column_sums_lowp(dbias, dout);
  const In db(dbias, INOUT), d(dout, IN);
  cpu::column_sums(db, d, (int)dout.rows(), (int)dout.dim(-1));
}

// ---- add, gelu, dropout, copy ---------------------------------------------------------------------------------------

void add_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Checked c = check(Op::ADD, out, {&a, &b});
  same_numel(Op::ADD, out, a);
  same_numel(Op::ADD, out, b);
  contiguous(Op::ADD, out), contiguous(Op::ADD, a), contiguous(Op::ADD, b);
  if (c.dtype != DType::F32) return cpu::add_forward_lowp(out, a, b);
  const In x(a, IN), y(b, IN), o(out, OUT);
  cpu::add_forward(o, x, y, (size_t)out.numel());
}

void add_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const Checked c = check(Op::ADD, dout, {&da, &db});
  for (const Tensor* d : {&da, &db}) {
    if (!d->present()) continue;
    same_numel(Op::ADD, *d, dout);
    contiguous(Op::ADD, *d);
    if (c.dtype != DType::F32) {
      cpu::accumulate_lowp(*d, dout);
      continue;
    }
    const In acc(*d, INOUT), g(dout, IN);
    cpu::accumulate(acc, g, (size_t)dout.numel());
  }
}

void gelu_forward(const Tensor& out, const Tensor& inp, GeluKind kind) {
  const Checked c = check(Op::GELU, out, {&inp});
  same_numel(Op::GELU, out, inp);
  if (c.dtype != DType::F32) {
    need(out.contiguous() && inp.contiguous(), Op::GELU, "strided operand");
    return cpu::gelu_forward_lowp(out, inp, kind);
  }
  const In x(inp, IN), o(out, OUT);
  cpu::gelu_forward(o, x, (size_t)out.numel(), kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  const Checked c = check(Op::GELU, dinp, {&inp, &dout});
  same_numel(Op::GELU, dinp, inp);
  same_numel(Op::GELU, dinp, dout);
  if (c.dtype != DType::F32) {
    need(dinp.contiguous() && inp.contiguous() && dout.contiguous(), Op::GELU, "strided operand");
    return cpu::gelu_backward_lowp(dinp, inp, dout, kind);
  }
  const In dx(dinp, INOUT), x(inp, IN), d(dout, IN);
  cpu::gelu_backward(dx, x, d, (size_t)dinp.numel(), kind);
}

void dropout_forward(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const Checked c = check(Op::DROPOUT, out, {&inp});
  same_numel(Op::DROPOUT, out, inp);
  need(key.p >= 0.0f && key.p < 1.0f, Op::DROPOUT, "probability " + std::to_string(key.p) + " outside [0, 1)");
  contiguous(Op::DROPOUT, out), contiguous(Op::DROPOUT, inp);
  if (c.dtype != DType::F32) return cpu::dropout_forward_lowp(out, inp, key);
  const In x(inp, IN), o(out, OUT);
  cpu::dropout_forward(o, x, (size_t)out.numel(), key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const Checked c = check(Op::DROPOUT, dinp, {&dout});
  same_numel(Op::DROPOUT, dinp, dout);
  contiguous(Op::DROPOUT, dinp), contiguous(Op::DROPOUT, dout);
  if (c.dtype != DType::F32) return cpu::dropout_backward_lowp(dinp, dout, key);
  const In dx(dinp, INOUT), d(dout, IN);
  cpu::dropout_backward(dx, d, (size_t)dinp.numel(), key);
}

void copy(const Tensor& dst, const Tensor& src) {
  const Checked c = check(Op::COPY, dst, {&src});
  need(dst.rows() == src.rows() && dst.dim(-1) == src.dim(-1), Op::COPY,
       "shapes " + dst.describe() + " and " + src.describe());
  if (c.dtype != DType::F32) return cpu::copy_lowp(dst, src);
  const In x(src, IN), o(dst, OUT);
  cpu::copy_rows(o, dst.stride(), x, src.stride(), dst.rows(), dst.dim(-1));
}

// ---- attention ----------------------------------------------------------------------------------------------------

namespace {
cpu::AttentionShape attention_shape(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k,
                                    const Tensor& v, int heads, AttentionMask mask, const Tensor& key_padding) {
  const Op op = Op::ATTENTION;
  need(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && out.ndim == 3, op,
       "q, k, v and out must be [B,T,H·hs]: " + q.describe() + ", " + k.describe() + ", " + v.describe());
  cpu::AttentionShape s;
  s.B = (int)q.dim(0), s.Tq = (int)q.dim(1), s.Tk = (int)k.dim(1), s.H = heads;
  need(heads > 0 && q.dim(2) % heads == 0, op, std::to_string(heads) + " heads for " + q.describe());
  s.hs = (int)(q.dim(2) / heads);
  need(k.dim(0) == s.B && v.dim(0) == s.B && v.dim(1) == s.Tk && k.dim(2) == q.dim(2) && v.dim(2) == q.dim(2) &&
           out.dim(0) == s.B && out.dim(1) == s.Tq && out.dim(2) == q.dim(2),
       op, "shapes q " + q.describe() + ", k " + k.describe() + ", v " + v.describe() + ", out " + out.describe());
  need(probs.numel() == (int64_t)s.B * heads * s.Tq * s.Tk, op, "probs " + probs.describe());
  need(mask != AttentionMask::CAUSAL || s.Tq == s.Tk, op, "a causal mask needs Tq == Tk");
  need(!key_padding.present() || key_padding.numel() == (int64_t)s.B * s.Tk, op, "key padding " + key_padding.describe());
  s.ldq = q.stride(), s.ldk = k.stride(), s.ldv = v.stride(), s.ldo = out.stride();
  return s;
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k, const Tensor& v,
                       int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  const Checked c = check(Op::ATTENTION, out, {&probs, &q, &k, &v}, {&key_padding});
  const cpu::AttentionShape s = attention_shape(out, probs, q, k, v, heads, mask, key_padding);
  if (c.dtype != DType::F32 && probs.dtype == DType::F32)
    return cpu::attention_forward_lowp(out, probs.f32(), q, k, v, s, mask == AttentionMask::CAUSAL, ids(key_padding),
                                       dropout);
  const In o(out, OUT), p(probs, OUT), qf(q, IN), kf(k, IN), vf(v, IN);
  cpu::attention_forward(o, p, qf, kf, vf, s, mask == AttentionMask::CAUSAL, ids(key_padding),
                         dropout);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& probs, int heads, AttentionMask mask,
                        const Tensor& key_padding, const AttentionDropout& dropout) {
  const Checked c = check(Op::ATTENTION, dout, {&dq, &dk, &dv, &q, &k, &v, &probs}, {&key_padding});
  const cpu::AttentionShape s = attention_shape(dout, probs, q, k, v, heads, mask, key_padding);
  need(dq.stride() == s.ldq && dk.stride() == s.ldk && dv.stride() == s.ldv && dq.numel() == q.numel() &&
           dk.numel() == k.numel() && dv.numel() == v.numel(),
       Op::ATTENTION, "dq, dk, dv must be shaped and strided like q, k, v");
  if (c.dtype != DType::F32 && probs.dtype == DType::F32)
    return cpu::attention_backward_lowp(dq, dk, dv, dout, q, k, v, probs.f32(), s, mask == AttentionMask::CAUSAL,
                                        ids(key_padding), dropout);
  const In dqf(dq, INOUT), dkf(dk, INOUT), dvf(dv, INOUT), d(dout, IN), qf(q, IN), kf(k, IN), vf(v, IN), p(probs, IN);
  cpu::attention_backward(dqf, dkf, dvf, d, qf, kf, vf, p, s, mask == AttentionMask::CAUSAL,
                          ids(key_padding), dropout);
}

void attention_decode_forward(const Tensor& out, const Tensor& scratch, const Tensor& q, const Tensor& kcache,
                              const Tensor& vcache, int len, int heads) {
  check(Op::ATTENTION_DECODE, out, {&scratch, &q, &kcache, &vcache});
  need(kcache.ndim == 3 && vcache.numel() == kcache.numel(), Op::ATTENTION_DECODE, "cache " + kcache.describe());
  const int64_t B = kcache.dim(0), P = kcache.dim(1), C = kcache.dim(2);
  need(len >= 1 && len <= P && q.rows() == B && q.dim(-1) == C && out.numel() == B * C && C % heads == 0 &&
           scratch.numel() >= B * heads * P,
       Op::ATTENTION_DECODE, "shapes q " + q.describe() + ", cache " + kcache.describe() + ", len " + std::to_string(len));
  contiguous(Op::ATTENTION_DECODE, out);
  const In o(out, OUT), sc(scratch, OUT), qf(q, IN), kc(kcache, IN), vc(vcache, IN);
  cpu::attention_decode_forward(o, sc, qf, q.stride(), kc, vc, (int)B, len, (int)P, (int)C,
                                heads);
}

// ---- cross-entropy ------------------------------------------------------------------------------------------------

void crossentropy_row_max(const Tensor& row_max, const Tensor& logits) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&row_max});
  need(row_max.numel() == logits.rows(), Op::CROSSENTROPY, "row_max " + row_max.describe());
  contiguous(Op::CROSSENTROPY, logits);
  if (c.dtype != DType::F32 && row_max.dtype == DType::F32) return cpu::crossentropy_row_max_lowp(row_max.f32(), logits);
  const In m(row_max, OUT), l(logits, IN);
  cpu::crossentropy_row_max(m, l, (int)logits.rows(), (int)logits.dim(-1));
}

void crossentropy_sumexp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                         const Tensor& targets, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&sumexp, &target_logit, &m}, {&targets});
  const int64_t N = logits.rows();
  need(sumexp.numel() == N && target_logit.numel() == N && m.numel() == N && targets.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  if (c.dtype != DType::F32 && sumexp.dtype == DType::F32 && target_logit.dtype == DType::F32 && m.dtype == DType::F32 &&
      logits.contiguous())
    return cpu::crossentropy_sumexp_lowp(sumexp.f32(), target_logit.f32(), logits, m.f32(), ids(targets), col_offset);
  const In se(sumexp, OUT), tl(target_logit, OUT), l(logits, IN), mx(m, IN);
  cpu::crossentropy_sumexp(se, tl, l, mx, ids(targets), col_offset, (int)N,
                           (int)logits.dim(-1));
}

void crossentropy_stats(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                        const Tensor& targets, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&row_max, &sumexp, &target_logit}, {&targets});
  const int64_t N = logits.rows();
  need(row_max.numel() == N && sumexp.numel() == N && target_logit.numel() == N && targets.numel() == N,
       Op::CROSSENTROPY, "per-row operands for " + logits.describe());
  contiguous(Op::CROSSENTROPY, logits);
  if (row_max.dtype != DType::F32 || sumexp.dtype != DType::F32 || target_logit.dtype != DType::F32) {
    crossentropy_row_max(row_max, logits);  // the ops' own conversions of low-precision statistics
    return crossentropy_sumexp(sumexp, target_logit, logits, row_max, targets, col_offset);
  }
  if (c.dtype != DType::F32)
    return cpu::crossentropy_stats_lowp(row_max.f32(), sumexp.f32(), target_logit.f32(), logits, ids(targets),
                                        col_offset);
  cpu::crossentropy_stats(row_max.f32(), sumexp.f32(), target_logit.f32(), logits.f32(), ids(targets), col_offset,
                          (int)N, (int)logits.dim(-1));
}

void crossentropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                           const Tensor& dloss, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&dlogits, &lse, &dloss}, {&targets});
  const int64_t N = logits.rows();
  same_numel(Op::CROSSENTROPY, dlogits, logits);
  need(lse.numel() == N && targets.numel() == N && dloss.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  if (c.dtype != DType::F32 && lse.dtype == DType::F32 && dloss.dtype == DType::F32 && logits.contiguous() &&
      dlogits.contiguous())
    return cpu::crossentropy_backward_lowp(dlogits, logits, lse.f32(), ids(targets), dloss.f32(), col_offset);
  const In l(logits, IN), dl(dlogits, OUT), ls(lse, IN), dls(dloss, IN);
  cpu::crossentropy_backward(dl, l, ls, ids(targets), dls, col_offset, (int)N,
                             (int)logits.dim(-1));
}

}  // namespace lmforge::kernels
