// defines: gemm_narrow() and kNarrowMaxColumns: fp32 products whose result is only an attention head wide, on the
//          calling thread, without packing (gemm_narrow.cpp says why)
#pragma once
#include <cstdint>

namespace lmforge::kernels::cpu {

inline constexpr int kNarrowMaxColumns = 64;
// Whether this build has the kernel (AVX-512); without it gemm_narrow() always returns false.
#if defined(__AVX512F__)
inline constexpr bool kGemmNarrowBuilt = true;
#else
inline constexpr bool kGemmNarrowBuilt = false;
#endif

// Row-major C[M, N] = beta·C + op(A)[M, K]·B[K, N] with op(A) = A [M, K] (row stride lda) or, with trans_a, Aᵀ for
// A [K, M]; B row stride ldb; C row stride ldc. beta 0 overwrites C. Returns false, computing nothing, unless N is
// a multiple of 16 up to kNarrowMaxColumns and the build has AVX-512: the caller then uses a BLAS.
bool gemm_narrow(bool trans_a, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float beta, float* C, int64_t ldc);

}  // namespace lmforge::kernels::cpu
