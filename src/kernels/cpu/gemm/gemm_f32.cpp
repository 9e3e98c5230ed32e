// defines: the CPU fp32 GEMM driver (gemm(): one OpenMP team over single-threaded OpenBLAS, oneDNN for large
//          products, SGEMV for one row), use_single_threaded_blas()
#include <cblas.h>
#include <omp.h>

#include <cstring>

#include "kernels/cpu/cpu_common.h"

namespace lmforge::kernels::cpu {
namespace {
// Row-major C[M,N] = op(A)[M,K]·op(B)[K,N] + beta·C, split over the threads of ONE OpenMP team, each thread
// calling single-threaded OpenBLAS on blocks of C's rows (or columns, whichever dimension is longer).
// Why not OpenBLAS's own threads: its pthread pool and OpenMP's team both busy-wait after their work, so
// alternating GEMMs with OpenMP loops makes the two pools fight over the cores (10 AdamW steps of the parity
// test's small model: 522 ms with both pools, 23 ms with one). One pool, split by us, has no such hand-over.

// Rows (or columns) of C per block: about kBlocksPerThread blocks per thread, taken one at a time (dynamic
// schedule), so that on a loaded machine a thread whose core was taken away holds up only its current block while
// the other takes the rest; with one half per thread the other spun at the region's barrier for the whole
// remaining half (in profiles of 2-thread steps on a machine at load 10, libgomp's spin-wait was 30 % of the CPU
// time). Each block repacks the other operand (the shorter side's), so blocks stay at least kMinBlock long.
// Multiples of 16 (whole AVX-512 vectors and OpenBLAS's register tiles). Which thread takes a block does not change
// its result: every block is the same call whichever thread runs it.
constexpr int kBlocksPerThread = 4, kMinBlock = 128;
int gemm_chunk(int len, int threads) {
  int chunk = (len + threads * kBlocksPerThread - 1) / (threads * kBlocksPerThread);
  if (chunk < kMinBlock) chunk = kMinBlock;
  const int even = (len + threads - 1) / threads;  // never fewer blocks than threads
  if (chunk > even) chunk = even;
  return (chunk + 15) / 16 * 16;
}
}  // namespace

// Products of at least this many flops go to oneDNN where fp32_gemm_uses_onednn(): below it, the primitive look-up
// (tens of microseconds) is not repaid.
constexpr double kOnednnMinWork = 1.6e7;

void use_single_threaded_blas() {
  static const bool once = (openblas_set_num_threads(1), true);
  (void)once;
}

namespace {
// One row of A (a decode step): c[j] = beta·c[j] + Σ_k a[k]·op(B)[k,j] as SGEMV over column blocks, one per thread.
// SGEMM would repack all of B for a single row, which costs more than the product itself.
void gemv_row(bool trans_b, int N, int K, const float* a, const float* B, int ldb, float beta, float* c,
              int threads) {
  if (beta == 0.0f) {  // OpenBLAS multiplies by beta=0 rather than overwriting: clear stale NaNs first
    std::memset(c, 0, sizeof(float) * (size_t)N);
    beta = 1.0f;
  }
  if ((size_t)N * K < kParallelMin || omp_in_parallel()) threads = 1;
  const int chunk = ((N + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel num_threads(threads)
  {
    const int j0 = omp_get_thread_num() * chunk;
    const int j1 = j0 + chunk < N ? j0 + chunk : N;
    if (j0 < j1) {
      if (trans_b)  // B is [N,K]: c = B·a
        cblas_sgemv(CblasRowMajor, CblasNoTrans, j1 - j0, K, 1.0f, B + (size_t)j0 * ldb, ldb, a, 1, beta, c + j0, 1);
      else  // B is [K,N]: c = Bᵀ·a
        cblas_sgemv(CblasRowMajor, CblasTrans, K, j1 - j0, 1.0f, B + j0, ldb, a, 1, beta, c + j0, 1);
    }
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc) {
  use_single_threaded_blas();
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int threads = omp_get_max_threads();
  if (M == 1 && !trans_a) {
    gemv_row(trans_b, N, K, A, B, ldb, beta, C, threads);
    return;
  }
  const double work = 2.0 * M * N * K;
  if (work >= kOnednnMinWork && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel() && fp32_gemm_uses_onednn()) {
    gemm_f32_onednn(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (threads <= 1 || work < 4e6 || omp_in_parallel()) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_rows = M >= N;
  const int len = split_rows ? M : N;
  const int chunk = gemm_chunk(len, threads), blocks = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int blk = 0; blk < blocks; blk++) {
    const int i0 = blk * chunk;
    const int i1 = i0 + chunk < len ? i0 + chunk : len;
    if (split_rows) {
      const float* a = trans_a ? A + i0 : A + (size_t)i0 * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, i1 - i0, N, K, 1.0f, a, lda, B, ldb, beta, C + (size_t)i0 * ldc, ldc);
    } else {
      const float* b = trans_b ? B + (size_t)i0 * ldb : B + i0;
      cblas_sgemm(CblasRowMajor, ta, tb, M, i1 - i0, K, 1.0f, A, lda, b, ldb, beta, C + i0, ldc);
    }
  }
}

}  // namespace lmforge::kernels::cpu
