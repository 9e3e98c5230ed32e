// defines: tests of the CPU's fp32 matrix-product driver gemm() (kernels/cpu/gemm/gemm_f32.cpp) on the products it
//          splits along K (two slices per thread, summed in slice order): every transpose, beta 0 / 1 / 0.5, padded
//          row strides, 2 and 3 threads (a short tail slice), exact against a float64 reference, and bit-identical
//          from run to run. ctest runs it twice, with LMFORGE_FP32_GEMM=openblas and =onednn, so both libraries'
//          slices are covered (oneDNN only where the CPU has AVX-512F; elsewhere both runs take OpenBLAS).
//
// Why exact: the operands are small integers, so every product and every partial sum (|sum| < 2^24) is an integer
// that fp32 holds exactly, whatever order the slices and the libraries' blocks add them in. A term lost or counted
// twice at a slice boundary changes the result by at least 1. Real-valued operands then check the reproducibility
// the split promises: the same team size gives the same bits.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_common.h"

namespace lmforge::kernels::cpu {
namespace {

struct Case {
  bool ta, tb;
  int M, N, K;
  float beta;
  std::string name() const {
    return std::string(ta ? "Aᵀ" : "A") + (tb ? "·Bᵀ" : "·B") + " " + std::to_string(M) + "x" + std::to_string(N) +
           "x" + std::to_string(K) + " beta " + std::to_string(beta);
  }
};

struct Operands {
  int lda, ldb, ldc;
  std::vector<float> A, B, C;  // C: [M, ldc], the padding columns hold kSentinel
};

constexpr float kSentinel = -7777.0f;

// Integer-valued operands in [-3, 3] (or normal ones when `integers` is false), stored with padded row strides.
Operands make(const Case& c, uint32_t seed, bool integers) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-3, 3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&] { return integers ? (float)small(rng) : normal(rng); };
  Operands o;
  const int a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  o.lda = a_cols + 3, o.ldb = b_cols + 5, o.ldc = c.N + 2;
  o.A.assign((size_t)a_rows * o.lda, 0.0f);
  o.B.assign((size_t)b_rows * o.ldb, 0.0f);
  for (int i = 0; i < a_rows; i++)
    for (int j = 0; j < a_cols; j++) o.A[(size_t)i * o.lda + j] = draw();
  for (int i = 0; i < b_rows; i++)
    for (int j = 0; j < b_cols; j++) o.B[(size_t)i * o.ldb + j] = draw();
  o.C.assign((size_t)c.M * o.ldc, kSentinel);
  for (int i = 0; i < c.M; i++)
    for (int j = 0; j < c.N; j++)  // beta 0 must overwrite, even a NaN
      o.C[(size_t)i * o.ldc + j] = c.beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : (float)small(rng);
  return o;
}

float a_at(const Case& c, const Operands& o, int i, int k) {
  return c.ta ? o.A[(size_t)k * o.lda + i] : o.A[(size_t)i * o.lda + k];
}
float b_at(const Case& c, const Operands& o, int k, int j) {
  return c.tb ? o.B[(size_t)j * o.ldb + k] : o.B[(size_t)k * o.ldb + j];
}

std::vector<float> run(const Case& c, const Operands& o, int threads) {
  std::vector<float> C = o.C;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  gemm(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, C.data(), o.ldc);
  omp_set_num_threads(saved);
  return C;
}

// Shapes gemm() splits along K at 2 and 3 threads (K odd: the last slice is short; one with K just over 2·N).
const Case kCases[] = {
    {false, false, 40, 24, 9001, 0.0f}, {false, true, 40, 24, 9001, 1.0f}, {true, false, 40, 24, 9001, 0.5f},
    {true, true, 40, 24, 9001, 0.0f},   {false, false, 130, 70, 4003, 1.0f}, {true, true, 130, 70, 4003, 0.5f},
    {false, true, 96, 800, 1700, 0.0f},
};

TEST(GemmF32SplitK, ExactOnIntegerOperandsForEveryTransposeAndBeta) {
  for (const Case& c : kCases) {
    for (int threads : {2, 3}) {
      SCOPED_TRACE(c.name() + ", " + std::to_string(threads) + " threads");
      ASSERT_TRUE(gemm_splits_k(c.M, c.N, c.K, threads)) << "the case must take the split path";
      const Operands o = make(c, 17u + (uint32_t)c.K, true);
      const std::vector<float> C = run(c, o, threads);
      for (int i = 0; i < c.M; i++) {
        for (int j = 0; j < c.N; j++) {
          double want = c.beta == 0.0f ? 0.0 : (double)c.beta * o.C[(size_t)i * o.ldc + j];
          for (int k = 0; k < c.K; k++) want += (double)a_at(c, o, i, k) * b_at(c, o, k, j);
          ASSERT_EQ((double)C[(size_t)i * o.ldc + j], want) << "C[" << i << "," << j << "]";
        }
        for (int j = c.N; j < o.ldc; j++) ASSERT_EQ(C[(size_t)i * o.ldc + j], kSentinel) << "padding of row " << i;
      }
    }
  }
}

TEST(GemmF32SplitK, SameBitsFromRunToRunAtOneTeamSize) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name());
    const Operands o = make(c, 99u + (uint32_t)c.M, false);
    for (int threads : {2, 3}) {
      const std::vector<float> first = run(c, o, threads), second = run(c, o, threads);
      for (size_t e = 0; e < first.size(); e++)
        ASSERT_EQ(std::memcmp(&first[e], &second[e], sizeof(float)), 0)
            << "element " << e << ", " << threads << " threads";
    }
  }
}

TEST(GemmF32SplitK, TheRuleSplitsOnlyLongKProductsOnSeveralThreads) {
  EXPECT_TRUE(gemm_splits_k(512, 768, 50304, 2));   // GPT-2's LM head, dx = dlogits·E
  EXPECT_TRUE(gemm_splits_k(512, 768, 3072, 2));    // fc1's dx
  EXPECT_FALSE(gemm_splits_k(512, 768, 50304, 1));  // one thread: nothing to split for
  EXPECT_FALSE(gemm_splits_k(512, 3072, 768, 2));   // K short
  EXPECT_FALSE(gemm_splits_k(4096, 768, 3072, 2));  // K shorter than M
  EXPECT_FALSE(gemm_splits_k(8, 8, 64, 2));         // too little work to pay for a team
  EXPECT_TRUE(gemm_splits_k(2048, 768, 50304, 4));   // 7 partial products of 6 MB
  EXPECT_FALSE(gemm_splits_k(2048, 768, 50304, 8));  // 15 of them: over the scratch bound
}

}  // namespace
}  // namespace lmforge::kernels::cpu
