// defines: bf16/f16 conversions, has_avx512_bf16(), has_amx_bf16(), choose_bf16_gemm(), bf16_gemm_choice(), AsF32
#include "kernels/cpu/lowp.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= 0x47800000u) {  // >= 65536, inf or NaN: inf (overflow) or a quiet NaN
    o = x > 0x7F800000u ? 0x7E00 : 0x7C00;
  } else if (x < 0x38800000u) {  // below 2^-14: a subnormal half (or 0); adding 0.5 makes the FPU round it
    const float t = std::bit_cast<float>(x) + 0.5f;
    o = (uint16_t)(std::bit_cast<uint32_t>(t) - 0x3F000000u);
  } else {  // normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even
    const uint32_t odd = (x >> 13) & 1u;
    x += ((uint32_t)(15 - 127) << 23) + 0xFFFu + odd;  // may carry into the exponent: 65520 → inf, as RNE does
    o = (uint16_t)(x >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  if (em >= 0x7C00u) return std::bit_cast<float>(sign | 0x7F800000u | ((em & 0x3FFu) << 13));  // inf, NaN
  if (em < 0x400u) {  // subnormal: em · 2^-24
    const float v = (float)em * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((em << 13) + ((uint32_t)(127 - 15) << 23)));
}

namespace {

void bf16_in(float* dst, const uint16_t* src, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}
void bf16_out(uint16_t* dst, const float* src, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}
// F16C converts 8 at a time with the hardware's round-to-nearest-even; the scalar code is the same rule.
void f16_in(float* dst, const uint16_t* src, size_t n) {
  size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; i++) dst[i] = f16_to_f32(src[i]);
}
void f16_out(uint16_t* dst, const float* src, size_t n) {
  size_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

void row_to_f32(float* dst, const void* src, DType dtype, size_t n) {
  if (dtype == DType::BF16) bf16_in(dst, static_cast<const uint16_t*>(src), n);
  else if (dtype == DType::F16) f16_in(dst, static_cast<const uint16_t*>(src), n);
  else std::copy_n(static_cast<const float*>(src), n, dst);
}
void row_from_f32(void* dst, DType dtype, const float* src, size_t n) {
  if (dtype == DType::BF16) bf16_out(static_cast<uint16_t*>(dst), src, n);
  else if (dtype == DType::F16) f16_out(static_cast<uint16_t*>(dst), src, n);
  else std::copy_n(src, n, static_cast<float*>(dst));
}

// (GCC 12 warns that the shift intrinsics' _mm512_undefined_epi32() operand "may be used uninitialized" once they
// are inlined into an OpenMP region: a false positive, PR 105593.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void round_to_bf16_with_mirror(uint16_t* dst, float* mirror, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // 16 at a time where the destinations are aligned for streaming stores (32 bytes of bf16, 64 of fp32).
  auto aligned = [&](int64_t k) {
    return (reinterpret_cast<uintptr_t>(dst + k) & 31) == 0 &&
           (mirror == nullptr || (reinterpret_cast<uintptr_t>(mirror + k) & 63) == 0);
  };
  for (; i < n && !aligned(i); i++) {
    dst[i] = f32_to_bf16(src[i]);
    if (mirror != nullptr) mirror[i] = bf16_to_f32(dst[i]);
  }
  if (i < n) {
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), quiet = _mm512_set1_epi32(0x40);
    for (; i + 16 <= n; i += 16) {
      const __m512 x = _mm512_loadu_ps(src + i);
      const __m512i u = _mm512_castps_si512(x), high = _mm512_srli_epi32(u, 16);
      // f32_to_bf16, 16 lanes: (u + 0x7FFF + lsb) >> 16, a NaN kept quiet
      __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, half), _mm512_and_si512(high, one)), 16);
      r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), high, quiet);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
      if (mirror != nullptr) _mm512_stream_ps(mirror + i, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16)));
    }
    _mm_sfence();  // the streamed stores are ordered before whatever this thread does next (a region's end)
  }
#endif
  for (; i < n; i++) {
    dst[i] = f32_to_bf16(src[i]);
    if (mirror != nullptr) mirror[i] = bf16_to_f32(dst[i]);
  }
}
#pragma GCC diagnostic pop

// Large conversions split into blocks over the team (memory-bound: one thread cannot fill the bandwidth).
void to_f32_rows(float* dst, const void* src, DType dtype, int64_t rows, int64_t cols, int64_t stride) {
  const size_t es = dtype_size(dtype);
  const int64_t block = rows == 1 ? 1 << 16 : cols;
  const int64_t pieces = rows == 1 ? (cols + block - 1) / block : rows;
#pragma omp parallel for schedule(static) if ((size_t)(rows * cols) >= kParallelMin * 4)
  for (int64_t r = 0; r < pieces; r++) {
    const int64_t off = rows == 1 ? r * block : r * stride;
    const int64_t n = rows == 1 ? std::min(block, cols - r * block) : cols;
    row_to_f32(dst + off, static_cast<const char*>(src) + (size_t)off * es, dtype, (size_t)n);
  }
}

void from_f32_rows(void* dst, DType dtype, const float* src, int64_t rows, int64_t cols, int64_t stride) {
  const size_t es = dtype_size(dtype);
  const int64_t block = rows == 1 ? 1 << 16 : cols;
  const int64_t pieces = rows == 1 ? (cols + block - 1) / block : rows;
#pragma omp parallel for schedule(static) if ((size_t)(rows * cols) >= kParallelMin * 4)
  for (int64_t r = 0; r < pieces; r++) {
    const int64_t off = rows == 1 ? r * block : r * stride;
    const int64_t n = rows == 1 ? std::min(block, cols - r * block) : cols;
    row_from_f32(static_cast<char*>(dst) + (size_t)off * es, dtype, src + off, (size_t)n);
  }
}

bool has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a >> 5) & 1u;
}

bool has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d >> 22) & 1u;
}

Bf16GemmChoice choose_bf16_gemm(const char* env, bool avx512_bf16, bool amx_bf16) {
  if (env != nullptr && *env != '\0') {
    if (std::strcmp(env, "native") == 0) return {Bf16GemmChoice::NATIVE, "LMFORGE_CPU_BF16_GEMM=native"};
    if (std::strcmp(env, "widen") == 0) return {Bf16GemmChoice::WIDEN, "LMFORGE_CPU_BF16_GEMM=widen"};
    throw Error(std::string("LMFORGE_CPU_BF16_GEMM=") + env +
                ": expected native or widen (or unset: chosen from the CPU)");
  }
  if (amx_bf16)
    return {Bf16GemmChoice::NATIVE, avx512_bf16 ? "this CPU has AMX-BF16 and AVX512-BF16" : "this CPU has AMX-BF16"};
  if (avx512_bf16) return {Bf16GemmChoice::NATIVE, "this CPU has AVX512-BF16"};
  return {Bf16GemmChoice::WIDEN, "this CPU has no AVX512-BF16/AMX"};
}

const Bf16GemmChoice& bf16_gemm_choice() {
  static const Bf16GemmChoice choice =
      choose_bf16_gemm(std::getenv("LMFORGE_CPU_BF16_GEMM"), has_avx512_bf16(), has_amx_bf16());
  return choice;
}

AsF32::AsF32(const Tensor& t, Mode mode) : t_(t), mode_(mode) {
  if (!t.present()) return;
  if (t.dtype == DType::F32) {
    p_ = static_cast<float*>(t.data);
    return;
  }
  const int64_t rows = t.rows(), cols = t.ndim == 0 ? 1 : t.dim(-1), stride = t.stride();
  const size_t span = rows == 0 ? 0 : (size_t)((rows - 1) * stride + cols);
  temp_.reset(new float[span > 0 ? span : 1]);
  p_ = temp_.get();
  if (mode != OUT) to_f32_rows(p_, t.data, t.dtype, rows, cols, stride);
}

AsF32::~AsF32() {
  if (temp_ == nullptr || mode_ == IN) return;
  from_f32_rows(t_.data, t_.dtype, p_, t_.rows(), t_.ndim == 0 ? 1 : t_.dim(-1), t_.stride());
}

}  // namespace lmforge::kernels::cpu
