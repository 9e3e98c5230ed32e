// defines: the CUDA copy: dst = src of equal rows × columns, either strided, converting between dtypes
//          (f32 → bf16/f16 round to nearest even). Every dtype.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

__global__ void copy_kernel(DView dst, DView src, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst.st(r, c, src.ld(r, c));
  }
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  const int64_t rows = dst.rows(), cols = dst.ndim == 0 ? 1 : dst.dim(-1);
  if (rows * cols == 0) return;
  if (dst.dtype == src.dtype) {  // same storage: the copy engine, row by row with the two strides
    const size_t es = dtype_size(dst.dtype);
    check_cuda(cudaMemcpy2DAsync(dst.data, (size_t)dst.stride() * es, src.data, (size_t)src.stride() * es,
                                 (size_t)cols * es, (size_t)rows, cudaMemcpyDeviceToDevice, cuda_context().stream),
               "copy (cudaMemcpy2DAsync)");
    return;
  }
  copy_kernel<<<blocks_for(rows * cols, 256), 256, 0, cuda_context().stream>>>(view_of(dst), view_of(src), rows, cols);
  check_launch("copy");
}

}  // namespace

void register_copy(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) t.add<Kernel::COPY>(Device::CUDA, d, copy_cuda);
}

}  // namespace lmforge::kernels::cuda
