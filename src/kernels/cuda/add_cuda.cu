// defines: the CUDA add (residual connections): out = a + b;  backward da += dout, db += dout. Every dtype.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

// out may alias a or b: each element is read before it is written, by the same thread.
__global__ void add_forward_kernel(DView out, DView a, DView b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out.st(i, a.ld(i) + b.ld(i));
}

// da += dout and db += dout in one pass over dout (either may be absent).
__global__ void add_backward_kernel(DView da, DView db, DView dout, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float d = dout.ld(i);
    if (da.present()) da.st(i, da.ld(i) + d);
    if (db.present()) db.st(i, db.ld(i) + d);
  }
}

void add_forward_cuda(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  add_forward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(out), view_of(a), view_of(b), n);
  check_launch("add_forward");
}

void add_backward_cuda(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const int64_t n = dout.numel();
  add_backward_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(da), view_of(db), view_of(dout), n);
  check_launch("add_backward");
}

}  // namespace

void register_add(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::ADD_FORWARD>(Device::CUDA, d, add_forward_cuda);
    t.add<Kernel::ADD_BACKWARD>(Device::CUDA, d, add_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
