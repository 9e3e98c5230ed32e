// defines: the CPU's low-precision storage helpers: bf16/f16 <-> f32 conversion (round to nearest even),
//          AsF32 (an op operand seen as fp32: converted in, and for outputs back out), has_avx512_bf16(),
//          has_amx_bf16(), Bf16GemmChoice with choose_bf16_gemm() / bf16_gemm_choice() (how bf16 matrix products run)
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/tensor.h"

namespace lmforge::kernels::cpu {

// bf16 = the upper 16 bits of an fp32, rounded to nearest even; a NaN stays a (quiet) NaN.
#pragma omp declare simd
inline uint16_t f32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)rounded;
}
#pragma omp declare simd
inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>((uint32_t)b << 16); }

// IEEE binary16, round to nearest even: |x| >= 65520 becomes inf (the overflow fp16 loss scaling watches for),
// |x| < 2^-24 flushes to ±0 through the subnormals as the hardware does (F. Giesen's float_to_half_fast3_rtne).
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);

// One contiguous row (no threading; for callers that already split the work).
void row_to_f32(float* dst, const void* src, DType dtype, size_t n);
// n fp32 values rounded into bf16 `dst` and, when `mirror` is not null, the bf16 values' exact widening into it
// (a working copy of weights and its fp32 mirror, Tensor::widened), on the calling thread. With AVX-512 the aligned
// stretch streams its stores past the cache: such a copy is read back only by the next step's products, long after
// the cache has turned over, and a cached store reads each line before writing it (GPT-2's 124M weights on 2
// threads: 23 ms, against 35 for a rounding pass and a widening pass).
void round_to_bf16_with_mirror(uint16_t* dst, float* mirror, const float* src, int64_t n);
void row_from_f32(void* dst, DType dtype, const float* src, size_t n);
// rows × cols elements with row strides (elements) into / out of a typed buffer of the same layout.
void to_f32_rows(float* dst, const void* src, DType dtype, int64_t rows, int64_t cols, int64_t stride);
void from_f32_rows(void* dst, DType dtype, const float* src, int64_t rows, int64_t cols, int64_t stride);

// The CPU implements the AVX512-BF16 instructions (vdpbf16ps) that oneDNN's bf16 GEMMs use (cpuid leaf 7,
// sub-leaf 1, eax bit 5).
bool has_avx512_bf16();
// The CPU has AMX tiles with bf16 (cpuid leaf 7, sub-leaf 0, edx bit 22), which oneDNN's bf16 matmul also uses.
bool has_amx_bf16();

// How bf16 matrix products (gemm_bf16()) run on this CPU:
//   NATIVE: oneDNN's bf16 matmul (gemm/gemm_bf16_onednn.cpp) on the CPU's bf16 instructions;
//   WIDEN:  fp32 products of the bf16 operands widened exactly to fp32 (gemm/gemm_bf16_widen.cpp) through the fp32
//           GEMM. Where the CPU has neither AVX512-BF16 nor AMX, oneDNN emulates bf16 arithmetic and ran slower than
//           the fp32 GEMM on the same operands (bench/train/RESULTS.md); both accumulate in fp32, so the two agree
//           to the reordering of fp32 sums.
// `why` says what decided it, for the training log.
struct Bf16GemmChoice {
  enum Path { NATIVE, WIDEN } path;
  std::string why;
};
// The choice for a CPU with the given flags and LMFORGE_CPU_BF16_GEMM = `env` (nullptr or "": unset; "native" or
// "widen" force a path, for tests and comparisons); anything else throws an Error naming the variable.
Bf16GemmChoice choose_bf16_gemm(const char* env, bool avx512_bf16, bool amx_bf16);
// This process's choice: made once, from cpuid and the environment at the first call.
const Bf16GemmChoice& bf16_gemm_choice();

// An op's floating operand as fp32. An F32 view is used as it is; a BF16 or F16 view is converted into an fp32
// temporary of the same layout (rows at the view's row stride) — for IN and INOUT — and an OUT or INOUT temporary
// is converted back on destruction, element by element of the view only, so strided views into one fused buffer
// (dq|dk|dv) never clobber each other's columns. Absent operands give nullptr.
class AsF32 {
 public:
  enum Mode { IN, OUT, INOUT };
  AsF32(const Tensor& t, Mode mode);
  ~AsF32();
  AsF32(const AsF32&) = delete;
  AsF32& operator=(const AsF32&) = delete;
  float* get() const { return p_; }
  operator float*() const { return p_; }

 private:
  Tensor t_;
  Mode mode_;
  float* p_ = nullptr;
  std::unique_ptr<float[]> temp_;
};

}  // namespace lmforge::kernels::cpu
