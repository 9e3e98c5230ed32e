// defines: the op set every model is built from, on tensor views with a dtype and a device: embedding, layernorm,
//          linear, bias add, add, GELU (tanh and erf), dropout (counter-based Philox), attention (causal / padding
//          mask, self and cross, with attention dropout), key/value-cache decode attention, strided copy, and the
//          pieces of a vocabulary-parallel softmax cross-entropy, each *_forward beside its *_backward; and the
//          optimizer steps (AdamW, LAMB, SGD) and gradient passes (scale, sum of squares, non-finite count, fp16
//          storage rounding) over flat f32 buffers, each also as a multi-tensor form over many buffers in one
//          call (MultiTensorItem, MultiTensorList, TensorList, LambTensor, lamb_trust_rate()).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/tensor.h"

// Every op checks its operands (shapes, dtypes, one device) and looks up ONCE the implementation registered for
// its (device, dtype) in the dispatch table (kernels/dispatch.h; kernels/ops.cpp holds the checks, kernels/<device>/
// one file per op). An unsupported (device, dtype) is an lmforge::Error naming the op and the operand.
// op_supported() reads the table, so one list of op cases (tests/kernels) runs every op on every available
// combination.
//
// Shapes: N rows (= B·T), C channels, B batch, T / Tq / Tk sequence lengths, H heads of hs channels.
// Dtype of an op = the low-precision dtype (BF16 or F16) among its floating operands, F32 when all are F32; a
// low-precision op also takes F32 operands (fp32 main gradients of bf16 weights, fp32 logits, the f32 statistics),
// never BF16 and F16 together. Ids, targets, positions and masks are always I32.
// Precision: on the CPU every op exists for F32, BF16 and F16 STORAGE; arithmetic is fp32 (operands converted on
// load, results rounded to the storage dtype on store, round to nearest even), so bf16/f16 results carry the
// storage's rounding and f16 its overflow (|x| >= 65520 → inf). The BF16 linear layer multiplies the bf16 values
// themselves (oneDNN matmul, AVX512-BF16, fp32 accumulation; fp32 operands are rounded to bf16 first).
//
// Gradient convention (llm.c): every *_backward ACCUMULATES (+=) into the gradients it writes, parameter and
// input gradients alike, so micro-batches and residual branches need no extra adds; forward outputs are
// overwritten (=). The exception is crossentropy_backward, which starts the chain and writes (=), in place over
// the logits if asked. An optional operand (absent: Tensor{}) is skipped.
namespace lmforge::kernels {

enum class Op : uint8_t {
  EMBEDDING, LAYERNORM, LINEAR, BIAS_ADD, ADD, GELU, TANH, DROPOUT, ATTENTION, ATTENTION_DECODE, COPY, CROSSENTROPY,
  ADAMW, LAMB, SGD, SCALE, SUM_SQUARES, COUNT_NONFINITE, ROUND_F16,
};
const char* op_name(Op op);
// Whether (device, dtype) implements op (forward and backward).
bool op_supported(Op op, Device device, DType dtype);
// Whether BF16 linear layers run on the CPU's bf16 instructions (oneDNN's matmul: the CPU has AVX512-BF16 or AMX,
// or LMFORGE_CPU_BF16_GEMM=native). Otherwise their products are fp32 GEMMs of the bf16 operands widened exactly to
// fp32: the same inputs and fp32 accumulation. Chosen once per process.
bool bf16_gemm_native();
// That choice for the log: "<what runs the products> (<why>)", e.g. "fp32 products of widened bf16 operands (this
// CPU has no AVX512-BF16/AMX); " followed by kWidenedWeightsNote (the memory the weights' fp32 mirror takes:
// Backend::wants_widened_bf16_weights()), "; " and kWidenedSpeedNote (that such a CPU trains no faster in bf16).
std::string bf16_gemm_cpu_path();
extern const char* const kWidenedWeightsNote;
extern const char* const kWidenedSpeedNote;

// ---- embedding lookup (vocabulary-parallel) ---------------------------------------------------------------------
// out[n,:] = table[ids[n] − row_offset, :] when row_offset <= ids[n] < row_offset + R, else 0;
// with accumulate: out[n,:] += the same (rows outside leave out unchanged).
// out [N,C], ids i32 [N], table [R,C]. Position and token-type embeddings are the same op over position / type
// ids with accumulate; a vocabulary-parallel rank holds rows [row_offset, row_offset + R) of the whole table.
void embedding_forward(const Tensor& out, const Tensor& ids, const Tensor& table, int64_t row_offset, bool accumulate);
// dtable[ids[n] − row_offset, :] += dout[n,:] for the ids inside the table (a scatter-add: an id may repeat; the
// sum over n runs in ascending n for every element, so results do not depend on the thread count).
void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t row_offset);

// ---- layer normalisation over the last axis ---------------------------------------------------------------------
// mean = Σx/C; var = Σ(x−mean)²/C (biased); rstd = 1/sqrt(var + eps); y = (x−mean)·rstd·w + b
// inp/out [N,C]; mean, rstd f32 [N] saved for the backward (always f32, whatever the op's dtype).
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                       const Tensor& weight, const Tensor& bias, float eps);
// With xhat = (x−mean)·rstd and g = dout·w:
//   dbias += Σ_n dout;  dweight += Σ_n dout·xhat;  dinp += rstd·(g − mean_c(g) − xhat·mean_c(g·xhat))
void layernorm_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                        const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd);

// ---- linear layer (GEMM + bias) ---------------------------------------------------------------------------------
// IN_OUT: weight [IC,OC] (Hugging Face Conv1D), out = inp·W + b.   OUT_IN: weight [OC,IC] (torch.nn.Linear, the
// tied LM head over the embedding table), out = inp·Wᵀ + b.   out [N,OC], inp [N,IC], bias [OC] optional.
enum class WeightLayout { IN_OUT, OUT_IN };
void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                    WeightLayout layout);
// dinp += dout·Wᵀ (IN_OUT) or dout·W (OUT_IN);  dweight += inpᵀ·dout (IN_OUT) or doutᵀ·inp (OUT_IN);
// dbias += Σ_n dout.  Each of dinp, dweight, dbias optional.
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, WeightLayout layout);

// ---- bias add (a row-parallel layer adds its replicated bias after the all-reduce) ------------------------------
// x[n,:] += bias  (in place)       x [N,C], bias [C]
void bias_add_forward(const Tensor& x, const Tensor& bias);
// dbias += Σ_n dout
void bias_add_backward(const Tensor& dbias, const Tensor& dout);

// ---- elementwise add (residual connections) ---------------------------------------------------------------------
// out = a + b (out may alias a or b);  backward: da += dout, db += dout (each optional).
void add_forward(const Tensor& out, const Tensor& a, const Tensor& b);
void add_backward(const Tensor& da, const Tensor& db, const Tensor& dout);

// ---- GELU -------------------------------------------------------------------------------------------------------
// TANH (HF gelu_new, Megatron's bias_gelu / openai_gelu): y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
// ERF (exact, torch.nn.functional.gelu, HF "gelu"):       y = 0.5·x·(1 + erf(x/√2))
enum class GeluKind { TANH, ERF };
void gelu_forward(const Tensor& out, const Tensor& inp, GeluKind kind);  // out may alias inp
// dinp += dout·y'(x):  TANH y' = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh²u)·√(2/π)·(1 + 3·0.044715·x²)
//                      ERF  y' = 0.5·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π)
void gelu_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind);

// y = tanh(x) elementwise (BERT's pooler); the backward accumulates dinp += dout·(1 − tanh(inp)²). fp32.
void tanh_forward(const Tensor& out, const Tensor& inp);  // out may alias inp
void tanh_backward(const Tensor& dinp, const Tensor& inp, const Tensor& dout);

// ---- dropout with a counter-based generator -----------------------------------------------------------------------
// Philox4x32-10 (Salmon et al., SC'11; Random123's philox4x32 with 10 rounds) keyed by key = (seed low 32 bits,
// seed high 32 bits). Element i of a logical tensor uses counter = (j low, j high, stream low, stream high) with
// j = i / 4, and output word i % 4 of that block: u = (word >> 8)·2⁻²⁴ ∈ [0,1); the element is KEPT when u >= p and
// then scaled by 1/(1−p) (computed in float). The mask is thus a pure function of (seed, stream, i): it does not
// depend on threads, on the parallel layout or on where a run resumed. The caller derives `stream` from what
// identifies the call (iteration, global micro-batch, layer, site).
struct DropoutKey {
  float p = 0.0f;       // probability of dropping; 0 makes the ops copies (forward) and adds (backward)
  uint64_t seed = 0;
  uint64_t stream = 0;
};
// out[i] = keep(i) ? inp[i]/(1−p) : 0, i the row-major element index (out may alias inp).
void dropout_forward(const Tensor& out, const Tensor& inp, const DropoutKey& key);
// dinp[i] += keep(i) ? dout[i]/(1−p) : 0
void dropout_backward(const Tensor& dinp, const Tensor& dout, const DropoutKey& key);
// The keep decision of element i (for tests and references).
bool dropout_keep(const DropoutKey& key, uint64_t i);

// ---- multi-head attention ---------------------------------------------------------------------------------------
// q [B,Tq,H·hs]; k, v [B,Tk,H·hs] (each may be a strided view into a fused q|k|v or k|v activation); head h is
// columns [h·hs, (h+1)·hs). out [B,Tq,H·hs] contiguous; `saved` f32 is what the forward keeps for the backward,
// in the form the device chooses (attention_saved below).
//   s[b,h,t,j] = q_t·k_j / √hs;  p = softmax_j over the allowed keys;  out_t = Σ_j drop(p_tj)·v_j
// Allowed keys: CAUSAL (self-attention, Tq == Tk): j <= t.  NONE: all.  key_padding i32 [B,Tk] (optional): keys
// with 0 are never attended (BERT/T5 padding). A row with no allowed key gets p = 0 and out = 0.
// Attention dropout (dropout.p > 0) drops entries of p with the Philox rule above, element index
// i = ((b·total_heads + head_offset + h)·Tq + t)·Tk + j — the index in the WHOLE model's [B, total_heads, Tq, Tk]
// probabilities, so a tensor-parallel rank holding heads [head_offset, head_offset + H) drops exactly what the
// single process drops. The saved state holds the undropped softmax; the backward regenerates the mask.
enum class AttentionMask { NONE, CAUSAL };
struct AttentionDropout {
  DropoutKey key;            // key.p = 0: none
  int64_t head_offset = 0;   // first head of this rank
  int64_t total_heads = 0;   // heads of the whole layer (0: H)
};
// The saved state of attention, per device:
//   PROBS (cpu, guarded): the probabilities p f32 [B,H,Tq,Tk], masked entries 0 — the CPU's backward reads them.
//   LSE (cuda): the log-sum-exp of each row's allowed scores f32 [B,H,Tq],
//       lse_t = m_t + log Σ_{j allowed} exp(s_tj − m_t),  m_t = max_{j allowed} s_tj,
//     so p_tj = exp(s_tj − lse_t) is recomputed tile by tile (flash attention); a row with no allowed key has
//     lse = +inf, so that exp(s − lse) = 0 (p = 0, out = 0). [B,H,Tq] instead of [B,H,Tq,Tk]: GPT-2 small at
//     T = 1024, B = 16 keeps 0.8 MB per layer instead of 800 MB.
enum class AttentionSaved { PROBS, LSE };
AttentionSaved attention_saved(Device device);
// Elements of the saved state (f32) for device; attention_saved_view shapes memory of at least that many floats.
int64_t attention_saved_numel(Device device, int64_t B, int64_t H, int64_t Tq, int64_t Tk);
Tensor attention_saved_view(void* data, Device device, int64_t B, int64_t H, int64_t Tq, int64_t Tk);
void attention_forward(const Tensor& out, const Tensor& saved, const Tensor& q, const Tensor& k, const Tensor& v,
                       int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout);
// With d = drop(p) and dz = d(s): dv_j += Σ_t d_tj·dout_t;  dp_tj = mask·dout_t·v_j;  dz_tj = p_tj·(dp_tj − D_t),
// D_t = Σ_j' p_tj'·dp_tj' = dout_t·out_t;  dq_t += Σ_j dz_tj·k_j/√hs;  dk_j += Σ_t dz_tj·q_t/√hs.
// dq, dk, dv shaped (and strided) like q, k, v. `out` is the forward's output (the LSE backward computes D_t from
// it; the PROBS backward does not read it).
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& saved, int heads,
                        AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout);

// Generation with a key/value cache: one new query per row against the first `len` cached positions (the caller
// has stored the new position's k and v at len−1). q [B,H·hs] (may be strided); kcache, vcache [B,P,H·hs] with
// P >= len; scratch f32 [B,H,P]; out [B,H·hs]. The same math as attention_forward's causal row t = len−1, no
// dropout (inference only).
void attention_decode_forward(const Tensor& out, const Tensor& scratch, const Tensor& q, const Tensor& kcache,
                              const Tensor& vcache, int len, int heads);

// ---- copy (e.g. a position's k and v into the cache) ------------------------------------------------------------
// dst = src, equal shapes; either may be strided. A BF16 dst with an fp32 mirror (Tensor::widened, which only a
// backend that wants_widened_bf16_weights() is given) gets its mirror written too: the exact widening of the
// rounded values.
void copy(const Tensor& dst, const Tensor& src);

// ---- softmax cross-entropy over (a shard of) the vocabulary -----------------------------------------------------
// A rank holds columns [col_offset, col_offset + V) of the logits [N, V_whole]. The whole loss is
//   lse_n = m_n + log Σ_ranks sumexp_n,   m_n = max over ranks of row_max_n,   loss_n = lse_n − target logit_n
// (the caller reduces across the tensor-parallel group). Every column takes part in the softmax (Megatron's padded
// vocabulary columns included). logits [N,V]; row_max, sumexp, target_logit, lse, dloss f32 [N]; targets i32 [N].
void crossentropy_row_max(const Tensor& row_max, const Tensor& logits);
// sumexp_n = Σ_v exp(logits[n,v] − m[n]);  target_logit_n = logits[n, targets[n] − col_offset] when the target is in
// this shard, else 0.
void crossentropy_sumexp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                         const Tensor& targets, int64_t col_offset);
// Both of the above in one pass, for a rank holding whole rows (no all-reduce of the maxima between them): row_max,
// then sumexp and target_logit with m = row_max, bit for bit as the two calls give them, each row read once.
void crossentropy_stats(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                        const Tensor& targets, int64_t col_offset);
// dlogits[n,v] = dloss[n]·(exp(logits[n,v] − lse[n]) − [v + col_offset == targets[n]])  — writes (=); dlogits may
// alias logits. dloss[n] carries the loss mask and the mean's 1/Σmask (0 for a masked row).
void crossentropy_backward(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                           const Tensor& dloss, int64_t col_offset);

// ---- optimizer steps and gradient passes over flat f32 buffers ----------------------------------------------------
// The element-wise arithmetic of src/optim (AdamW, LAMB, SGD) and of the trainer's gradient handling (scaling,
// the global norm's Σg², fp16 overflow checks and storage rounding) as ops over CONTIGUOUS F32 views of equal
// numel (any shape; n = numel). Exactly the operation order written here, in fp32 with one rounding per operation
// except the fma() (a fused multiply-add); the CPU file compiles without floating-point contraction, so nothing
// else is fused. The optimizer's scalars are formed by src/optim (in double, rounded to float once) and passed in.

// AdamW (torch.optim.AdamW, single-tensor path), per element:
//   p' = p·decay;  m = fma(g, one_minus_beta1, m·beta1);  v = v·beta2 + (one_minus_beta2·g)·g;
//   p = p' + (neg_step_size·m) / (√v / bias_correction2_sqrt + eps)
// with decay = 1 − lr·wd, neg_step_size = −lr/(1−β1ᵗ), bias_correction2_sqrt = √(1−β2ᵗ).
struct AdamWScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;
};
void adamw_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWScalars& s);

// LAMB (apex FusedLAMB's AdamW mode) in two phases, the whole-tensor norms summed between them by the caller.
//   u(m, v, p) = (m / bias_correction1) / (√(v / bias_correction2) + eps) + wd·p
// lamb_moments: m = beta1·m + beta3·g;  v = beta2·v + (one_minus_beta2·g)·g;  returns Σp² and Σu² over the view
// (p before the update; in double, one simd pass over the elements in order: the caller splits large tensors into
// blocks and adds the blocks' sums in its own order).
// lamb_apply:   p = p − rate·u(m, v, p)  (rate = lr·‖p‖/‖u‖ or lr, rounded to float by the caller).
struct LambScalars {
  float beta1, beta3, beta2, one_minus_beta2, bias_correction1, bias_correction2, eps;
};
struct LambSums {
  double p_sq, u_sq;
};
LambSums lamb_moments(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const LambScalars& s,
                      float wd);
void lamb_apply(const Tensor& param, const Tensor& m, const Tensor& v, const LambScalars& s, float wd, float rate);

// SGD with momentum (torch.optim.SGD, dampening 0, no Nesterov), per element:
//   d = decay ? fma(p, weight_decay, g) : g;  b = first ? d : b·momentum + d  (when momentum_buffer is present;
//   else b = d, no state);  p = fma(b, neg_lr, p)
struct SgdScalars {
  bool decay;          // weight decay applies (and is not 0)
  bool first;          // the buffer's first step: it starts as a copy of d
  float weight_decay, momentum, neg_lr;
};
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s);

// x = x·factor (loss-scale division, averaging over micro-batches, clipping).
void scale(const Tensor& x, float factor);

// start + Σ x², each x² and the sum in double. The order of the sum:
//   PARALLEL   — the OpenMP team's static blocks, each summed in simd lanes, the partial sums combined by the
//                reduction and then added to start (src/optim's global gradient norm; depends on the thread count;
//                one thread below 65537 elements);
//   SEQUENTIAL — start + x₀² + x₁² + ... in index order (a sum that continues across several ranges).
// The result comes back to the host: the caller reduces it across ranks there.
enum class SumOrder { PARALLEL, SEQUENTIAL };
double sum_squares(const Tensor& x, SumOrder order, double start = 0.0);

// How many elements are inf or NaN (an fp16 loss-scale overflow check); on the host.
int64_t count_nonfinite(const Tensor& x);

// x = f32(f16(x)): each value rounded to IEEE binary16 (nearest even; |x| >= 65520 → ±inf) and back, in place —
// what storing fp32 gradients in fp16 does (Megatron's fp16 gradients).
void round_to_f16_storage(const Tensor& x);

// ---- the same over many buffers in one call (multi-tensor forms) --------------------------------------------------
// An optimizer step or a gradient pass touches every parameter tensor (GPT-2 small: ~150, cut into thousands of
// blocks): a device with launch costs and host round trips (CUDA) runs each form below as ONE launch over all the
// runs and at most one copy to the host, instead of one launch (and one round trip for the sums) per run. Every
// form gives, bit for bit, what its single-tensor op gives on each run in list order (the CPU loops those
// kernels); the sums keep each run's single-op value and add runs in list order. Runs with numel 0 are skipped.
// (Plain pointer + count lists rather than std::span: this header is C++17 for nvcc 11.8.)

// One run of elements: contiguous f32 views of equal numel on one device. AdamW and LAMB: m = exp_avg,
// v = exp_avg_sq; SGD: m = the momentum buffer (absent without momentum), v absent; lamb_apply_multi ignores grad.
// group: the index of the run's scalars (AdamW, SGD) or of its whole tensor (LAMB: LambTensor, sums, rates).
// working (AdamW on the CPU only; absent elsewhere): a contiguous BF16 view of as many elements, the run's part of
// the model's low-precision working copy (layers::ParameterStore), which the update then also writes: the new
// parameters rounded to bf16, and their widening into its fp32 mirror when it has one (Tensor::widened) — what the
// store's sync after the step would copy, written while the parameters are in registers instead of by a second
// pass over memory.
struct MultiTensorItem {
  Tensor param, grad, m, v;
  Tensor working;
  uint32_t group = 0;
};
struct MultiTensorList {
  const MultiTensorItem* items = nullptr;
  size_t count = 0;
};
struct TensorList {
  const Tensor* items = nullptr;
  size_t count = 0;
};

// adamw_update on every run with groups[run.group] (per-group weight decay: decay = 1 − lr·wd differs).
void adamw_update_multi(MultiTensorList runs, const AdamWScalars* groups, size_t group_count);
// sgd_update on every run with groups[run.group].
void sgd_update_multi(MultiTensorList runs, const SgdScalars* groups, size_t group_count);

// LAMB over the runs of whole tensors (a tensor may be cut into several runs; run.group names it).
struct LambTensor {
  float wd;    // the tensor's weight decay (0 when it has none)
  bool trust;  // its trust ratio applies (decayed, or use_nvlamb)
};
// The step size of a tensor from its whole sums: lr·(‖p‖/‖u‖) in double, rounded to float once; lr (as float) when
// the ratio does not apply (not trust, or ‖p‖ = 0, or ‖u‖ = 0). The host and the devices evaluate this one
// definition (IEEE double sqrt, division and product: the same bits everywhere).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline float lamb_trust_rate(double lr, double p_sq, double u_sq, bool trust) {
  const double p_norm = sqrt(p_sq), u_norm = sqrt(u_sq);
  if (trust && p_norm != 0.0 && u_norm != 0.0) return static_cast<float>(lr * (p_norm / u_norm));
  return static_cast<float>(lr);
}
// Phase 1: lamb_moments on every run (wd = tensors[run.group].wd), and sums[t] = Σ over the runs of tensor t, in
// list order from 0, of their lamb_moments sums — on the host (one copy for all tensors). sums has tensor_count
// entries.
void lamb_moments_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                        LambSums* sums);
// Phase 2: lamb_apply on every run with rate = rates[run.group] (host floats, one per tensor).
void lamb_apply_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                      const float* rates);
// Both phases when the runs hold their tensors whole (no other rank or shard has a piece): phase 1, each tensor's
// rate lamb_trust_rate(lr, sums[t], tensors[t].trust) formed where the sums are (on the device: no host read),
// phase 2. The same bits as lamb_moments_multi, lamb_trust_rate and lamb_apply_multi in turn.
void lamb_step_multi(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t tensor_count,
                     double lr);

// scale on every view (numel 0 skipped).
void scale_multi(TensorList xs, float factor);
// out[i] = sum_squares(xs[i], SumOrder::PARALLEL) for every view (0 for an empty one), on the host: one launch and
// one copy for all views (the global gradient norm, whose inf/NaN is also the fp16 loss scale's overflow check).
void sum_squares_multi(TensorList xs, double* out);

}  // namespace lmforge::kernels
