// defines: the CUDA GELU, tanh and erf forms (ops.h), forward beside backward, every dtype; and the CUDA tanh
//          (BERT's pooler), every dtype (the model calls it in fp32, as the CPU has it; bf16/f16 compute in fp32
//          and round once on store, like every other element-wise CUDA op)
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kInvSqrt2 = 0.7071067811865476f,
                kInvSqrt2Pi = 0.3989422804014327f, kCubic = 0.044715f;

// TANH: y = 0.5·x·(1 + tanh u), u = √(2/π)·(x + 0.044715·x³).   ERF: y = 0.5·x·(1 + erf(x/√2)).
__global__ void gelu_forward_kernel(DView out, DView inp, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float x = inp.ld(i);
    const float y = tanh_form ? 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)))
                              : 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    out.st(i, y);
  }
}

// dinp += dout·y'(x):  TANH y' = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh²u)·√(2/π)·(1 + 3·0.044715·x²)
//                      ERF  y' = 0.5·(1 + erf(x/√2)) + x·exp(−x²/2)/√(2π)
__global__ void gelu_backward_kernel(DView dinp, DView inp, DView dout, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float x = inp.ld(i);
    float dy;
    if (tanh_form) {
      const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
      dy = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    } else {
      dy = 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
    }
    dinp.st(i, dinp.ld(i) + dout.ld(i) * dy);
  }
}

void gelu_forward_cuda(const Tensor& out, const Tensor& inp, GeluKind kind) {
  if (!out.contiguous() || !inp.contiguous()) kernel_error(Op::GELU, "strided operand");
  const int64_t n = out.numel();
  gelu_forward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(out), view_of(inp), n,
                                                                             kind == GeluKind::TANH);
  check_launch("gelu_forward");
}

void gelu_backward_cuda(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  if (!dinp.contiguous() || !inp.contiguous() || !dout.contiguous()) kernel_error(Op::GELU, "strided operand");
  const int64_t n = dinp.numel();
  gelu_backward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(dinp), view_of(inp),
                                                                              view_of(dout), n, kind == GeluKind::TANH);
  check_launch("gelu_backward");
}

// y = tanh(x);  dinp += dout·(1 − tanh²x) (from the input, as ops.h's tanh_backward).
__global__ void tanh_forward_kernel(DView out, DView inp, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out.st(i, tanhf(inp.ld(i)));
}

__global__ void tanh_backward_kernel(DView dinp, DView inp, DView dout, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float t = tanhf(inp.ld(i));
    dinp.st(i, dinp.ld(i) + dout.ld(i) * (1.0f - t * t));
  }
}

void tanh_forward_cuda(const Tensor& out, const Tensor& inp) {
  const int64_t n = out.numel();
  tanh_forward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(out), view_of(inp), n);
  check_launch("tanh_forward");
}

void tanh_backward_cuda(const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  const int64_t n = dinp.numel();
  tanh_backward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(dinp), view_of(inp),
                                                                              view_of(dout), n);
  check_launch("tanh_backward");
}

}  // namespace

void register_tanh(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::TANH_FORWARD>(Device::CUDA, d, tanh_forward_cuda);
    t.add<Kernel::TANH_BACKWARD>(Device::CUDA, d, tanh_backward_cuda);
  }
}

void register_gelu(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::GELU_FORWARD>(Device::CUDA, d, gelu_forward_cuda);
    t.add<Kernel::GELU_BACKWARD>(Device::CUDA, d, gelu_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
