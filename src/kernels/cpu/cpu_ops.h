// defines: what the CPU op files share beyond cpu_common.h — id_data(), accumulate(), column_sums_lowp(),
//          gemm_bf16(), philox4x32_10() — and each op file's registration function (called by
//          cpu::register_kernels() in backend_cpu.cpp). Private to the kernels module.
//
// One file per op (kernels/cpu/<op>_cpu.cpp) holds its fp32 and its bf16 / f16 code and registers its entry points
// (kernels/dispatch.h) for (CPU, F32 / BF16 / F16); the entry points have the signatures of ops.h and receive
// operands ops.cpp has checked. fp32 entry points see every floating operand through AsF32 (kernels/cpu/lowp.h),
// so they also serve the low-precision combinations an op has no own path for.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"

namespace lmforge::kernels {
class KernelTable;
}

namespace lmforge::kernels::cpu {

// An optional i32 operand's data (nullptr when absent).
inline const int32_t* id_data(const Tensor& t) { return t.present() ? static_cast<const int32_t*>(t.data) : nullptr; }

// dst += src over n fp32 elements (add_cpu.cpp).
void accumulate(float* dst, const float* src, size_t n);
// acc[o] += Σ_n x[n,o] for x [N,OC] of any floating dtypes, summed in fp32 (bias_add_cpu.cpp; bias gradients).
void column_sums_lowp(const Tensor& acc, const Tensor& x);

// bf16 (gemm/gemm_bf16_onednn.cpp): row-major C[M,N] = op(A)[M,K]·op(B)[K,N] (+ bias[N]) (+ C when accumulating)
// with bf16 A, B and fp32 accumulation; C is f32 or bf16 (c_dtype).
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda, const uint16_t* B,
               int ldb, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias);

// Philox4x32-10 of one counter block (Random123's philox4x32 with 10 rounds; dropout_cpu.cpp).
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

// The op files' registrations.
void register_embedding(KernelTable& t);
void register_layernorm(KernelTable& t);
void register_linear(KernelTable& t);
void register_bias_add(KernelTable& t);
void register_add(KernelTable& t);
void register_gelu(KernelTable& t);
void register_tanh(KernelTable& t);
void register_dropout(KernelTable& t);
void register_attention(KernelTable& t);
void register_copy(KernelTable& t);
void register_crossentropy(KernelTable& t);
void register_optim(KernelTable& t);

}  // namespace lmforge::kernels::cpu
