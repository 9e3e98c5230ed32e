// defines: what the CPU op files share beyond cpu_common.h — id_data(), accumulate(), column_sums_lowp(),
//          gemm_bf16() (and its two paths), philox4x32_10() — and each op file's registration function (called by
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

// bf16: row-major C[M,N] = op(A)[M,K]·op(B)[K,N] (+ bias[N]) (+ C when accumulating) with bf16 A, B and fp32
// accumulation; C is f32 or bf16 (c_dtype). gemm_bf16() takes the path bf16_gemm_choice() (lowp.h) picked for this
// CPU: oneDNN's bf16 matmul (gemm/gemm_bf16_onednn.cpp) or fp32 products of the widened operands
// (gemm/gemm_bf16_widen.cpp); the two are callable directly for tests and comparisons.
//
// A bf16 operand with, optionally, its values already widened to fp32 (`widened`, same layout and row stride: a
// weight's mirror, Tensor::widened). The native path multiplies the bf16 memory; the widened path takes the mirror
// as it is instead of widening the operand again.
struct Bf16Operand {
  const uint16_t* p = nullptr;
  int ld = 0;
  const float* widened = nullptr;
};
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, Bf16Operand A, Bf16Operand B, bool accumulate,
               void* C, DType c_dtype, int ldc, const float* bias);
void gemm_bf16_onednn(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda,
                      const uint16_t* B, int ldb, bool accumulate, void* C, DType c_dtype, int ldc, const float* bias);
// How the widened path spreads a product over the OpenMP team (gemm/gemm_bf16_widen.cpp says why):
//   TEAM:  blocks of at most block_elems widened elements (default kBf16WidenTeamBlockElems: the scratch does not
//          grow with the vocabulary or the batch), each widened, multiplied and rounded by the whole team through
//          gemm() — which keeps large products on oneDNN's multi-threaded fp32 matmul where the CPU has AVX-512F;
//   SLABS: one parallel region, each thread widening, multiplying (single-threaded gemm()) and rounding its own
//          slab of C in chunks of at most block_elems elements (default kBf16WidenSlabBlockElems: cache-sized);
//   AUTO:  TEAM where fp32_gemm_uses_onednn(), else SLABS.
// Before either, an operand of at most kBf16WidenWholeElems elements (block_elems when given) is widened whole,
// once, by the team: every thread (or block) that needs it then reads the one fp32 copy instead of widening its own.
// When both operands are then fp32 and C is fp32, the product is one gemm() (gemm/gemm_f32.cpp's threading).
// Tests pass small blocks to cross block boundaries.
enum class Bf16WidenThreads { AUTO, TEAM, SLABS };
inline constexpr int64_t kBf16WidenTeamBlockElems = int64_t(1) << 25;  // 128 MB of fp32
inline constexpr int64_t kBf16WidenSlabBlockElems = int64_t(1) << 21;  // 8 MB of fp32
inline constexpr int64_t kBf16WidenWholeElems = int64_t(1) << 22;      // 16 MB of fp32
void gemm_bf16_widened(bool trans_a, bool trans_b, int M, int N, int K, Bf16Operand A, Bf16Operand B,
                       bool accumulate, void* C, DType c_dtype, int ldc, const float* bias, int64_t block_elems = 0,
                       Bf16WidenThreads threads = Bf16WidenThreads::AUTO);
inline void gemm_bf16_widened(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t* A, int lda,
                              const uint16_t* B, int ldb, bool accumulate, void* C, DType c_dtype, int ldc,
                              const float* bias, int64_t block_elems = 0,
                              Bf16WidenThreads threads = Bf16WidenThreads::AUTO) {
  gemm_bf16_widened(trans_a, trans_b, M, N, K, Bf16Operand{A, lda}, Bf16Operand{B, ldb}, accumulate, C, c_dtype, ldc,
                    bias, block_elems, threads);
}

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
