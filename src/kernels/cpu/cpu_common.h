// defines: what the CPU kernels share: pick(), fast_exp(), fast_tanh(), kParallelMin, gemm() (one OpenMP team over
//          single-threaded OpenBLAS), use_single_threaded_blas(), column_sums()
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

namespace lmforge::kernels::cpu {

// c ? a : b as a bit mask, which vectorises: GCC 12 does not if-convert `x < lo ? lo : x` on floats inside
// `omp simd` loops ("control flow in loop"), so every loop calling fast_exp() (the softmax over 50k vocabulary
// columns, the GELU, the attention softmax) ran scalar.
#pragma omp declare simd
inline float pick(bool c, float a, float b) {
  const int32_t m = -static_cast<int32_t>(c);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & m) | (std::bit_cast<int32_t>(b) & ~m));
}

// expf that vectorises inside `omp simd` loops (glibc's expf does not at -O3 without -ffast-math, and the
// softmax over 50k vocabulary columns and the GELU's tanh are dominated by it otherwise).
// exp(x) = 2^n · e^r with n = round(x·log2 e), |r| <= ln2/2; e^r by Cephes' degree-7 polynomial (error ~1 ulp).
#pragma omp declare simd
inline float fast_exp(float x) {
  // Clamped to [-87, 88] (e^x stays a normal float); a NaN compares false and goes through as NaN. pick(), not
  // `x < -87 ? -87 : x`: GCC keeps a float ternary a branch under its default -ftrapping-math and then vectorises
  // no loop calling this without AVX-512's masked moves (on an AVX2 CPU the cross-entropy, softmax and GELU loops
  // ran scalar). Same results bit for bit.
  x = pick(x < -87.0f, -87.0f, x);
  x = pick(x > 88.0f, 88.0f, x);
  // Adding and subtracting 1.5·2^23 rounds to the nearest integer in float arithmetic.
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// A sum over a long row in kSumLanes independent partial sums (lane j takes elements j, j + 16, j + 32, ...),
// combined pairwise at the end. Why not `omp simd reduction(+)`: how many partial sums that gives depends on the
// compiler and its optimisation level, and with one (clang at -O1, as the sanitizer build) a 50k-column
// vocabulary row loses ~4e-5 of its log-sum-exp to rounding; with the lanes written out the order, and so the
// result, is the same in every build, and the error grows with V/16 rather than V.
inline constexpr int kSumLanes = 16;
template <class Term>
inline float lane_sum(int n, Term term) {
  float lane[kSumLanes] = {};
  int i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
#pragma omp simd
    for (int j = 0; j < kSumLanes; j++) lane[j] += term(i + j);
  }
  for (int j = 0; i + j < n; j++) lane[j] += term(i + j);
  for (int width = kSumLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; j++) lane[j] += lane[j + width];
  return lane[0];
}

// tanh(u) = 1 - 2/(e^{2u} + 1); absolute error ~1e-7, which is what GELU's 0.5·x·(1 + tanh) sees.
#pragma omp declare simd
inline float fast_tanh(float u) { return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f); }

// A 64-byte-aligned buffer kept across calls and grown to the largest size asked for. Why not a temporary per
// call: a fresh allocation of tens of MB is fresh pages, and every call then pays the page faults and zeroing of
// all of them (in profiles of bf16 and f16 training steps, 11-40 % of the CPU time). Callers keep one per thread.
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() { std::free(p_); }
  // At least `bytes` bytes (contents unspecified); throws std::bad_alloc when memory runs out.
  void* get(size_t bytes) {
    if (bytes > bytes_) {
      std::free(p_);
      bytes_ = 0;
      p_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (p_ == nullptr) throw std::bad_alloc();
      bytes_ = bytes;
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Below this many elements of work a loop runs on the calling thread: waking the team costs more than it saves,
// and far more on a loaded machine, where every barrier may wait a scheduler time slice for a descheduled thread.
// In a combined `parallel for simd` the guard must be written `if (parallel : ...)`: an if clause without the
// modifier applies to the simd construct too (OpenMP 5.0), and GCC then runs the loop scalar whenever the guard is
// false, i.e. on every call below the threshold (the bf16 ops' 4096-element blocks ran the GELU scalar: ~10 % of a
// bf16 step of config A).
inline constexpr size_t kParallelMin = 1 << 15;


void use_single_threaded_blas();
// Row-major C[M,N] = op(A)[M,K]·op(B)[K,N] + beta·C over the OpenMP team (gemm/gemm_f32.cpp).
void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc);
// Whether gemm() called outside a parallel region on `threads` threads splits K, two slices per thread (the long-K
// products: K ≥ M, K ≥ 2·N, at least 16 MFLOP, the partial products' scratch within 64 MB).
bool gemm_splits_k(int M, int N, int K, int threads);
// gemm() through oneDNN (gemm/gemm_f32_onednn.cpp; beta 0 or 1), and whether gemm() uses it: on CPUs with AVX-512F
// when OpenBLAS's core has no AVX-512 kernels; LMFORGE_FP32_GEMM=openblas|onednn overrides.
void gemm_f32_onednn(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
                     int ldb, float beta, float* C, int ldc);
bool fp32_gemm_uses_onednn();
// Which of the two gemm() uses and why, for the backend's description ("oneDNN's matmul (...)" or "OpenBLAS (...)").
std::string fp32_gemm_info();
// acc[o] += Σ_n x[n,o] for x [N,OC]: threads own disjoint column blocks and walk all rows (deterministic;
// bias_add_cpu.cpp).
void column_sums(float* acc, const float* x, int N, int OC);

}  // namespace lmforge::kernels::cpu
