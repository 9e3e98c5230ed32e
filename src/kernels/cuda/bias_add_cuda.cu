// defines: the CUDA bias add: x[n,:] += bias;  backward dbias += Σ_n dout (column_sums(), also the linear layer's
//          bias gradient). Every dtype.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {

namespace {

__global__ void bias_add_kernel(DView x, DView bias, int64_t n, int64_t C) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    x.st(i, x.ld(i) + bias.ld(i % C));
}

void bias_add_forward_cuda(const Tensor& x, const Tensor& bias) {
  const int64_t n = x.numel();
  bias_add_kernel<<<blocks_for(n, 256), 256, 0, cuda_context().stream>>>(view_of(x), view_of(bias), n, x.dim(-1));
  check_launch("bias_add_forward");
}

struct RowTerm {
  DView x;
  __device__ void operator()(int64_t n, int64_t c, float* s) const { s[0] += x.ld(n, c); }
};
struct AddTo {
  DView acc;
  __device__ void operator()(int, int64_t c, float sum) const { acc.st(c, acc.ld(c) + sum); }
};

}  // namespace

void column_sums(const Tensor& acc, const Tensor& x) {
  const int64_t N = x.rows(), C = x.dim(-1);
  if (N == 0 || C == 0) return;
  const int64_t chunk_rows = column_chunk_rows(N), chunks = column_chunks(N);
  Scratch scratch((size_t)(chunks * C) * sizeof(float));
  cudaStream_t s = cuda_context().stream;
  const dim3 grid((unsigned)((C + 127) / 128), (unsigned)chunks);
  column_partials<1><<<grid, 128, 0, s>>>(static_cast<float*>(scratch.get()), N, C, chunk_rows, RowTerm{view_of(x)});
  check_launch("column sums (partials)");
  column_finish<1><<<(unsigned)((C + 127) / 128), 128, 0, s>>>(static_cast<const float*>(scratch.get()), chunks, C,
                                                               AddTo{view_of(acc)});
  check_launch("column sums (finish)");
}

void register_bias_add(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::BIAS_ADD_FORWARD>(Device::CUDA, d, bias_add_forward_cuda);
    t.add<Kernel::BIAS_ADD_BACKWARD>(Device::CUDA, d, column_sums);
  }
}

}  // namespace lmforge::kernels::cuda
