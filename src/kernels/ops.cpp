// defines: the ops of kernels/ops.h: operand checks and ONE look-up per op of the entry point for its
//          (device, dtype) in the dispatch table (kernels/dispatch.h), which is then called with the op's arguments
#include "kernels/ops.h"

#include <string>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace lmforge::kernels {
namespace {

[[noreturn]] void fail(Op op, const std::string& why) { kernel_error(op, why); }

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

// (Messages are built only when a check fails: the optimizer ops run per block of a few thousand elements.)
Checked check(Op op, const Tensor& first, std::initializer_list<const Tensor*> floats,
              std::initializer_list<const Tensor*> ids = {}) {
  if (!first.present()) fail(op, "missing operand");
  Checked c{op, first.device, DType::F32};
  auto floating = [&](const Tensor& t) {
    if (!t.present()) return;
    if (t.device != c.device)
      fail(op, "operands on different devices: " + first.describe() + " and " + t.describe());
    if (!is_floating(t.dtype))
      fail(op, "operands of different dtypes: " + first.describe() + " and " + t.describe() +
                   " (a floating operand is expected)");
    if (t.dtype == DType::F32) return;
    if (c.dtype != DType::F32 && c.dtype != t.dtype)
      fail(op, "operands of different dtypes: " + std::string(dtype_name(c.dtype)) + " and " + t.describe());
    c.dtype = t.dtype;
  };
  if (first.dtype != DType::I32) floating(first);
  for (const Tensor* t : floats) floating(*t);
  for (const Tensor* t : ids) {
    if (!t->present()) continue;
    if (t->device != c.device)
      fail(op, "operands on different devices: " + first.describe() + " and " + t->describe());
    if (t->dtype != DType::I32) fail(op, "ids must be i32, got " + t->describe());
  }
  return c;
}

// The entry point K of the checked op's (device, dtype): the one table look-up of an op call.
template <Kernel K>
KernelFn<K> kernel(const Checked& c) {
  const KernelFn<K> fn = dispatch_table().find<K>(c.device, c.dtype);
  if (fn == nullptr) fail(c.op, std::string("not implemented for ") + dtype_name(c.dtype) + " on " + device_name(c.device));
  return fn;
}

void same_numel(Op op, const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) fail(op, "size mismatch: " + a.describe() + " vs " + b.describe());
}

void contiguous(Op op, const Tensor& t) {
  if (t.present() && !t.contiguous()) fail(op, "strided operand " + t.describe());
}

}  // namespace

void kernel_error(Op op, const std::string& why) { throw Error(std::string("kernel ") + op_name(op) + ": " + why); }

const char* op_name(Op op) {
  switch (op) {
    case Op::EMBEDDING: return "embedding";
    case Op::LAYERNORM: return "layernorm";
    case Op::LINEAR: return "linear";
    case Op::BIAS_ADD: return "bias_add";
    case Op::ADD: return "add";
    case Op::GELU: return "gelu";
    case Op::TANH: return "tanh";
    case Op::DROPOUT: return "dropout";
    case Op::ATTENTION: return "attention";
    case Op::ATTENTION_DECODE: return "attention_decode";
    case Op::COPY: return "copy";
    case Op::CROSSENTROPY: return "crossentropy";
    case Op::ADAMW: return "adamw";
    case Op::LAMB: return "lamb";
    case Op::SGD: return "sgd";
    case Op::SCALE: return "scale";
    case Op::SUM_SQUARES: return "sum_squares";
    case Op::COUNT_NONFINITE: return "count_nonfinite";
    case Op::ROUND_F16: return "round_to_f16_storage";
  }
  return "?";
}

// ---- embedding ----------------------------------------------------------------------------------------------------

void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table, int64_t row_offset, bool accumulate) {
  const Checked c = check(Op::EMBEDDING, out, {&table}, {&ids});
  need(table.ndim == 2 && out.dim(-1) == table.dim(1) && out.rows() == ids.numel(), Op::EMBEDDING,
       "shapes out " + out.describe() + ", ids " + ids.describe() + ", table " + table.describe());
  contiguous(Op::EMBEDDING, out);
  kernel<Kernel::EMBEDDING_FORWARD>(c)(out, ids, table, row_offset, accumulate);
}

void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t row_offset) {
  const Checked c = check(Op::EMBEDDING, dtable, {&dout}, {&ids});
  need(dtable.ndim == 2 && dout.dim(-1) == dtable.dim(1) && dout.rows() == ids.numel(), Op::EMBEDDING,
       "shapes dtable " + dtable.describe() + ", dout " + dout.describe() + ", ids " + ids.describe());
  kernel<Kernel::EMBEDDING_BACKWARD>(c)(dtable, dout, ids, row_offset);
}

// ---- layernorm ----------------------------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, float eps) {
  const Checked c = check(Op::LAYERNORM, out, {&inp, &weight, &bias, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(out.numel() == N * C && weight.numel() == C && bias.numel() == C && mean.numel() >= N && rstd.numel() >= N,
       Op::LAYERNORM, "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  need(mean.dtype == DType::F32 && rstd.dtype == DType::F32, Op::LAYERNORM, "mean and rstd must be f32");
  kernel<Kernel::LAYERNORM_FORWARD>(c)(out, mean, rstd, inp, weight, bias, eps);
}

void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const Checked c = check(Op::LAYERNORM, dinp, {&dweight, &dbias, &dout, &inp, &weight, &mean, &rstd});
  const int64_t N = inp.rows(), C = inp.dim(-1);
  need(dinp.numel() == N * C && dout.numel() == N * C && dweight.numel() == C && dbias.numel() == C, Op::LAYERNORM,
       "shapes dinp " + dinp.describe() + ", dout " + dout.describe() + ", dweight " + dweight.describe());
  need(mean.dtype == DType::F32 && rstd.dtype == DType::F32, Op::LAYERNORM, "mean and rstd must be f32");
  kernel<Kernel::LAYERNORM_BACKWARD>(c)(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
}

// ---- linear -------------------------------------------------------------------------------------------------------

namespace {
// The output channels of a linear layer, after checking inp [N,IC], weight and out [N,OC].
int64_t linear_shapes(const Tensor& out, const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const int64_t N = inp.rows(), IC = inp.dim(-1);
  need(weight.ndim == 2, Op::LINEAR, "weight must be 2-D, got " + weight.describe());
  const int64_t OC = layout == WeightLayout::IN_OUT ? weight.dim(1) : weight.dim(0);
  const int64_t wi = layout == WeightLayout::IN_OUT ? weight.dim(0) : weight.dim(1);
  need(wi == IC && out.rows() == N && out.dim(-1) == OC, Op::LINEAR,
       "shapes out " + out.describe() + ", inp " + inp.describe() + ", weight " + weight.describe());
  contiguous(Op::LINEAR, out);
  contiguous(Op::LINEAR, inp);
  return OC;
}
}  // namespace

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                    WeightLayout layout) {
  const Checked c = check(Op::LINEAR, out, {&inp, &weight, &bias});
  const int64_t OC = linear_shapes(out, inp, weight, layout);
  need(!bias.present() || bias.numel() == OC, Op::LINEAR, "bias " + bias.describe());
  kernel<Kernel::LINEAR_FORWARD>(c)(out, inp, weight, bias, layout);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, WeightLayout layout) {
  const Checked c = check(Op::LINEAR, dout, {&dinp, &dweight, &dbias, &inp, &weight});
  const int64_t OC = linear_shapes(dout, inp, weight, layout);
  const int64_t N = inp.rows(), IC = inp.dim(-1);
  need(!dinp.present() || dinp.numel() == N * IC, Op::LINEAR, "dinp " + dinp.describe());
  need(!dweight.present() || dweight.numel() == IC * OC, Op::LINEAR, "dweight " + dweight.describe());
  need(!dbias.present() || dbias.numel() == OC, Op::LINEAR, "dbias " + dbias.describe());
  contiguous(Op::LINEAR, dinp);
  kernel<Kernel::LINEAR_BACKWARD>(c)(dinp, dweight, dbias, dout, inp, weight, layout);
}

void bias_add_forward(const Tensor& x, const Tensor& bias) {
  const Checked c = check(Op::BIAS_ADD, x, {&bias});
  need(bias.numel() == x.dim(-1), Op::BIAS_ADD, "bias " + bias.describe() + " for " + x.describe());
  contiguous(Op::BIAS_ADD, x);
  kernel<Kernel::BIAS_ADD_FORWARD>(c)(x, bias);
}

void bias_add_backward(const Tensor& dbias, const Tensor& dout) {
  const Checked c = check(Op::BIAS_ADD, dbias, {&dout});
  need(dbias.numel() == dout.dim(-1), Op::BIAS_ADD, "dbias " + dbias.describe() + " for " + dout.describe());
  kernel<Kernel::BIAS_ADD_BACKWARD>(c)(dbias, dout);
}

// ---- add, gelu, dropout, copy ---------------------------------------------------------------------------------------

void add_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Checked c = check(Op::ADD, out, {&a, &b});
  same_numel(Op::ADD, out, a);
  same_numel(Op::ADD, out, b);
  contiguous(Op::ADD, out), contiguous(Op::ADD, a), contiguous(Op::ADD, b);
  kernel<Kernel::ADD_FORWARD>(c)(out, a, b);
}

void add_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const Checked c = check(Op::ADD, dout, {&da, &db});
  for (const Tensor* d : {&da, &db}) {
    if (!d->present()) continue;
    same_numel(Op::ADD, *d, dout);
    contiguous(Op::ADD, *d);
  }
  kernel<Kernel::ADD_BACKWARD>(c)(da, db, dout);
}

void gelu_forward(const Tensor& out, const Tensor& inp, GeluKind kind) {
  const Checked c = check(Op::GELU, out, {&inp});
  same_numel(Op::GELU, out, inp);
  kernel<Kernel::GELU_FORWARD>(c)(out, inp, kind);
}

void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  const Checked c = check(Op::GELU, dinp, {&inp, &dout});
  same_numel(Op::GELU, dinp, inp);
  same_numel(Op::GELU, dinp, dout);
  kernel<Kernel::GELU_BACKWARD>(c)(dinp, inp, dout, kind);
}

void tanh_forward(const Tensor& out, const Tensor& inp) {
  const Checked c = check(Op::TANH, out, {&inp});
  same_numel(Op::TANH, out, inp);
  contiguous(Op::TANH, out), contiguous(Op::TANH, inp);
  kernel<Kernel::TANH_FORWARD>(c)(out, inp);
}

void tanh_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  const Checked c = check(Op::TANH, dinp, {&inp, &dout});
  same_numel(Op::TANH, dinp, inp);
  same_numel(Op::TANH, dinp, dout);
  contiguous(Op::TANH, dinp), contiguous(Op::TANH, inp), contiguous(Op::TANH, dout);
  kernel<Kernel::TANH_BACKWARD>(c)(dinp, inp, dout);
}

void dropout_forward(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const Checked c = check(Op::DROPOUT, out, {&inp});
  same_numel(Op::DROPOUT, out, inp);
  need(key.p >= 0.0f && key.p < 1.0f, Op::DROPOUT, "probability " + std::to_string(key.p) + " outside [0, 1)");
  contiguous(Op::DROPOUT, out), contiguous(Op::DROPOUT, inp);
  kernel<Kernel::DROPOUT_FORWARD>(c)(out, inp, key);
}

void dropout_backward(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const Checked c = check(Op::DROPOUT, dinp, {&dout});
  same_numel(Op::DROPOUT, dinp, dout);
  contiguous(Op::DROPOUT, dinp), contiguous(Op::DROPOUT, dout);
  kernel<Kernel::DROPOUT_BACKWARD>(c)(dinp, dout, key);
}

void copy(const Tensor& dst, const Tensor& src) {
  const Checked c = check(Op::COPY, dst, {&src});
  need(dst.rows() == src.rows() && dst.dim(-1) == src.dim(-1), Op::COPY,
       "shapes " + dst.describe() + " and " + src.describe());
  need(dst.widened == nullptr || dst.dtype == DType::BF16, Op::COPY,
       "an fp32 mirror on a " + dst.describe() + " destination (mirrors are for bf16)");
  kernel<Kernel::COPY>(c)(dst, src);
}

// ---- attention ----------------------------------------------------------------------------------------------------

AttentionSaved attention_saved(Device device) {
  return device == Device::CUDA ? AttentionSaved::LSE : AttentionSaved::PROBS;
}
int64_t attention_saved_numel(Device device, int64_t B, int64_t H, int64_t Tq, int64_t Tk) {
  return attention_saved(device) == AttentionSaved::LSE ? B * H * Tq : B * H * Tq * Tk;
}
Tensor attention_saved_view(void* data, Device device, int64_t B, int64_t H, int64_t Tq, int64_t Tk) {
  if (attention_saved(device) == AttentionSaved::LSE) return make_view(data, DType::F32, {B, H, Tq}, device);
  return make_view(data, DType::F32, {B, H, Tq, Tk}, device);
}

namespace {
void attention_shapes(const Tensor& out, const Tensor& saved, const Tensor& q, const Tensor& k, const Tensor& v,
                      int heads, AttentionMask mask, const Tensor& key_padding) {
  const Op op = Op::ATTENTION;
  need(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && out.ndim == 3, op,
       "q, k, v and out must be [B,T,H·hs]: " + q.describe() + ", " + k.describe() + ", " + v.describe());
  const int64_t B = q.dim(0), Tq = q.dim(1), Tk = k.dim(1);
  need(heads > 0 && q.dim(2) % heads == 0, op, std::to_string(heads) + " heads for " + q.describe());
  need(k.dim(0) == B && v.dim(0) == B && v.dim(1) == Tk && k.dim(2) == q.dim(2) && v.dim(2) == q.dim(2) &&
           out.dim(0) == B && out.dim(1) == Tq && out.dim(2) == q.dim(2),
       op, "shapes q " + q.describe() + ", k " + k.describe() + ", v " + v.describe() + ", out " + out.describe());
  const bool lse = attention_saved(q.device) == AttentionSaved::LSE;
  need(saved.dtype == DType::F32 && saved.contiguous() &&
           saved.numel() == attention_saved_numel(q.device, B, heads, Tq, Tk),
       op,
       std::string("saved state ") + saved.describe() + " (" + device_name(q.device) + " keeps " +
           (lse ? "the log-sum-exp f32 [B,H,Tq]" : "the probabilities f32 [B,H,Tq,Tk]") + ")");
  need(mask != AttentionMask::CAUSAL || Tq == Tk, op, "a causal mask needs Tq == Tk");
  need(!key_padding.present() || key_padding.numel() == B * Tk, op, "key padding " + key_padding.describe());
}
}  // namespace

void attention_forward(const Tensor& out, const Tensor& saved, const Tensor& q, const Tensor& k, const Tensor& v,
                       int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  const Checked c = check(Op::ATTENTION, out, {&saved, &q, &k, &v}, {&key_padding});
  attention_shapes(out, saved, q, k, v, heads, mask, key_padding);
  kernel<Kernel::ATTENTION_FORWARD>(c)(out, saved, q, k, v, heads, mask, key_padding, dropout);
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& saved, int heads,
                        AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  const Checked c = check(Op::ATTENTION, dout, {&dq, &dk, &dv, &out, &q, &k, &v, &saved}, {&key_padding});
  attention_shapes(dout, saved, q, k, v, heads, mask, key_padding);
  need(out.ndim == 3 && out.dim(0) == dout.dim(0) && out.dim(1) == dout.dim(1) && out.dim(2) == dout.dim(2), Op::ATTENTION,
       "out " + out.describe() + " must be shaped like dout " + dout.describe());
  need(dq.stride() == q.stride() && dk.stride() == k.stride() && dv.stride() == v.stride() &&
           dq.numel() == q.numel() && dk.numel() == k.numel() && dv.numel() == v.numel(),
       Op::ATTENTION, "dq, dk, dv must be shaped and strided like q, k, v");
  kernel<Kernel::ATTENTION_BACKWARD>(c)(dq, dk, dv, dout, out, q, k, v, saved, heads, mask, key_padding, dropout);
}

void attention_decode_forward(const Tensor& out, const Tensor& scratch, const Tensor& q, const Tensor& kcache,
                              const Tensor& vcache, int len, int heads) {
  const Checked c = check(Op::ATTENTION_DECODE, out, {&scratch, &q, &kcache, &vcache});
  need(kcache.ndim == 3 && vcache.numel() == kcache.numel(), Op::ATTENTION_DECODE, "cache " + kcache.describe());
  const int64_t B = kcache.dim(0), P = kcache.dim(1), C = kcache.dim(2);
  need(len >= 1 && len <= P && q.rows() == B && q.dim(-1) == C && out.numel() == B * C && C % heads == 0 &&
           scratch.numel() >= B * heads * P,
       Op::ATTENTION_DECODE, "shapes q " + q.describe() + ", cache " + kcache.describe() + ", len " + std::to_string(len));
  contiguous(Op::ATTENTION_DECODE, out);
  kernel<Kernel::ATTENTION_DECODE>(c)(out, scratch, q, kcache, vcache, len, heads);
}

// ---- cross-entropy ------------------------------------------------------------------------------------------------

void crossentropy_row_max(const Tensor& row_max, const Tensor& logits) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&row_max});
  need(row_max.numel() == logits.rows(), Op::CROSSENTROPY, "row_max " + row_max.describe());
  contiguous(Op::CROSSENTROPY, logits);
  kernel<Kernel::CROSSENTROPY_ROW_MAX>(c)(row_max, logits);
}

void crossentropy_sumexp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                         const Tensor& targets, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&sumexp, &target_logit, &m}, {&targets});
  const int64_t N = logits.rows();
  need(sumexp.numel() == N && target_logit.numel() == N && m.numel() == N && targets.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  kernel<Kernel::CROSSENTROPY_SUMEXP>(c)(sumexp, target_logit, logits, m, targets, col_offset);
}

void crossentropy_stats(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                        const Tensor& targets, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&row_max, &sumexp, &target_logit}, {&targets});
  const int64_t N = logits.rows();
  need(row_max.numel() == N && sumexp.numel() == N && target_logit.numel() == N && targets.numel() == N,
       Op::CROSSENTROPY, "per-row operands for " + logits.describe());
  contiguous(Op::CROSSENTROPY, logits);
  kernel<Kernel::CROSSENTROPY_STATS>(c)(row_max, sumexp, target_logit, logits, targets, col_offset);
}

void crossentropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                           const Tensor& dloss, int64_t col_offset) {
  const Checked c = check(Op::CROSSENTROPY, logits, {&dlogits, &lse, &dloss}, {&targets});
  const int64_t N = logits.rows();
  same_numel(Op::CROSSENTROPY, dlogits, logits);
  need(lse.numel() == N && targets.numel() == N && dloss.numel() == N, Op::CROSSENTROPY,
       "per-row operands for " + logits.describe());
  kernel<Kernel::CROSSENTROPY_BACKWARD>(c)(dlogits, logits, lse, targets, dloss, col_offset);
}

// ---- optimizer steps and gradient passes --------------------------------------------------------------------------
// Called per block of a few thousand elements (src/optim's work items), so the checks build no message unless one
// fails.

namespace {
// x and every other present operand: contiguous and of x's numel; `required` of them must be present.
void flat_operands(Op op, const Tensor& x, std::initializer_list<const Tensor*> required,
                   std::initializer_list<const Tensor*> optional = {}) {
  contiguous(op, x);
  for (const Tensor* t : required)
    if (!t->present()) fail(op, "missing operand");
  for (auto list : {required, optional})
    for (const Tensor* t : list) {
      if (!t->present()) continue;
      same_numel(op, x, *t);
      contiguous(op, *t);
    }
}
}  // namespace

void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWScalars& s) {
  const Checked c = check(Op::ADAMW, param, {&grad, &m, &v});
  flat_operands(Op::ADAMW, param, {&grad, &m, &v});
  kernel<Kernel::ADAMW_UPDATE>(c)(param, grad, m, v, s);
}

LambSums lamb_moments(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const LambScalars& s,
                      float wd) {
  const Checked c = check(Op::LAMB, param, {&grad, &m, &v});
  flat_operands(Op::LAMB, param, {&grad, &m, &v});
  return kernel<Kernel::LAMB_MOMENTS>(c)(param, grad, m, v, s, wd);
}

void lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v, const LambScalars& s, float wd, float rate) {
  const Checked c = check(Op::LAMB, param, {&m, &v});
  flat_operands(Op::LAMB, param, {&m, &v});
  kernel<Kernel::LAMB_APPLY>(c)(param, m, v, s, wd, rate);
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
  const Checked c = check(Op::SGD, param, {&grad, &momentum_buffer});
  flat_operands(Op::SGD, param, {&grad}, {&momentum_buffer});
  kernel<Kernel::SGD_UPDATE>(c)(param, grad, momentum_buffer, s);
}

void scale(const Tensor& x, float factor) {
  const Checked c = check(Op::SCALE, x, {});
  flat_operands(Op::SCALE, x, {});
  kernel<Kernel::SCALE>(c)(x, factor);
}

double sum_squares(const Tensor& x, SumOrder order, double start) {
  const Checked c = check(Op::SUM_SQUARES, x, {});
  flat_operands(Op::SUM_SQUARES, x, {});
  return kernel<Kernel::SUM_SQUARES>(c)(x, order, start);
}

int64_t count_nonfinite(const Tensor& x) {
  const Checked c = check(Op::COUNT_NONFINITE, x, {});
  flat_operands(Op::COUNT_NONFINITE, x, {});
  return kernel<Kernel::COUNT_NONFINITE>(c)(x);
}

void round_to_f16_storage(const Tensor& x) {
  const Checked c = check(Op::ROUND_F16, x, {});
  flat_operands(Op::ROUND_F16, x, {});
  kernel<Kernel::ROUND_TO_F16_STORAGE>(c)(x);
}

// ---- multi-tensor forms: every non-empty run checked as its single-tensor op checks it, all on one device -------

namespace {

enum class Needs { GRAD_M_V, M_V, GRAD_OPTIONAL_M };  // the operands a run needs beside param

// The device of the runs' operands (the first non-empty run's) after checking every run; false when every run is
// empty (nothing to do). A run's group must index the op's list of `groups` entries.
bool check_runs(Op op, MultiTensorList runs, Needs needs, size_t groups, Checked& c) {
  if (runs.count > 0 && runs.items == nullptr) fail(op, "missing run list");
  bool any = false;
  for (size_t k = 0; k < runs.count; ++k) {
    const MultiTensorItem& r = runs.items[k];
    if (r.param.numel() == 0) continue;
    Checked rc{};
    switch (needs) {
      case Needs::GRAD_M_V:
        rc = check(op, r.param, {&r.grad, &r.m, &r.v});
        flat_operands(op, r.param, {&r.grad, &r.m, &r.v});
        break;
      case Needs::M_V:
        rc = check(op, r.param, {&r.m, &r.v});
        flat_operands(op, r.param, {&r.m, &r.v});
        break;
      case Needs::GRAD_OPTIONAL_M:
        rc = check(op, r.param, {&r.grad, &r.m});
        flat_operands(op, r.param, {&r.grad}, {&r.m});
        break;
    }
    if (rc.dtype != DType::F32) fail(op, "multi-tensor runs must be f32, got " + r.param.describe());
    if (r.working.present()) {
      if (op != Op::ADAMW || r.working.device != Device::CPU)
        fail(op, "run " + std::to_string(k) + " has a working copy to write, which only AdamW on the CPU writes (" +
                     r.working.describe() + ")");
      if (r.working.dtype != DType::BF16 || !r.working.contiguous() || r.working.numel() != r.param.numel() ||
          r.working.device != r.param.device)
        fail(op, "run " + std::to_string(k) + "'s working copy " + r.working.describe() +
                     " is not a contiguous bf16 view of its " + std::to_string(r.param.numel()) + " elements");
    }
    if (r.group >= groups)
      fail(op, "run " + std::to_string(k) + " names group " + std::to_string(r.group) + " of " +
                   std::to_string(groups));
    if (any && rc.device != c.device)
      fail(op, "runs on different devices: " + runs.items[0].param.describe() + " and " + r.param.describe());
    if (!any) c = rc;
    any = true;
  }
  return any;
}

bool check_views(Op op, TensorList xs, Checked& c) {
  if (xs.count > 0 && xs.items == nullptr) fail(op, "missing view list");
  bool any = false;
  for (size_t k = 0; k < xs.count; ++k) {
    const Tensor& x = xs.items[k];
    if (x.numel() == 0) continue;
    const Checked xc = check(op, x, {});
    flat_operands(op, x, {});
    if (xc.dtype != DType::F32) fail(op, "multi-tensor views must be f32, got " + x.describe());
    if (any && xc.device != c.device)
      fail(op, "views on different devices: " + xs.items[0].describe() + " and " + x.describe());
    if (!any) c = xc;
    any = true;
  }
  return any;
}

}  // namespace

void adamw_update_multi(MultiTensorList runs, const AdamWScalars* groups, size_t group_count) {
  Checked c{};
  if (check_runs(Op::ADAMW, runs, Needs::GRAD_M_V, group_count, c))
    kernel<Kernel::ADAMW_UPDATE_MULTI>(c)(runs, groups, group_count);
}

void sgd_update_multi(MultiTensorList runs, const SgdScalars* groups, size_t group_count) {
  Checked c{};
  if (check_runs(Op::SGD, runs, Needs::GRAD_OPTIONAL_M, group_count, c))
    kernel<Kernel::SGD_UPDATE_MULTI>(c)(runs, groups, group_count);
}

void lamb_moments_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                        LambSums* sums) {
  Checked c{};
  if (check_runs(Op::LAMB, runs, Needs::GRAD_M_V, tensor_count, c)) {
    kernel<Kernel::LAMB_MOMENTS_MULTI>(c)(runs, s, tensors, tensor_count, sums);
  } else {
    for (size_t t = 0; t < tensor_count; ++t) sums[t] = LambSums{0.0, 0.0};
  }
}

void lamb_apply_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                      const float* rates) {
  Checked c{};
  if (check_runs(Op::LAMB, runs, Needs::M_V, tensor_count, c))
    kernel<Kernel::LAMB_APPLY_MULTI>(c)(runs, s, tensors, tensor_count, rates);
}

void lamb_step_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                     double lr) {
  Checked c{};
  if (check_runs(Op::LAMB, runs, Needs::GRAD_M_V, tensor_count, c))
    kernel<Kernel::LAMB_STEP_MULTI>(c)(runs, s, tensors, tensor_count, lr);
}

void scale_multi(TensorList xs, float factor) {
  Checked c{};
  if (check_views(Op::SCALE, xs, c)) kernel<Kernel::SCALE_MULTI>(c)(xs, factor);
}

void sum_squares_multi(TensorList xs, double* out) {
  Checked c{};
  if (check_views(Op::SUM_SQUARES, xs, c)) {
    kernel<Kernel::SUM_SQUARES_MULTI>(c)(xs, out);
  } else {
    for (size_t k = 0; k < xs.count; ++k) out[k] = 0.0;
  }
}

}  // namespace lmforge::kernels
