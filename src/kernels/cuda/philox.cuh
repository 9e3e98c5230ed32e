// defines: philox4x32_10() and dropout_factor(), the CPU's dropout generator on the device, bit for bit. Free of
//          CUDA headers (only the __host__/__device__ qualifiers), so the attention kernels that use it also compile
//          under the CPU warp emulator of tests/kernels/warp_emulator.h.
#pragma once
#include <cstdint>

namespace lmforge::kernels::cuda {

// Philox4x32-10 (Salmon et al., SC'11), as kernels/cpu/dropout_cpu.cpp: ten rounds of
//   (hi0, lo0) = M0·c0;  (hi1, lo1) = M1·c2;  c ← (hi1 ⊕ c1 ⊕ k0, lo1, hi0 ⊕ c3 ⊕ k1, lo0)
// with the key bumped by the Weyl constants between rounds. Integer arithmetic only: the words, and so the keep
// decisions, are the CPU's bit for bit.
__host__ __device__ inline void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; round++) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c[0] = hi1 ^ c[1] ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k1;
    c[3] = lo0;
  }
}

// The factor of element i under key (ops.h): counter (i/4 low, i/4 high, stream low, stream high), word i % 4,
// u = (word >> 8)·2⁻²⁴ (exact in float); kept (factor 1/(1−p), computed in float as the CPU does) when u >= p.
__device__ __forceinline__ float dropout_factor(float p, uint64_t seed, uint64_t stream, uint64_t i) {
  const uint64_t j = i / 4;
  uint32_t c[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
  philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
  const float u = (float)(c[i % 4] >> 8) * (1.0f / 16777216.0f);
  return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

}  // namespace lmforge::kernels::cuda
