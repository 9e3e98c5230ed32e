// defines: what the CPU ops on bf16 / f16 storage share: Ref (one floating operand, loaded and stored a row or block
//          at a time through fp32 scratch), small_f32(), for_blocks(), for_rows(), kLowpBlock
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/lowp.h"

namespace lmforge::kernels::cpu {

// The low-precision kernels convert a row or a block of kLowpBlock elements at a time into a thread's fp32
// scratch (L1-resident), do fp32 math there and round the results back — no tensor-sized temporaries. Why blocks
// and not whole tensors: converting a whole bf16 operand into an fp32 temporary writes and re-reads 4 bytes per
// element through memory (and page-faults a fresh allocation each call); a block of 4096 converts into 16 KB that
// stays in L1 between the conversion, the arithmetic and the rounding back, so memory sees only the 2-byte storage.
inline constexpr int64_t kLowpBlock = 4096;

// One floating operand: its memory, dtype and row stride in elements (views may be strided: q|k|v columns).
struct Ref {
  char* p = nullptr;
  DType dt = DType::F32;
  int64_t ld = 0;
  size_t es = 4;
  explicit Ref(const Tensor& t)
      : p(static_cast<char*>(t.data)), dt(t.dtype), ld(t.present() ? t.stride() : 0), es(dtype_size(t.dtype)) {}
  bool present() const { return p != nullptr; }
  bool f32() const { return dt == DType::F32; }
  char* at(int64_t row, int64_t col) const { return p + (size_t)(row * ld + col) * es; }
  // Elements [col, col+n) of `row` as fp32: the memory itself when F32, else converted into buf.
  float* load(int64_t row, int64_t col, int64_t n, float* buf) const {
    if (f32()) return reinterpret_cast<float*>(at(row, col));
    row_to_f32(buf, at(row, col), dt, (size_t)n);
    return buf;
  }
  // Where results for [col, col+n) go: the memory itself when F32, else buf (then store()).
  float* target(int64_t row, int64_t col, float* buf) const {
    return f32() ? reinterpret_cast<float*>(at(row, col)) : buf;
  }
  // Rounds buf into the storage (nothing to do for F32, whose target() was the memory).
  void store(int64_t row, int64_t col, int64_t n, const float* buf) const {
    if (!f32()) row_from_f32(at(row, col), dt, buf, (size_t)n);
  }
};

// A small per-channel operand (LayerNorm weight, bias) as one fp32 vector for the whole call.
inline std::vector<float> small_f32(const Tensor& t) {
  std::vector<float> v((size_t)t.numel());
  row_to_f32(v.data(), t.data, t.dtype, v.size());
  return v;
}

// f(offset, count, scratch) over [0, n) in blocks of kLowpBlock, blocks split over the team; scratch: 3·kLowpBlock
// floats of the calling thread.
template <class F>
void for_blocks(int64_t n, F&& f) {
  const int64_t blocks = (n + kLowpBlock - 1) / kLowpBlock;
#pragma omp parallel if ((size_t)n >= kParallelMin)
  {
    alignas(64) float scratch[3 * kLowpBlock];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; b++) f(b * kLowpBlock, std::min(kLowpBlock, n - b * kLowpBlock), scratch);
  }
}

// f(row, scratch) over rows [0, N), split over the team; scratch: `per_thread` floats of the calling thread.
template <class F>
void for_rows(int64_t N, int64_t C, size_t per_thread, F&& f) {
#pragma omp parallel if ((size_t)(N * C) >= kParallelMin)
  {
    std::vector<float> scratch(per_thread);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) f(n, scratch.data());
  }
}

}  // namespace lmforge::kernels::cpu
