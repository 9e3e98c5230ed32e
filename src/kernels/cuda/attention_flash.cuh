// defines: what the CUDA attention files share: AttentionArgs (the op's operands), geometry() (the Geometry of
//          attention_geometry.cuh for them), and the entry points of the tensor-core kernels (attention_mma_cuda.cu)
//          and the WMMA flash kernels (attention_flash_cuda.cu), which attention_cuda.cu tries in that order before
//          its row kernels. Private to the CUDA backend; C++17.
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention_geometry.cuh"
#include "kernels/cuda/cuda_common.h"
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

// Whether a tiled attention kernel's dynamic shared memory fits a block on this device; sets the kernel's opt-in
// limit when it does (a device with less gets false, and the caller the next path).
template <class Kernel>
bool fits(Kernel kernel, size_t bytes) {
  if (bytes > (size_t)cuda_context().max_smem_optin) return false;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
             "cudaFuncSetAttribute (attention shared memory)");
  return true;
}

// f(std::integral_constant<int, HS>{}) for a head size the tiled kernels are built for (32, 64, 128); false, with
// nothing called, for any other.
template <class F>
bool with_head_size(int64_t hs, F&& f) {
  switch (hs) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: return false;
  }
}

// D[(b·H + h)·Tq + t] = dout_t·out_t over head h's columns (the backward's row dots), queued on the stream.
void attention_row_dots(float* D, const Tensor& dout, const Tensor& out, const Geometry& g);

// The tensor-core forward and backward (attention_mma_cuda.cu): bf16 or f16 q, k, v (and dout) with 16-byte
// aligned rows, head size 32, 64 or 128; false, with nothing queued, where they do not apply.
bool mma_forward(const AttentionArgs& a, const Tensor& out, float* lse);
bool mma_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                  const Tensor& out, const float* lse);

// The flash forward (out, lse [B,H,Tq] written) or backward (dq, dk, dv accumulated); false, with nothing queued,
// where it does not apply (a head size other than 32, 64 or 128; more shared memory than the device gives a block),
// and the caller runs the row kernels.
bool flash_forward(const AttentionArgs& a, const Tensor& out, float* lse);
bool flash_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                    const Tensor& out, const float* lse);

}  // namespace lmforge::kernels::cuda
