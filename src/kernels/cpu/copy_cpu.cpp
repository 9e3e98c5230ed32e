// defines: the CPU copy between (strided) views of the same or different floating dtypes, and its registration
#include <algorithm>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

// rows × cols elements between strided rows. A contiguous run is the backend's copy (split over the team from 2 MB);
// strided rows are split over the team from kCopyParallelMin elements: one thread does not reach the memory's
// bandwidth (T5-small's per-head q|k|v copies, 96 of ~2 MB a step, 75 µs each on one thread).
constexpr int64_t kCopyParallelMin = int64_t(1) << 18;  // 1 MB of fp32
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols) {
  if (dst_stride == cols && src_stride == cols) {
    cpu_backend().copy_on_device(dst, src, sizeof(float) * (size_t)(rows * cols));
    return;
  }
#pragma omp parallel for schedule(static) if (rows * cols >= kCopyParallelMin)
  for (int64_t r = 0; r < rows; r++) std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)cols);
}

void copy_f32(const Tensor& dst, const Tensor& src) {
  const AsF32 x(src, AsF32::IN), o(dst, AsF32::OUT);
  copy_rows(o, dst.stride(), x, src.stride(), dst.rows(), dst.dim(-1));
}

// ---- bf16 / f16 storage (either side may be f32) ------------------------------------------------------------------

// fp32 → bf16 and the mirror's widening in one pass (the parameter store's sync of its working weights), blocks of
// round_to_bf16_with_mirror() (lowp.h, which says why its stores stream) over the team.
void round_with_mirror(uint16_t* dst, float* mirror, const float* src, int64_t n) {
  constexpr int64_t kBlock = int64_t(1) << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if ((size_t)n >= kParallelMin)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t lo = b * kBlock;
    round_to_bf16_with_mirror(dst + lo, mirror + lo, src + lo, std::min(kBlock, n - lo));
  }
}

// A bf16 destination's fp32 mirror (Tensor::widened) after its values were written: the exact widening.
void refresh_mirror(const Tensor& dst) {
  to_f32_rows(const_cast<float*>(dst.widened), dst.data, DType::BF16, dst.rows(), dst.dim(-1), dst.stride());
}

void copy_lowp_values(const Tensor& dst, const Tensor& src) {
  const Ref o(dst), x(src);
  const int64_t rows = src.rows(), cols = src.dim(-1);
  if (o.dt == x.dt) {  // same storage: bytes
    for (int64_t r = 0; r < rows; r++) std::memcpy(o.at(r, 0), x.at(r, 0), (size_t)cols * o.es);
    return;
  }
  if (dst.contiguous() && src.contiguous()) {  // e.g. the fp32 main weights into their bf16 working copy
    for_blocks(rows * cols, [&](int64_t off, int64_t n, float* s) {
      const float* v = x.load(0, off, n, s);
      if (o.f32()) std::memcpy(o.at(0, off), v, (size_t)n * sizeof(float));
      else o.store(0, off, n, v);
    });
    return;
  }
  for_rows(rows, cols, (size_t)cols, [&](int64_t r, float* s) {
    const float* v = x.load(r, 0, cols, s);
    if (o.f32()) std::memcpy(o.at(r, 0), v, (size_t)cols * sizeof(float));
    else o.store(r, 0, cols, v);
  });
}

// A bf16 destination with an fp32 mirror (Tensor::widened) gets the mirror written too: in the same pass from
// contiguous fp32 (the parameter store's sync), else after the values.
void copy_lowp(const Tensor& dst, const Tensor& src) {
  const bool mirrored = dst.widened != nullptr && dst.dtype == DType::BF16;
  if (mirrored && src.dtype == DType::F32 && dst.contiguous() && src.contiguous())
    return round_with_mirror(static_cast<uint16_t*>(dst.data), const_cast<float*>(dst.widened),
                             static_cast<const float*>(src.data), dst.numel());
  copy_lowp_values(dst, src);
  if (mirrored) refresh_mirror(dst);
}

}  // namespace

void register_copy(KernelTable& t) {
  t.add<Kernel::COPY>(Device::CPU, DType::F32, copy_f32);
  for (DType lowp : {DType::BF16, DType::F16}) t.add<Kernel::COPY>(Device::CPU, lowp, copy_lowp);
}

}  // namespace lmforge::kernels::cpu
