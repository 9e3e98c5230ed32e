// defines: the CUDA dropout, forward beside backward, with the CPU's counter-based Philox keys (cuda_device.cuh):
//          the keep decision of element i is the CPU's bit for bit. Every dtype.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/vec.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

// out[i] = factor(i)·inp[i] (=), or dinp[i] += factor(i)·dout[i] (accumulate); out may alias inp (same thread).
// p = 0: factor 1 (a copy, or an add). The product is rounded before the add (__fmul_rn: no contraction), as the
// CPU's y += f·x.
__global__ void dropout_kernel(DView y, DView x, int64_t n, float p, uint64_t seed, uint64_t stream, bool accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float f = p > 0.0f ? dropout_factor(p, seed, stream, (uint64_t)i) : 1.0f;
    const float v = __fmul_rn(f, x.ld(i));
    y.st(i, accumulate ? __fadd_rn(y.ld(i), v) : v);
  }
}

// The fast path (one dtype, contiguous, 16-byte aligned): 8 elements per thread, i.e. two whole Philox blocks of
// 4 (one generator call per 4 elements instead of one per element), the same factors and roundings as the generic
// kernel. Bytes for a GPT-2 residual dropout (16384 × 768 bf16): 50 MB (=) or 75 MB (+=), 17-25 µs at 3 TB/s.
template <class T>
__global__ void dropout_vec(T* y, const T* x, int64_t n, float p, uint64_t seed, uint64_t stream, bool accumulate) {
  const int64_t nv = n / kVec, first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const float keep = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
  for (int64_t i = first; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
    float v[kVec], f[kVec];
    load8(x + i * kVec, v);
#pragma unroll
    for (int h = 0; h < kVec / 4; h++) {
      const uint64_t j = (uint64_t)i * (kVec / 4) + h;  // Philox block of elements 4j .. 4j+3
      uint32_t c[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
      if (p > 0.0f) philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
#pragma unroll
      for (int w = 0; w < 4; w++)
        f[h * 4 + w] = p > 0.0f ? ((float)(c[w] >> 8) * (1.0f / 16777216.0f) >= p ? keep : 0.0f) : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kVec; k++) v[k] = __fmul_rn(f[k], v[k]);
    if (accumulate) {
      float o[kVec];
      load8(y + i * kVec, o);
#pragma unroll
      for (int k = 0; k < kVec; k++) v[k] = __fadd_rn(o[k], v[k]);
    }
    store8(y + i * kVec, v);
  }
  const int64_t t = nv * kVec + first;
  if (t < n) {
    const float f = p > 0.0f ? dropout_factor(p, seed, stream, (uint64_t)t) : 1.0f;
    const float v = __fmul_rn(f, to_f(x[t]));
    y[t] = from_f<T>(accumulate ? __fadd_rn(to_f(y[t]), v) : v);
  }
}

void dropout_cuda(const Tensor& y, const Tensor& x, const DropoutKey& key, bool accumulate, const char* what) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const CudaContext& ctx = cuda_context();
  if (flat_vec_ok(y.dtype, {&y, &x})) {
    with_dtype(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      dropout_vec<T><<<vec_grid(n / kVec + 1, 256, ctx.sm_count), 256, 0, ctx.stream>>>(
          static_cast<T*>(y.data), static_cast<const T*>(x.data), n, key.p, key.seed, key.stream, accumulate);
    });
  } else {
    dropout_kernel<<<blocks_for(n, 256), 256, 0, ctx.stream>>>(view_of(y), view_of(x), n, key.p, key.seed, key.stream,
                                                               accumulate);
  }
  check_launch(what);
}

void dropout_forward_cuda(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  dropout_cuda(out, inp, key, false, "dropout_forward");
}

void dropout_backward_cuda(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  dropout_cuda(dinp, dout, key, true, "dropout_backward");
}

}  // namespace

void register_dropout(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::DROPOUT_FORWARD>(Device::CUDA, d, dropout_forward_cuda);
    t.add<Kernel::DROPOUT_BACKWARD>(Device::CUDA, d, dropout_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
