// defines: Philox4x32-10, the CPU dropout (forward, backward) over it in fp32 and on bf16 / f16 storage, its
//          registration, and dropout_keep()
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/cpu/philox_lanes.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {

// Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC'11): ten rounds of
//   (hi0, lo0) = M0·c0;  (hi1, lo1) = M1·c2;  c ← (hi1 ⊕ c1 ⊕ k0, lo1, hi0 ⊕ c3 ⊕ k1, lo0)
// with the key bumped by the Weyl constants between rounds.
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3], k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

namespace {

// y[i] (=, or += with add) factor(base + i)·x[i] over n elements, factor 0 or 1/(1−p) from word i % 4 of Philox block
// i / 4; groups of kPhiloxLanes blocks (philox_lanes.h: the blocks' rounds vectorised) in parallel. base is a
// multiple of 4 (a piece of a larger tensor, e.g. one block of the low-precision kernels).
void dropout_apply(float* y, const float* x, size_t n, const DropoutKey& key, uint64_t base, bool add) {
  const float scale = 1.0f / (1.0f - key.p);
  if (key.p <= 0.0f) {
    if (add) accumulate(y, x, n);
    else if (y != x) std::memcpy(y, x, n * sizeof(float));
    return;
  }
  constexpr size_t kGroup = 4 * kPhiloxLanes;
  const int64_t groups = (int64_t)((n + kGroup - 1) / kGroup);
  const uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t g = 0; g < groups; g++) {
    uint32_t w[4][kPhiloxLanes];
    philox4x32_10_lanes(base / 4 + (uint64_t)g * kPhiloxLanes, key.stream, k0, k1, w);
    float f[kGroup];
    for (int l = 0; l < kPhiloxLanes; l++)
      for (int r = 0; r < 4; r++) f[4 * l + r] = (float)(w[r][l] >> 8) * (1.0f / 16777216.0f) >= key.p ? scale : 0.0f;
    const size_t first = (size_t)g * kGroup, m = std::min(kGroup, n - first);
    for (size_t i = 0; i < m; i++) {
      const float v = f[i] * x[first + i];
      if (add) y[first + i] += v;
      else y[first + i] = v;
    }
  }
}

// ---- fp32 ---------------------------------------------------------------------------------------------------------

void dropout_forward_f32(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const AsF32 x(inp, AsF32::IN), o(out, AsF32::OUT);
  dropout_apply(o, x, (size_t)out.numel(), key, 0, false);
}

void dropout_backward_f32(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const AsF32 dx(dinp, AsF32::INOUT), d(dout, AsF32::IN);
  dropout_apply(dx, d, (size_t)dinp.numel(), key, 0, true);
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

// Blocks start at multiples of kLowpBlock (a multiple of 4), so each Philox block of 4 elements lies in one block.
void dropout_forward_lowp(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const Ref o(out), x(inp);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = o.target(0, off, s + kLowpBlock);
    dropout_apply(r, x.load(0, off, n, s), (size_t)n, key, (uint64_t)off, false);
    o.store(0, off, n, r);
  });
}

void dropout_backward_lowp(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const Ref dx(dinp), d(dout);
  for_blocks(dinp.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = dx.load(0, off, n, s + kLowpBlock);
    dropout_apply(r, d.load(0, off, n, s), (size_t)n, key, (uint64_t)off, true);
    dx.store(0, off, n, r);
  });
}

}  // namespace

void register_dropout(KernelTable& t) {
  t.add<Kernel::DROPOUT_FORWARD>(Device::CPU, DType::F32, dropout_forward_f32);
  t.add<Kernel::DROPOUT_BACKWARD>(Device::CPU, DType::F32, dropout_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::DROPOUT_FORWARD>(Device::CPU, lowp, dropout_forward_lowp);
    t.add<Kernel::DROPOUT_BACKWARD>(Device::CPU, lowp, dropout_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu

namespace lmforge::kernels {

bool dropout_keep(const DropoutKey& key, uint64_t i) {
  if (key.p <= 0.0f) return true;
  const uint32_t counter[4] = {(uint32_t)(i / 4), (uint32_t)((i / 4) >> 32), (uint32_t)key.stream,
                               (uint32_t)(key.stream >> 32)};
  const uint32_t k[2] = {(uint32_t)key.seed, (uint32_t)(key.seed >> 32)};
  uint32_t w[4];
  cpu::philox4x32_10(counter, k, w);
  return (float)(w[i % 4] >> 8) * (1.0f / 16777216.0f) >= key.p;
}

}  // namespace lmforge::kernels
