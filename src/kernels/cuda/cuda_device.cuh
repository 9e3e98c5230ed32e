// defines: what the CUDA kernels share on the device: DView (a tensor view passed by value to a kernel: data,
//          dtype, row length and stride) with ld()/st() converting each element to and from fp32 by the view's own
//          dtype, view_of(), philox4x32_10() and dropout_factor() (philox.cuh: the CPU's generator, bit for bit), warp_sum(),
//          warp_max() and block_sum() (fixed reduction trees: results do not vary run to run)
//
// Why one kernel per op for every dtype rather than a template per dtype: the ops mix dtypes in one call (bf16
// activations with fp32 main gradients or statistics), the branch on a dtype is uniform across a warp, and one
// instantiation per kernel keeps the CUDA compile time of a clean build small (CI runs close to its limit).
// Arithmetic is fp32 (as on the CPU); values are rounded to bf16/f16 on store, round to nearest even.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/philox.cuh"
#include "kernels/tensor.h"

namespace lmforge::kernels::cuda {

struct DView {
  void* p;
  DType t;
  int64_t cols;    // length of a row (the last dimension)
  int64_t stride;  // elements between row starts

  __device__ __forceinline__ float ld(int64_t i) const {
    if (t == DType::F32) return static_cast<const float*>(p)[i];
    if (t == DType::BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    return __half2float(static_cast<const __half*>(p)[i]);
  }
  __device__ __forceinline__ void st(int64_t i, float v) const {
    if (t == DType::F32) static_cast<float*>(p)[i] = v;
    else if (t == DType::BF16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    else static_cast<__half*>(p)[i] = __float2half_rn(v);
  }
  // Element (row r, column c) of a possibly strided view.
  __device__ __forceinline__ float ld(int64_t r, int64_t c) const { return ld(r * stride + c); }
  __device__ __forceinline__ void st(int64_t r, int64_t c, float v) const { st(r * stride + c, v); }
  __device__ __forceinline__ bool present() const { return p != nullptr; }
};

inline DView view_of(const Tensor& t) {
  DView v{t.data, t.dtype, t.ndim == 0 ? 1 : t.dim(-1), t.stride()};
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread; `scratch`
// holds 32 values. Fixed tree: the same inputs give the same bits on every run.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace lmforge::kernels::cuda
