// defines: the CPU fp32 GEMM driver (gemm(): one OpenMP team over single-threaded OpenBLAS, oneDNN for large
//          products, slices of K for products whose K is the long side, SGEMV for one row),
//          use_single_threaded_blas()
#include <cblas.h>
#include <omp.h>

#include <cstring>
#include <new>
#include <string>

#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

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
// Slices of K per thread in gemm_split_k() (below).
constexpr int kSlicesPerThread = 2;
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

// One slice of K of the product, on the calling thread: C = op(A)[:, k0:k0+kn]·op(B)[k0:k0+kn, :] + beta·C.
void gemm_slice(bool trans_a, bool trans_b, int M, int N, int k0, int kn, const float* A, int lda, const float* B,
                int ldb, float beta, float* C, int ldc, bool onednn) {
  const float* a = trans_a ? A + (size_t)k0 * lda : A + k0;
  const float* b = trans_b ? B + k0 : B + (size_t)k0 * ldb;
  if (onednn) {
    gemm_f32_onednn(trans_a, trans_b, M, N, kn, a, lda, b, ldb, beta, C, ldc);
  } else {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, kn,
                1.0f, a, lda, b, ldb, beta, C, ldc);
  }
}

// The product as kSlicesPerThread slices of K per thread, each a single-threaded call (oneDNN's or OpenBLAS's) that
// packs only its own part of both operands: slice 0 straight into C with the caller's beta, the others into
// scratch, then
//   C = (beta·C + P0) + P1 + ... + P(S-1),
// summed in slice order. The slices, and so the rounding, are fixed by the team size (never by which thread
// runs which slice); OMP_NUM_THREADS=1 never splits. Two slices a thread, taken one at a time: on a loaded machine a
// thread whose core was taken away holds up one slice while the other takes the rest (gemm_chunk()'s reason); on a
// quiet one, 2 or 4 slices on 2 threads ran at the same rate (GPT-2's head dx: 450 / 456 GFLOP/s OpenBLAS, 490 / 489
// oneDNN).
void gemm_split_k(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                  float beta, float* C, int ldc, int threads, bool onednn) {
  const int slices = kSlicesPerThread * threads;
  const int step = ((K + slices - 1) / slices + 15) / 16 * 16;  // whole AVX-512 vectors of K per slice
  const size_t plane = (size_t)M * N;
  // Kept across calls (cpu_common.h's GrowingBuffer): a fresh allocation would page-fault its megabytes on every
  // call. The calling thread's own, as the widened bf16 products' scratch (GEMMs come from outside parallel regions).
  thread_local GrowingBuffer scratch;
  float* partial;
  try {
    partial = static_cast<float*>(scratch.get(plane * (size_t)(slices - 1) * sizeof(float)));
  } catch (const std::bad_alloc&) {
    throw Error("gemm: cannot allocate " + std::to_string(plane * (size_t)(slices - 1) * sizeof(float)) +
                " bytes for the partial products of a K split (" + std::to_string(M) + " x " + std::to_string(N) +
                " x " + std::to_string(K) + ")");
  }
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(dynamic, 1)
    for (int s = 0; s < slices; s++) {
      const int k0 = s * step, kn = k0 < K ? (K - k0 < step ? K - k0 : step) : 0;
      float* c = s == 0 ? C : partial + plane * (size_t)(s - 1);
      const int ldcs = s == 0 ? ldc : N;
      if (kn > 0) gemm_slice(trans_a, trans_b, M, N, k0, kn, A, lda, B, ldb, s == 0 ? beta : 0.0f, c, ldcs, onednn);
      else std::memset(c, 0, sizeof(float) * plane);  // a tail slice past K (K > 0, so never slice 0)
    }
#pragma omp for schedule(static)
    for (int i = 0; i < M; i++) {
      float* c = C + (size_t)i * ldc;
      for (int s = 1; s < slices; s++) {
        const float* p = partial + plane * (size_t)(s - 1) + (size_t)i * N;
#pragma omp simd
        for (int j = 0; j < N; j++) c[j] += p[j];
      }
    }
  }
}

}  // namespace

// Whether C[M,N] = op(A)[M,K]·op(B)[K,N] is better split along K than along M or N: K at least the longer of M
// and N, and at least twice N. Such products are the backward's dx = dy·W of layers that widen (fc1, QKV) and above
// all of the LM head (K = the vocabulary). Split along M or N, each block repacks the whole other operand over the
// long K (the head's dx: 6 blocks, each repacking dy's 512 × 50304), and oneDNN's matmul, which splits C only, fell
// far below its rate on other shapes. Measured on an AMD EPYC with AVX-512 (2 threads, oneDNN's matmul whole against
// one slice per thread): [512 x 768 x 50304] 297 -> 493 GFLOP/s, [512 x 768 x 2304] 382 -> 501, [512 x 768 x 3072]
// 417 -> 502, [2048 x 768 x 3072] 385 -> 489; [1024 x 512 x 2048] unchanged (493), while [512 x 3072 x 768] (K
// short) lost 441 -> 425 split, so it is not.
//
// The split's scratch, (slices − 1) partial products of C, is bounded: a team of 64 on the head's dx at 2048 tokens
// would need 800 MB; past the bound the product takes the split along M or N.
constexpr double kSplitKScratchMax = 64.0 * 1024 * 1024;

bool gemm_splits_k(int M, int N, int K, int threads) {
  return threads > 1 && 2.0 * M * N * K >= kOnednnMinWork && K >= M && K >= N && K >= 2 * N &&
         (double)(kSlicesPerThread * threads - 1) * M * N * sizeof(float) <= kSplitKScratchMax;
}

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
  const bool onednn_beta = beta == 0.0f || beta == 1.0f;
  if (!omp_in_parallel() && gemm_splits_k(M, N, K, threads)) {
    gemm_split_k(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc, threads,
                 onednn_beta && fp32_gemm_uses_onednn());
    return;
  }
  if (work >= kOnednnMinWork && onednn_beta && !omp_in_parallel() && fp32_gemm_uses_onednn()) {
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
