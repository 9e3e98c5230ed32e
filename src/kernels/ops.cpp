// defines: the ops of kernels/ops.h: operand checks and ONE dispatch per op on (device, dtype); op_supported()
#include "kernels/ops.h"

#include <string>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "util/error.h"

namespace lmforge::kernels {
namespace {

[[noreturn]] void fail(Op op, const std::string& why) { throw Error(std::string("kernel ") + op_name(op) + ": " + why); }

void need(bool ok, Op op, const std::string& why) {
  if (!ok) fail(op, why);
}

// Every present operand on the first one's device; floating operands of the op's dtype; ids i32.
struct Checked {
  Op op;
  Device device;
  DType dtype;
};

Checked check(Op op, const Tensor& first, std::initializer_list<const Tensor*> floats,
              std::initializer_list<const Tensor*> ids = {}) {
  need(first.present(), op, "missing operand");
  Checked c{op, first.device, first.dtype};
  for (const Tensor* t : floats) {
    if (!t->present()) continue;
    need(t->device == c.device, op, "operands on different devices: " + first.describe() + " and " + t->describe());
    need(t->dtype == c.dtype, op, "operands of different dtypes: " + first.describe() + " and " + t->describe());
  }
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

float* f(const Tensor& t) { return t.present() ? static_cast<float*>(t.data) : nullptr; }
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

// The CPU implements every op in fp32. A backend or dtype added later lists its ops here.
bool op_supported(Op op, Device device, DType dtype) {
  (void)op;
  return device == Device::CPU && dtype == DType::F32;
}

// ---- embedding ----------------------------------------------------------------------------------------------------

void embedding_forward(const Tensor& out, const Tensor& ids_, const Tensor& table, int64_t row_offset, bool accumulate) {
  check(Op::EMBEDDING, out, {&table}, {&ids_});
  need(table.ndim == 2 && out.dim(-1) == table.dim(1) && out.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes out " + out.describe() + ", ids " + ids_.describe() + ", table " + table.describe());
  contiguous(Op::EMBEDDING, out);
  cpu::embedding_forward(f(out), ids(ids_), f(table), table.dim(0), row_offset, (int)out.rows(), (int)out.dim(-1),
                         accumulate);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids_, int64_t row_offset) {
  check(Op::EMBEDDING, dtable, {&dout}, {&ids_});
  need(dtable.ndim == 2 && dout.dim(-1) == dtable.dim(1) && dout.rows() == ids_.numel(), Op::EMBEDDING,
       "shapes dtable " + dtable.describe() + ", dout " + dout.describe() + ", ids " + ids_.describe());
  cpu::embedding_backward(f(dtable), f(dout), ids(ids_), dtable.dim(0), row_offset, (int)dout.rows(),
                          (int)dout.dim(-1));
}

// ---- layernorm ----------------------------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, float eps) {
  check(Op::LAYERNORM, out, {&inp, &weight, &bias, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(out.numel() == N * C && weight.numel() == C && bias.numel() == C && mean.numel() >= N && rstd.numel() >= N,
       Op::LAYERNORM, "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  cpu::layernorm_forward(f(out), f(mean), f(rstd), f(inp), f(weight), f(bias), (int)N, (int)C, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  check(Op::LAYERNORM, dinp, {&dweight, &dbias, &dout, &inp, &weight, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(dinp.numel() == N * C && dout.numel() == N * C && dweight.numel() == C && dbias.numel() == C, Op::LAYERNORM,
       "shapes dinp " + dinp.describe() + ", dout " + dout.describe() + ", dweight " + dweight.describe());
  cpu::layernorm_backward(f(dinp), f(dweight), f(dbias), f(dout), f(inp), f(weight), f(mean), f(rstd), (int)N, (int)C);
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
  check(Op::LINEAR, out, {&inp, &weight, &bias});
  int64_t N, IC, OC;
  linear_shapes(out, inp, weight, layout, N, IC, OC);
  need(!bias.present() || bias.numel() == OC, Op::LINEAR, "bias " + bias.describe());
  cpu::linear_forward(f(out), f(inp), f(weight), f(bias), (int)N, (int)IC, (int)OC, layout);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  check(Op::LINEAR, dout, {&dinp, &dweight, &dbias, &inp, &weight});
  int64_t N, IC, OC;
  linear_shapes(dout, inp, weight, layout, N, IC, OC);
  need(!dinp.present() || dinp.numel() == N * IC, Op::LINEAR, "dinp " + dinp.describe());
  need(!dweight.present() || dweight.numel() == IC * OC, Op::LINEAR, "dweight " + dweight.describe());
  need(!dbias.present() || dbias.numel() == OC, Op::LINEAR, "dbias " + dbias.describe());
  contiguous(Op::LINEAR, dinp);
  cpu::linear_backward(f(dinp), f(dweight), f(dbias), f(dout), f(inp), f(weight), (int)N, (int)IC, (int)OC, layout);
}

void bias_add_forward(const Tensor& x, const Tensor& bias) {
  check(Op::BIAS_ADD, x, {&bias});
  need(bias.numel() == x.dim(-1), Op::BIAS_ADD, "bias " + bias.describe() + " for " + x.describe());
  contiguous(Op::BIAS_ADD, x);
  cpu::bias_add_forward(f(x), f(bias), (int)x.rows(), (int)x.dim(-1));
}

void bias_add_backward(const Tensor& dbias, const Tensor& dout) {
  check(Op::BIAS_ADD, dbias, {&dout});
  need(dbias.numel() == dout.dim(-1), Op::BIAS_ADD, "dbias " + dbias.describe() + " for " + dout.describe());
  cpu::column_sums(f(dbias), f(dout), (int)dout.rows(), (int)dout.dim(-1));
}

// ---- add, gelu, dropout, copy ---------------------------------------------------------------------------------------

void add_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  check(Op::ADD, out, {&a, &b});
  same_numel(Op::ADD, out, a);
  same_numel(Op::ADD, out, b);
  contiguous(Op::ADD, out), contiguous(Op::ADD, a), contiguous(Op::ADD, b);
  cpu::add_forward(f(out), f(a), f(b), (size_t)out.numel());
}

void add_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  check(Op::ADD, dout, {&da, &db});
  for (const Tensor* d : {&da, &db}) {
    if (!d->present()) continue;
    same_numel(Op::ADD, *d, dout);
    contiguous(Op::ADD, *d);
    cpu::accumulate(f(*d), f(dout), (size_t)dout.numel());
  }
}

void gelu_forward(const Tensor& out, const Tensor& inp, GeluKind kind) {
  check(Op::GELU, out, {&inp});
  same_numel(Op::GELU, out, inp);
  cpu::gelu_forward(f(out), f(inp), (size_t)out.numel(), kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  check(Op::GELU, dinp, {&inp, &dout});
  same_numel(Op::GELU, dinp, inp);
  same_numel(Op::GELU, dinp, dout);
  cpu::gelu_backward(f(dinp), f(inp), f(dout), (size_t)dinp.numel(), kind);
}

void dropout_forward(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  check(Op::DROPOUT, out, {&inp});
  same_numel(Op::DROPOUT, out, inp);
  need(key.p >= 0.0f && key.p < 1.0f, Op::DROPOUT, "probability " + std::to_string(key.p) + " outside [0, 1)");
  contiguous(Op::DROPOUT, out), contiguous(Op::DROPOUT, inp);
  cpu::dropout_forward(f(out), f(inp), (size_t)out.numel(), key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  check(Op::DROPOUT, dinp, {&dout});
  same_numel(Op::DROPOUT, dinp, dout);
  contiguous(Op::DROPOUT, dinp), contiguous(Op::DROPOUT, dout);
  cpu::dropout_backward(f(dinp), f(dout), (size_t)dinp.numel(), key);
}

void copy(const Tensor& dst, const Tensor& src) {
  check(Op::COPY, dst, {&src});
  need(dst.rows() == src.rows() && dst.dim(-1) == src.dim(-1), Op::COPY,
       "shapes " + dst.describe() + " and " + src.describe());
  cpu::copy_rows(f(dst), dst.stride(), f(src), src.stride(), dst.rows(), dst.dim(-1));
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
  cpu::attention_forward(f(out), f(probs), f(q), f(k), f(v), s, mask == AttentionMask::CAUSAL, ids(key_padding),
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
  cpu::attention_backward(f(dq), f(dk), f(dv), f(dout), f(q), f(k), f(v), f(probs), s, mask == AttentionMask::CAUSAL,
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
  cpu::attention_decode_forward(f(out), f(scratch), f(q), q.stride(), f(kcache), f(vcache), (int)B, len, (int)P, (int)C,
                                heads);
}

// ---- cross-entropy ------------------------------------------------------------------------------------------------

void crossentropy_row_max(const Tensor& row_max, const Tensor& logits) {
  check(Op::CROSSENTROPY, logits, {&row_max});
  need(row_max.numel() == logits.rows(), Op::CROSSENTROPY, "row_max " + row_max.describe());
  contiguous(Op::CROSSENTROPY, logits);
  cpu::crossentropy_row_max(f(row_max), f(logits), (int)logits.rows(), (int)logits.dim(-1));
}

void crossentropy_sumexp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                         const Tensor& targets, int64_t col_offset) {
  check(Op::CROSSENTROPY, logits, {&sumexp, &target_logit, &m}, {&targets});
  const int64_t N = logits.rows();
  need(sumexp.numel() == N && target_logit.numel() == N && m.numel() == N && targets.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  cpu::crossentropy_sumexp(f(sumexp), f(target_logit), f(logits), f(m), ids(targets), col_offset, (int)N,
                           (int)logits.dim(-1));
}

void crossentropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                           const Tensor& dloss, int64_t col_offset) {
  check(Op::CROSSENTROPY, logits, {&dlogits, &lse, &dloss}, {&targets});
  const int64_t N = logits.rows();
  same_numel(Op::CROSSENTROPY, dlogits, logits);
  need(lse.numel() == N && targets.numel() == N && dloss.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  cpu::crossentropy_backward(f(dlogits), f(logits), f(lse), ids(targets), f(dloss), col_offset, (int)N,
                             (int)logits.dim(-1));
}

}  // namespace lmforge::kernels
