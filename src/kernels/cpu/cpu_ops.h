// defines: the CPU implementations behind kernels/ops.h (fp32, and the bf16 linear layer) (raw pointers and sizes; kernels/ops.cpp has checked
//          the views and passes their strides). Private to the kernels module.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace lmforge::kernels::cpu {

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t rows, int64_t row_offset, int N,
                       int C, bool accumulate);
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t rows, int64_t row_offset, int N,
                        int C);

// One row of layernorm_forward (no threading; for callers that already split the rows).
void layernorm_forward_row(float* y, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                           int C, float eps);
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int N, int C, float eps);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC,
                    WeightLayout layout);
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, WeightLayout layout);
void bias_add_forward(float* x, const float* bias, int N, int C);

// bf16 (kernels/cpu/linear_bf16.cpp, onednn_gemm.cpp): row-major C[M,N] = op(A)[M,K]·op(B)[K,N] (+ bias[N])
// (+ C when accumulating) with bf16 A, B and fp32 accumulation; C is f32 or bf16 (c_dtype).
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda, const uint16_t* B,
               int ldb, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias);
// linear_forward/backward of ops.h with bf16 GEMM inputs (f32 operands are rounded to bf16 first) and outputs /
// gradients of their own dtype (f32 or bf16).
void linear_forward_bf16(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int N,
                         int IC, int OC, WeightLayout layout);
void linear_backward_bf16(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& inp, const Tensor& weight, int N, int IC, int OC, WeightLayout layout);

void add_forward(float* out, const float* a, const float* b, size_t n);
void accumulate(float* dst, const float* src, size_t n);  // dst += src
void gelu_forward(float* out, const float* inp, size_t n, GeluKind kind);
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind);
// rows × cols elements between strided rows.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols);

// Philox4x32-10 of one counter block (Random123's philox4x32 with 10 rounds).
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);
void dropout_forward(float* out, const float* inp, size_t n, const DropoutKey& key);
void dropout_backward(float* dinp, const float* dout, size_t n, const DropoutKey& key);
// y[i] (=, or += with add) keep(base + i)·x[i]/(1−p) for i < n; base a multiple of 4.
void dropout_apply(float* y, const float* x, size_t n, const DropoutKey& key, uint64_t base, bool add);

// One attention problem: q rows of stride ldq, k/v rows of stride ldk/ldv, [B, T, H·hs] logically.
struct AttentionShape {
  int B = 0, Tq = 0, Tk = 0, H = 0, hs = 0;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;  // row strides of q, k, v (and dq, dk, dv) and out/dout
};
void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                       const AttentionShape& s, bool causal, const int32_t* key_padding,
                       const AttentionDropout& dropout);
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* probs, const AttentionShape& s, bool causal,
                        const int32_t* key_padding, const AttentionDropout& dropout);
void attention_decode_forward(float* out, float* scratch, const float* q, int64_t ldq, const float* kcache,
                              const float* vcache, int B, int len, int max_len, int C, int H);

void crossentropy_row_max(float* row_max, const float* logits, int N, int V);
void crossentropy_sumexp(float* sumexp, float* target_logit, const float* logits, const float* m,
                         const int32_t* targets, int64_t col_offset, int N, int V);
// crossentropy_row_max then crossentropy_sumexp (m = row_max) row by row: each row is still in cache for the second.
void crossentropy_stats(float* row_max, float* sumexp, float* target_logit, const float* logits,
                        const int32_t* targets, int64_t col_offset, int N, int V);
void crossentropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           const float* dloss, int64_t col_offset, int N, int V);

// ---- bf16 / f16 storage (kernels/cpu/lowp_ops.cpp): the ops above on any mix of F32, BF16 and F16 operands (the
// statistics f32), fp32 math on rows or 4096-element blocks converted in a thread's scratch, results rounded to
// each output's dtype. Same arguments as ops.h.
void embedding_forward_lowp(const Tensor& out, const int32_t* ids, const Tensor& table, int64_t row_offset,
                            bool accumulate);
void embedding_backward_lowp(const Tensor& dtable, const Tensor& dout, const int32_t* ids, int64_t row_offset);
void layernorm_forward_lowp(const Tensor& out, float* mean, float* rstd, const Tensor& inp, const Tensor& weight,
                            const Tensor& bias, float eps);
void layernorm_backward_lowp(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                             const Tensor& inp, const Tensor& weight, const float* mean, const float* rstd);
void bias_add_forward_lowp(const Tensor& x, const Tensor& bias);
void column_sums_lowp(const Tensor& acc, const Tensor& x);  // acc[o] += Σ_n x[n,o] (bias gradients)
void add_forward_lowp(const Tensor& out, const Tensor& a, const Tensor& b);
void accumulate_lowp(const Tensor& dst, const Tensor& src);
void gelu_forward_lowp(const Tensor& out, const Tensor& inp, GeluKind kind);
void gelu_backward_lowp(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind);
void dropout_forward_lowp(const Tensor& out, const Tensor& inp, const DropoutKey& key);
void dropout_backward_lowp(const Tensor& dinp, const Tensor& dout, const DropoutKey& key);
void copy_lowp(const Tensor& dst, const Tensor& src);
void crossentropy_row_max_lowp(float* row_max, const Tensor& logits);
void crossentropy_sumexp_lowp(float* sumexp, float* target_logit, const Tensor& logits, const float* m,
                              const int32_t* targets, int64_t col_offset);
void crossentropy_stats_lowp(float* row_max, float* sumexp, float* target_logit, const Tensor& logits,
                             const int32_t* targets, int64_t col_offset);
void crossentropy_backward_lowp(const Tensor& dlogits, const Tensor& logits, const float* lse,
                                const int32_t* targets, const float* dloss, int64_t col_offset);
// Attention with bf16 / f16 q, k, v, out (probs f32): each (b,h)'s head gathered into fp32 scratch, the fp32
// per-head code, results scattered (and rounded) back.
void attention_forward_lowp(const Tensor& out, float* probs, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionShape& s, bool causal, const int32_t* key_padding,
                            const AttentionDropout& dropout);
void attention_backward_lowp(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& q, const Tensor& k, const Tensor& v, const float* probs,
                             const AttentionShape& s, bool causal, const int32_t* key_padding,
                             const AttentionDropout& dropout);

}  // namespace lmforge::kernels::cpu
