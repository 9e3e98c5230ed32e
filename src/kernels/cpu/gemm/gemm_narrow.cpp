// defines: gemm_narrow() — fp32 products only 16 to 64 columns wide (an attention head's width) without packing
//
// Why: attention's P·V, dS·K, Pᵀ·dY and dSᵀ·Q multiply a [T, T] matrix by a [T, hs] one, hs = 64 for every model
// here. A packing GEMM (OpenBLAS, oneDNN) first copies the [T, T] operand into its panel layout, and each copied
// element then takes part in only hs multiply-adds: on a Zen 5 core that copy was about a third of those products'
// time (sgemm_*copy against sgemm_kernel in a profile of T5-small's encoder attention). Here the wide operand is read
// where it lies, once, by broadcasts, while the narrow one ([K, n], 128 KB at K = 512) stays in cache:
//
//   C[i, :] = beta·C[i, :] + Σ_k op(A)[i, k]·B[k, :]
//
// R rows of C at a time in R·n/16 AVX-512 accumulators (6 × 4 = 24 of the 32 registers for n = 64): per k, n/16
// loads of B's row k and R broadcasts of A, R·n/16 fused multiply-adds. Each C element is one chain of fused
// multiply-adds in k order, so results do not depend on threads or blocking.
#include "kernels/cpu/gemm/gemm_narrow.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace lmforge::kernels::cpu {

#if defined(__AVX512F__)
namespace {

// R rows of C, NV·16 columns. trans_a: op(A)[r, k] = A[k·lda + r] (A points at column i), else A[r·lda + k] (A points
// at row i).
template <int R, int NV, bool TA>
inline void narrow_rows(int K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                        int64_t ldc) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
  for (int k = 0; k < K; k++) {
    const float* b = B + (int64_t)k * ldb;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      const __m512 a = _mm512_set1_ps(TA ? A[(int64_t)k * lda + r] : A[(int64_t)r * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(a, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      float* c = C + (int64_t)r * ldc + 16 * v;
      // beta 0 overwrites (stale NaNs in C do not survive, as BLAS's beta 0 promises)
      const __m512 x = beta == 0.0f ? acc[r][v] : _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c), acc[r][v]);
      _mm512_storeu_ps(c, x);
    }
}

template <int NV, bool TA>
void narrow_all(int M, int K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  constexpr int kRows = 6;
  auto a_at = [&](int i) { return TA ? A + i : A + (int64_t)i * lda; };
  int i = 0;
  for (; i + kRows <= M; i += kRows)
    narrow_rows<kRows, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc);
  switch (M - i) {
    case 5: narrow_rows<5, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc); break;
    case 4: narrow_rows<4, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc); break;
    case 3: narrow_rows<3, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc); break;
    case 2: narrow_rows<2, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc); break;
    case 1: narrow_rows<1, NV, TA>(K, a_at(i), lda, B, ldb, beta, C + (int64_t)i * ldc, ldc); break;
    default: break;
  }
}

template <bool TA>
void narrow_dispatch(int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                     float* C, int64_t ldc) {
  switch (N / 16) {
    case 1: return narrow_all<1, TA>(M, K, A, lda, B, ldb, beta, C, ldc);
    case 2: return narrow_all<2, TA>(M, K, A, lda, B, ldb, beta, C, ldc);
    case 3: return narrow_all<3, TA>(M, K, A, lda, B, ldb, beta, C, ldc);
    default: return narrow_all<4, TA>(M, K, A, lda, B, ldb, beta, C, ldc);
  }
}

}  // namespace

bool gemm_narrow(bool trans_a, int M, int N, int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float beta, float* C, int64_t ldc) {
  if (N <= 0 || N > kNarrowMaxColumns || N % 16 != 0 || M <= 0) return false;
  if (trans_a) narrow_dispatch<true>(M, N, K, A, lda, B, ldb, beta, C, ldc);
  else narrow_dispatch<false>(M, N, K, A, lda, B, ldb, beta, C, ldc);
  return true;
}

#else

bool gemm_narrow(bool, int, int, int, const float*, int64_t, const float*, int64_t, float, float*, int64_t) {
  return false;  // without AVX-512 the packing GEMM takes these products
}

#endif

}  // namespace lmforge::kernels::cpu
