// defines: Geometry, the attention op's sizes, masks and dropout key as one kernel argument, with allowed() and
//          factor(). Free of CUDA headers (the qualifiers only), so the tensor-core attention kernels that take it
//          also compile under the CPU warp emulator of tests/kernels/warp_emulator.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/philox.cuh"

namespace lmforge::kernels::cuda {

struct Geometry {
  int64_t B, Tq, Tk, H, hs;
  float scale;             // 1/√hs
  bool causal;
  const int32_t* padding;  // [B,Tk] or nullptr
  float p;                 // dropout probability (0: none)
  uint64_t seed, stream;
  int64_t head_offset, total_heads;

  __device__ bool allowed(int64_t b, int64_t t, int64_t j) const {
    return (!causal || j <= t) && (padding == nullptr || padding[b * Tk + j] != 0);
  }
  // 1/(1−p) or 0 for probability (b,h,t,j); 1 without dropout.
  __device__ float factor(int64_t b, int64_t h, int64_t t, int64_t j) const {
    if (p <= 0.0f) return 1.0f;
    const uint64_t i = (uint64_t)((((b * total_heads + head_offset + h) * Tq + t) * Tk) + j);
    return dropout_factor(p, seed, stream, i);
  }
};

}  // namespace lmforge::kernels::cuda
