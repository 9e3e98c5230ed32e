// defines: the CUDA embedding lookup (vocabulary piece, accumulate or overwrite) and its backward, a scatter-add
//          summed in ascending n for every element (the CPU's order: exact and deterministic). Every dtype.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

// out[n,c] = table[ids[n] − offset, c] inside the piece, else 0; with accumulate += (rows outside unchanged).
__global__ void embedding_forward_kernel(DView out, const int32_t* ids, DView table, int64_t N, int64_t C, int64_t R,
                                         int64_t offset, bool accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * C; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / C, c = i % C, row = (int64_t)ids[n] - offset;
    const bool inside = row >= 0 && row < R;
    if (accumulate) {
      if (inside) out.st(n, c, out.ld(n, c) + table.ld(row, c));
    } else {
      out.st(n, c, inside ? table.ld(row, c) : 0.0f);
    }
  }
}

// Table rows are split into kRowBuckets classes (row mod kRowBuckets), one per grid row.
constexpr int kRowBuckets = 32;

// dtable[ids[n] − offset, c] += dout[n, c]. The thread of (column c, bucket k) walks n in ascending order and adds
// the rows of its bucket: no two threads touch the same element and every element's sum runs in the CPU's order, so
// results are exact and deterministic without atomics. Every thread of a block reads the same id (a broadcast);
// parallel over columns × buckets (a sort of the ids by row would parallelise further).
__global__ void embedding_backward_kernel(DView dtable, DView dout, const int32_t* ids, int64_t N, int64_t C, int64_t R,
                                          int64_t offset) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, bucket = blockIdx.y;
  if (c >= C) return;
  for (int64_t n = 0; n < N; n++) {
    const int64_t row = (int64_t)ids[n] - offset;
    if (row >= 0 && row < R && row % kRowBuckets == bucket) dtable.st(row, c, dtable.ld(row, c) + dout.ld(n, c));
  }
}

void embedding_forward_cuda(const Tensor& out, const Tensor& ids, const Tensor& table, int64_t row_offset,
                            bool accumulate) {
  const int64_t N = ids.numel(), C = table.dim(1), R = table.dim(0);
  if (N * C == 0) return;
  embedding_forward_kernel<<<blocks_for(N * C, 256), 256, 0, cuda_context().stream>>>(
      view_of(out), static_cast<const int32_t*>(ids.data), view_of(table), N, C, R, row_offset, accumulate);
  check_launch("embedding_forward");
}

void embedding_backward_cuda(const Tensor& dtable, const Tensor& dout, const Tensor& ids, int64_t row_offset) {
  const int64_t N = ids.numel(), C = dtable.dim(1), R = dtable.dim(0);
  if (N * C == 0) return;
  embedding_backward_kernel<<<dim3((unsigned)((C + 127) / 128), kRowBuckets), 128, 0, cuda_context().stream>>>(
      view_of(dtable), view_of(dout), static_cast<const int32_t*>(ids.data), N, C, R, row_offset);
  check_launch("embedding_backward");
}

}  // namespace

void register_embedding(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::EMBEDDING_FORWARD>(Device::CUDA, d, embedding_forward_cuda);
    t.add<Kernel::EMBEDDING_BACKWARD>(Device::CUDA, d, embedding_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
