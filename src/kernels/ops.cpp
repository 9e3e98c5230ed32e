// defines: the ops of kernels/ops.h: operand checks and ONE dispatch per op on (device, dtype); op_supported()
#include "kernels/ops.h"

#include <string>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
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

// Floating operands reach the CPU kernels as fp32 (cpu::AsF32: bf16/f16 storage converted in, and out again for
// outputs), so every op exists in every storage dtype with fp32 arithmetic; the linear layer's bf16 GEMMs are the
// exception, running on the bf16 data itself (cpu::linear_forward_bf16).
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
  check(Op::EMBEDDING, out, {&table}, {&ids_});
  need(table.ndim == 2 && out.dim(-1) == table.dim(1) && out.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes out " + out.describe() + ", ids " + ids_.describe() + ", table " + table.describe());
  contiguous(Op::EMBEDDING, out);
  const In o(out, accumulate ? INOUT : OUT), tb(table, IN);
  cpu::embedding_forward(o, ids(ids_), tb, table.dim(0), row_offset, (int)out.rows(), (int)out.dim(-1),
                         accumulate);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids_, int64_t row_offset) {
  check(Op::EMBEDDING, dtable, {&dout}, {&ids_});
  need(dtable.ndim == 2 && dout.dim(-1) == dtable.dim(1) && dout.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes dtable " + dtable.describe() + ", dout " + dout.describe() + ", ids " + ids_.describe());
  const In dt(dtable, INOUT), d(dout, IN);
  cpu::embedding_backward(dt, d, ids(ids_), dtable.dim(0), row_offset, (int)dout.rows(),
                          (int)dout.dim(-1));
}

// ---- layernorm ----------------------------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, float eps) {
  check(Op::LAYERNORM, out, {&inp, &weight, &bias, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(out.numel() == N * C && weight.numel() == C && bias.numel() == C && mean.numel() >= N && rstd.numel() >= N,
       Op::LAYERNORM, "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  const In o(out, OUT), mu(mean, OUT), rs(rstd, OUT), x(inp, IN), w(weight, IN), b(bias, IN);
  cpu::layernorm_forward(o, mu, rs, x, w, b, (int)N, (int)C, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  check(Op::LAYERNORM, dinp, {&dweight, &dbias, &dout, &inp, &weight, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(dinp.numel() == N * C && dout.numel() == N * C && dweight.numel() == C && dbias.numel() == C, Op::LAYERNORM,
       "shapes dinp " + dinp.describe() + ", dout " + dout.describe() + ", dweight " + dweight.describe());
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
  const In dx(dinp, INOUT), dw(dweight, INOUT), db(dbias, INOUT), d(dout, IN), x(inp, IN), w(weight, IN);
  cpu::linear_backward(dx, dw, db, d, x, w, (int)N, (int)IC, (int)OC, layout);
}

void bias_add_forward(const Tensor& x, const Tensor& bias) {
  check(Op::BIAS_ADD, x, {&bias});
  need(bias.numel() == x.dim(-1), Op::BIAS_ADD, "bias " + bias.describe() + " for " + x.describe());
  contiguous(Op::BIAS_ADD, x);
  const In y(x, INOUT), b(bias, IN);
  cpu::bias_add_forward(y, b, (int)x.rows(), (int)x.dim(-1));
}

void bias_add_backward(const Tensor& dbias, const Tensor& dout) {
  check(Op::BIAS_ADD, dbias, {&dout});
  need(dbias.numel() == dout.dim(-1), Op::BIAS_ADD, "dbias " + dbias.describe() + " for " + dout.describe());
  const In db(dbias, INOUT), d(dout, IN);
  cpu::column_sums(db, d, (int)dout.rows(), (int)dout.dim(-1));
}

// ---- add, gelu, dropout, copy ---------------------------------------------------------------------------------------

void add_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  check(Op::ADD, out, {&a, &b});
  same_numel(Op::ADD, out, a);
  same_numel(Op::ADD, out, b);
  contiguous(Op::ADD, out), contiguous(Op::ADD, a), contiguous(Op::ADD, b);
  const In x(a, IN), y(b, IN), o(out, OUT);
  cpu::add_forward(o, x, y, (size_t)out.numel());
}

void add_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  check(Op::ADD, dout, {&da, &db});
  for (const Tensor* d : {&da, &db}) {
    if (!d->present()) continue;
    same_numel(Op::ADD, *d, dout);
    contiguous(Op::ADD, *d);
    const In acc(*d, INOUT), g(dout, IN);
    cpu::accumulate(acc, g, (size_t)dout.numel());
  }
}

void gelu_forward(const Tensor& out, const Tensor& inp, GeluKind kind) {
  check(Op::GELU, out, {&inp});
  same_numel(Op::GELU, out, inp);
  const In x(inp, IN), o(out, OUT);
  cpu::gelu_forward(o, x, (size_t)out.numel(), kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  check(Op::GELU, dinp, {&inp, &dout});
  same_numel(Op::GELU, dinp, inp);
  same_numel(Op::GELU, dinp, dout);
  const In dx(dinp, INOUT), x(inp, IN), d(dout, IN);
  cpu::gelu_backward(dx, x, d, (size_t)dinp.numel(), kind);
}

void dropout_forward(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  check(Op::DROPOUT, out, {&inp});
  same_numel(Op::DROPOUT, out, inp);
  need(key.p >= 0.0f && key.p < 1.0f, Op::DROPOUT, "probability " + std::to_string(key.p) + " outside [0, 1)");
  contiguous(Op::DROPOUT, out), contiguous(Op::DROPOUT, inp);
  const In x(inp, IN), o(out, OUT);
  cpu::dropout_forward(o, x, (size_t)out.numel(), key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  check(Op::DROPOUT, dinp, {&dout});
  same_numel(Op::DROPOUT, dinp, dout);
  contiguous(Op::DROPOUT, dinp), contiguous(Op::DROPOUT, dout);
  const In dx(dinp, INOUT), d(dout, IN);
  cpu::dropout_backward(dx, d, (size_t)dinp.numel(), key);
}

void copy(const Tensor& dst, const Tensor& src) {
  check(Op::COPY, dst, {&src});
  need(dst.rows() == src.rows() && dst.dim(-1) == src.dim(-1), Op::COPY,
       "shapes " + dst.describe() + " and " + src.describe());
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
  check(Op::ATTENTION, out, {&probs, &q, &k, &v}, {&key_padding});
  const cpu::AttentionShape s = attention_shape(out, probs, q, k, v, heads, mask, key_padding);
  const In o(out, OUT), p(probs, OUT), qf(q, IN), kf(k, IN), vf(v, IN);
  cpu::attention_forward(o, p, qf, kf, vf, s, mask == AttentionMask::CAUSAL, ids(key_padding),
                         dropout);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& probs, int heads, AttentionMask mask,
                        const Tensor& key_padding, const AttentionDropout& dropout) {
  check(Op::ATTENTION, dout, {&dq, &dk, &dv, &q, &k, &v, &probs}, {&key_padding});
  const cpu::AttentionShape s = attention_shape(dout, probs, q, k, v, heads, mask, key_padding);
  need(dq.stride() == s.ldq && dk.stride() == s.ldk && dv.stride() == s.ldv && dq.numel() == q.numel() &&
           dk.numel() == k.numel() && dv.numel() == v.numel(),
       Op::ATTENTION, "dq, dk, dv must be shaped and strided like q, k, v");
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
  check(Op::CROSSENTROPY, logits, {&row_max});
  need(row_max.numel() == logits.rows(), Op::CROSSENTROPY, "row_max " + row_max.describe());
  contiguous(Op::CROSSENTROPY, logits);
  const In m(row_max, OUT), l(logits, IN);
  cpu::crossentropy_row_max(m, l, (int)logits.rows(), (int)logits.dim(-1));
}

void crossentropy_sumexp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                         const Tensor& targets, int64_t col_offset) {
  check(Op::CROSSENTROPY, logits, {&sumexp, &target_logit, &m}, {&targets});
  const int64_t N = logits.rows();
  need(sumexp.numel() == N && target_logit.numel() == N && m.numel() == N && targets.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  const In se(sumexp, OUT), tl(target_logit, OUT), l(logits, IN), mx(m, IN);
  cpu::crossentropy_sumexp(se, tl, l, mx, ids(targets), col_offset, (int)N,
                           (int)logits.dim(-1));
}

void crossentropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                           const Tensor& dloss, int64_t col_offset) {
  check(Op::CROSSENTROPY, logits, {&dlogits, &lse, &dloss}, {&targets});
  const int64_t N = logits.rows();
  same_numel(Op::CROSSENTROPY, dlogits, logits);
  need(lse.numel() == N && targets.numel() == N && dloss.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  const In l(logits, IN), dl(dlogits, OUT), ls(lse, IN), dls(dloss, IN);
  cpu::crossentropy_backward(dl, l, ls, ids(targets), dls, col_offset, (int)N,
                             (int)logits.dim(-1));
}

}  // namespace lmforge::kernels
