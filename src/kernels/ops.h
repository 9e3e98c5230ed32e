// defines: the op set of a GPT-2 step as plain functions on device float buffers: embedding, layernorm, linear,
// attention, gelu, residual, crossentropy (each *_forward beside its *_backward)
#pragma once
#include <cstddef>
#include <cstdint>

// Every backend implements these declarations (the CPU one in ops_cpu.cpp); pointers are device memory from
// Backend::alloc. Shapes: B batch, T sequence, C channels, N = B·T rows, NH heads, V vocabulary columns.
//
// Gradient convention (as llm.c): every *_backward ACCUMULATES (+=) into the gradients it writes, parameter
// gradients and input gradients alike, so gradient accumulation over micro-batches and residual branches need
// no extra adds; the caller zeroes a gradient buffer before its first use. Forward outputs are overwritten (=).
// The one exception is crossentropy_backward, which starts the chain and writes (=) so that it can run in place
// over the logits.
namespace lmforge::kernels {

// ---- token + position embedding -------------------------------------------------------------------------------
// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]        wte [V,C], wpe [max_positions,C], out [B,T,C]
void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C);
// dwte[tokens[b,t],:] += dout[b,t,:] (a scatter-add: a token may repeat);  dwpe[t,:] += sum_b dout[b,t,:]
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C);

// ---- layer normalisation over the last axis ---------------------------------------------------------------------
// mean = sum(x)/C; var = sum((x-mean)^2)/C (biased); rstd = 1/sqrt(var + 1e-5); y = (x-mean)·rstd·w + b
// inp/out [N,C]; mean and rstd [N] are saved for the backward pass.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
// With xhat = (x-mean)·rstd and g = dout·w:
//   dbias += dout;  dweight += dout·xhat;  dinp += rstd·(g - mean_c(g) - xhat·mean_c(g·xhat))
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C);

// ---- linear layer (GEMM + bias) ---------------------------------------------------------------------------------
// IN_OUT: weight [IC,OC] as Hugging Face's Conv1D stores it, out = inp·W + b.
// OUT_IN: weight [OC,IC] as torch.nn.Linear (and the tied LM head over wte [V,C]), out = inp·Wᵀ + b.
enum class WeightLayout { IN_OUT, OUT_IN };
// out [N,OC] = inp [N,IC] · W + bias (bias may be nullptr)
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC,
                    WeightLayout layout);
// dinp += dout·Wᵀ (IN_OUT) or dout·W (OUT_IN);  dW += inpᵀ·dout (IN_OUT) or doutᵀ·inp (OUT_IN);
// dbias += sum_n dout.  dinp and dbias may be nullptr (not needed / no bias).
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, WeightLayout layout);

// ---- causal multi-head self-attention ---------------------------------------------------------------------------
// qkv [B,T,3C] holds q | k | v; head h is columns [h·hs,(h+1)·hs) of each, hs = C/NH.
//   p[b,h,t,s] = softmax_{s<=t}( q_t·k_s / sqrt(hs) );   out[b,t,h·hs+i] = sum_{s<=t} p[b,h,t,s]·v_s[i]
// att [B,NH,T,T] saves p for the backward pass (entries s > t are written as 0).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dv_s += sum_t p_ts·dout_t;  dp_ts = dout_t·v_s;  dz_ts = p_ts·(dp_ts - sum_s' p_ts'·dp_ts');
// dq_t += sum_s dz_ts·k_s/sqrt(hs);  dk_s += sum_t dz_ts·q_t/sqrt(hs).   dqkv [B,T,3C]
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                        int NH);

// Generation with a key/value cache: one new query per row against its first `len` cached positions.
// qkv [B,3C] holds the new position's q | k | v (only q is read; the caller has already stored k and v at cache
// position len-1); kcache, vcache [B,max_len,C] with heads as column blocks; scratch [B,NH,len]; out [B,C].
// The same math as attention_forward's row t = len-1 (inference only, no backward).
void attention_decode_forward(float* out, float* scratch, const float* qkv, const float* kcache,
                              const float* vcache, int B, int len, int max_len, int C, int NH);

// ---- GELU, tanh approximation (HF gelu_new) ---------------------------------------------------------------------
// y = 0.5·x·(1 + tanh(u)), u = sqrt(2/pi)·(x + 0.044715·x^3)
void gelu_forward(float* out, const float* inp, size_t n);
// dy/dx = 0.5·(1 + tanh(u)) + 0.5·x·(1 - tanh(u)^2)·sqrt(2/pi)·(1 + 3·0.044715·x^2);  dinp += dout·dy/dx
void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n);

// ---- residual add -----------------------------------------------------------------------------------------------
// out = a + b;  da += dout, db += dout
void residual_forward(float* out, const float* a, const float* b, size_t n);
void residual_backward(float* da, float* db, const float* dout, size_t n);

// ---- fused softmax + cross-entropy over V columns ---------------------------------------------------------------
// lse_n = log sum_v exp(logits[n,v]);  losses[n] = lse_n - logits[n, targets[n]].  logits [N,V]; lse, losses [N].
// Every one of the V columns takes part in the softmax (Megatron's padded vocabulary columns included).
void crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets, int N, int V);
// dlogits[n,v] = dloss·(exp(logits[n,v] - lse_n) - [v == targets[n]]), e.g. dloss = 1/N for a mean loss.
// Writes (=), and dlogits may alias logits (in place).
void crossentropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           float dloss, int N, int V);

}  // namespace lmforge::kernels
