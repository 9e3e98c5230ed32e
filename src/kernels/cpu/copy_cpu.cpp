// defines: the CPU copy between (strided) views of the same or different floating dtypes, and its registration
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

// rows × cols elements between strided rows.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols) {
  if (dst_stride == cols && src_stride == cols) {
    std::memcpy(dst, src, sizeof(float) * (size_t)(rows * cols));
    return;
  }
  for (int64_t r = 0; r < rows; r++) std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)cols);
}

void copy_f32(const Tensor& dst, const Tensor& src) {
  const AsF32 x(src, AsF32::IN), o(dst, AsF32::OUT);
  copy_rows(o, dst.stride(), x, src.stride(), dst.rows(), dst.dim(-1));
}

// ---- bf16 / f16 storage (either side may be f32) ------------------------------------------------------------------

// fp32 → bf16 (round to nearest even) and the bf16 values' exact widening into `mirror`, in one pass over n
// elements: the parameter store's per-step sync of the working weights and their fp32 mirror. With AVX-512 and
// aligned destinations, the stores bypass the cache: the copies (6 bytes a weight) are read back only by the next
// step's products, long after the cache has turned over, and a cached store reads each line before writing it. A
// fused pass with streaming stores took 23 ms for GPT-2's 124M weights on 2 threads, against 35 for a rounding pass
// and a widening pass.
// (GCC 12 warns that the shift intrinsics' _mm512_undefined_epi32() operand "may be used uninitialized" once they
// are inlined into an OpenMP region: a false positive, PR 105593.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
void round_with_mirror(uint16_t* dst, float* mirror, const float* src, int64_t n) {
  constexpr int64_t kBlock = int64_t(1) << 16;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if ((size_t)n >= kParallelMin)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    int64_t i = lo;
#if defined(__AVX512F__)
    // 16 at a time where both destinations are aligned for streaming stores (32 bytes of bf16, 64 of fp32).
    while (i < hi && ((reinterpret_cast<uintptr_t>(dst + i) & 31) != 0 || (reinterpret_cast<uintptr_t>(mirror + i) & 63) != 0)) {
      dst[i] = f32_to_bf16(src[i]);
      mirror[i] = bf16_to_f32(dst[i]);
      i++;
    }
    if (((reinterpret_cast<uintptr_t>(dst + i) & 31) | (reinterpret_cast<uintptr_t>(mirror + i) & 63)) == 0) {
      const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF), quiet = _mm512_set1_epi32(0x40);
      for (; i + 16 <= hi; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        const __m512i u = _mm512_castps_si512(x), high = _mm512_srli_epi32(u, 16);
        // f32_to_bf16 (lowp.h), 16 lanes: (u + 0x7FFF + lsb) >> 16, a NaN kept quiet
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, half), _mm512_and_si512(high, one)), 16);
        r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), high, quiet);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
        _mm512_stream_ps(mirror + i, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16)));
      }
      _mm_sfence();  // this thread's streamed stores are ordered before the region's end (and the caller's reads)
    }
#endif
    for (; i < hi; i++) {
      dst[i] = f32_to_bf16(src[i]);
      mirror[i] = bf16_to_f32(dst[i]);
    }
  }
}
#pragma GCC diagnostic pop

// A bf16 destination's fp32 mirror (Tensor::widened) after its values were written: the exact widening.
void refresh_mirror(const Tensor& dst) {
  const int64_t rows = dst.rows(), cols = dst.dim(-1), ld = dst.stride();
  const uint16_t* h = static_cast<const uint16_t*>(dst.data);
  float* w = const_cast<float*>(dst.widened);
#pragma omp parallel for schedule(static) if ((size_t)(rows * cols) >= kParallelMin)
  for (int64_t r = 0; r < rows; r++) row_to_f32(w + r * ld, h + r * ld, DType::BF16, (size_t)cols);
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
