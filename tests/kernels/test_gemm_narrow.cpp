// defines: tests of gemm_narrow() (kernels/cpu/gemm/gemm_narrow.cpp), the CPU's fp32 products one attention head
//          wide: every supported width, both forms of A, row counts that leave every remainder of its row blocks,
//          strided operands, beta 0 over stale NaNs and beta 1, and the shapes it declines
//
// Exact references: operands are small multiples of 2^-3 (old C values of 2^-6), so every product is a multiple of
// 2^-6 and every sum stays far below 2^18 in magnitude: any order of fp32 additions gives the exact value, which a
// double sum reproduces.
#include "kernels/cpu/gemm/gemm_narrow.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "exact_grid.h"

namespace lmforge::kernels::cpu {
namespace {

using testing::grid;


// C[M,N] (row stride ldc) = beta·C + op(A)·B, checked element by element against the exact value.
void check(bool trans_a, int M, int N, int K, float beta) {
  SCOPED_TRACE("trans_a " + std::to_string(trans_a) + " M " + std::to_string(M) + " N " + std::to_string(N) + " K " +
               std::to_string(K) + " beta " + std::to_string(beta));
  // Strides wider than the operands (q, k, v are columns of a fused [T, 3C] activation).
  const int64_t lda = (trans_a ? M : K) + 5, ldb = N + 32, ldc = N + 16;
  const int64_t a_rows = trans_a ? K : M;
  const std::vector<float> A = grid((size_t)(std::max<int64_t>(a_rows, 1) * lda), 15, 0.125f, 1),
                           B = grid((size_t)(std::max(K, 1) * ldb), 15, 0.125f, 2);
  std::vector<float> C = grid((size_t)(M * ldc), 100, 1.0f / 64, 3);
  if (beta == 0.0f)  // beta 0 overwrites: stale NaNs must not survive
    for (size_t i = 0; i < C.size(); i += 3) C[i] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> old = C;
  ASSERT_TRUE(gemm_narrow(trans_a, M, N, K, A.data(), lda, B.data(), ldb, beta, C.data(), ldc));
  for (int i = 0; i < M; i++) {
    for (int j = 0; j < N; j++) {
      double exact = beta == 0.0f ? 0.0 : (double)old[(size_t)(i * ldc + j)];
      for (int k = 0; k < K; k++)
        exact += (double)(trans_a ? A[(size_t)(k * lda + i)] : A[(size_t)(i * lda + k)]) * B[(size_t)(k * ldb + j)];
      ASSERT_EQ(C[(size_t)(i * ldc + j)], (float)exact) << "C[" << i << "," << j << "]";
    }
    for (int64_t j = N; j < ldc; j++) {  // the stride's gap is not written
      if (!std::isnan(old[(size_t)(i * ldc + j)])) {
        ASSERT_EQ(C[(size_t)(i * ldc + j)], old[(size_t)(i * ldc + j)]) << "C[" << i << "," << j << "] (gap)";
      }
    }
  }
}

TEST(GemmNarrow, EveryWidthAndRowRemainderMatchesTheExactProduct) {
  if (!kGemmNarrowBuilt) GTEST_SKIP() << "built without AVX-512: attention uses OpenBLAS";
  for (bool trans_a : {false, true})
    for (int N : {16, 32, 48, 64})
      for (int M : {1, 5, 6, 7, 37})  // below, at and past one block of 6 rows; 37 = 6·6 + 1
        for (float beta : {0.0f, 1.0f}) check(trans_a, M, N, 29, beta);
}

TEST(GemmNarrow, AttentionShapes) {
  if (!kGemmNarrowBuilt) GTEST_SKIP() << "built without AVX-512: attention uses OpenBLAS";
  for (bool trans_a : {false, true}) {
    check(trans_a, 128, 64, 128, 1.0f);
    check(trans_a, 64, 64, 512, 0.0f);  // a causal row block against its keys
  }
}

TEST(GemmNarrow, AnEmptySumScalesC) {
  if (!kGemmNarrowBuilt) GTEST_SKIP() << "built without AVX-512: attention uses OpenBLAS";
  check(false, 7, 32, 0, 0.0f);
  check(true, 7, 32, 0, 1.0f);
}

TEST(GemmNarrow, DeclinesWidthsItDoesNotTakeAndLeavesCAlone) {
  std::vector<float> A(64 * 96, 1.0f), B(64 * 96, 1.0f), C(64 * 96, 7.0f);
  for (int N : {0, 8, 24, 80, 128})
    EXPECT_FALSE(gemm_narrow(false, 8, N, 8, A.data(), 96, B.data(), 96, 0.0f, C.data(), 96)) << N;
  for (float c : C) ASSERT_EQ(c, 7.0f);
}

}  // namespace
}  // namespace lmforge::kernels::cpu
