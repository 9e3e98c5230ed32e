// defines: what the CUDA attention files share: AttentionArgs (the op's operands), Geometry (sizes, masks and the
//          dropout key as a kernel argument, with allowed() and factor()), geometry(), and the flash attention entry
//          points of attention_flash_cuda.cu, which attention_cuda.cu calls before its row kernels. Private to the
//          CUDA backend; C++17.
#pragma once
#include <cmath>

#include "kernels/cuda/cuda_device.cuh"
#include "kernels/ops.h"

namespace lmforge::kernels::cuda {

struct AttentionArgs {
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  int heads;
  AttentionMask mask;
  const Tensor& key_padding;
  const AttentionDropout& dropout;
};

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

inline Geometry geometry(const AttentionArgs& a) {
  Geometry g{};
  g.B = a.q.dim(0), g.Tq = a.q.dim(1), g.Tk = a.k.dim(1), g.H = a.heads, g.hs = a.q.dim(2) / a.heads;
  g.scale = 1.0f / std::sqrt((float)g.hs);
  g.causal = a.mask == AttentionMask::CAUSAL;
  g.padding = a.key_padding.present() ? static_cast<const int32_t*>(a.key_padding.data) : nullptr;
  g.p = a.dropout.key.p, g.seed = a.dropout.key.seed, g.stream = a.dropout.key.stream;
  g.head_offset = a.dropout.head_offset;
  g.total_heads = a.dropout.total_heads > 0 ? a.dropout.total_heads : a.heads;
  return g;
}

// The flash forward (out, lse [B,H,Tq] written) or backward (dq, dk, dv accumulated); false, with nothing queued,
// where it does not apply (a head size other than 32, 64 or 128; more shared memory than the device gives a block),
// and the caller runs the row kernels.
bool flash_forward(const AttentionArgs& a, const Tensor& out, float* lse);
bool flash_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                    const Tensor& out, const float* lse);

}  // namespace lmforge::kernels::cuda
