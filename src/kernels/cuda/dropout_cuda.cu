// defines: the CUDA dropout, forward beside backward, with the CPU's counter-based Philox keys (cuda_device.cuh):
//          the keep decision of element i is the CPU's bit for bit. Every dtype.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
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

void dropout_forward_cuda(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const int64_t n = out.numel();
  dropout_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(out), view_of(inp), n, key.p, key.seed,
                                                                        key.stream, false);
  check_launch("dropout_forward");
}

void dropout_backward_cuda(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const int64_t n = dinp.numel();
  dropout_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(dinp), view_of(dout), n, key.p,
                                                                        key.seed, key.stream, true);
  check_launch("dropout_backward");
}

}  // namespace

void register_dropout(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::DROPOUT_FORWARD>(Device::CUDA, d, dropout_forward_cuda);
    t.add<Kernel::DROPOUT_BACKWARD>(Device::CUDA, d, dropout_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
