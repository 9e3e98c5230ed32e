// defines: the CUDA pieces of the (vocabulary-parallel) softmax cross-entropy (ops.h): row maxima, Σexp(l − m) with
//          the target logit, both in one pass, and the backward written in place over the logits. One block per
//          row reads the logits in their own dtype (no fp32 copy of bf16 logits); statistics in fp32.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// The row's maximum, to every thread (max is order-independent: exact).
__device__ float row_max_of(const DView& l, int64_t n, int64_t V, float* scratch) {
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, l.ld(n, v));
  return block_max(mx, scratch);
}

// Σ_v exp(l − m) over the row (fixed tree: each thread's strided sum, then block_sum) and the target logit
// (0 when the target is in another rank's columns). The one-pass and two-pass ops share it: equal bits.
__device__ void row_sumexp(float* sumexp, float* target_logit, const DView& l, int64_t n, int64_t V, float m,
                           int32_t target, int64_t col_offset, float* scratch) {
  float s = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) s += expf(l.ld(n, v) - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int64_t t = (int64_t)target - col_offset;
    sumexp[n] = s;
    target_logit[n] = t >= 0 && t < V ? l.ld(n, t) : 0.0f;
  }
}

__global__ void row_max_kernel(float* row_max, DView l, int64_t V) {
  __shared__ float scratch[32];
  const float m = row_max_of(l, blockIdx.x, V, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void sumexp_kernel(float* sumexp, float* target_logit, DView l, const float* m, const int32_t* targets,
                              int64_t col_offset, int64_t V) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  row_sumexp(sumexp, target_logit, l, n, V, m[n], targets[n], col_offset, scratch);
}

__global__ void stats_kernel(float* row_max, float* sumexp, float* target_logit, DView l, const int32_t* targets,
                             int64_t col_offset, int64_t V) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  const float m = row_max_of(l, n, V, scratch);
  if (threadIdx.x == 0) row_max[n] = m;
  row_sumexp(sumexp, target_logit, l, n, V, m, targets[n], col_offset, scratch);
}

// dlogits[n,v] = dloss[n]·exp(l − lse[n]), minus dloss[n] at the target column (the CPU's two roundings). Each
// element is read and written by the same thread, so dlogits may alias logits.
__global__ void backward_kernel(DView d, DView l, const float* lse, const int32_t* targets, const float* dloss,
                                int64_t col_offset, int64_t N, int64_t V) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * V; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i / V, v = i % V;
    const float w = dloss[n];
    float g = __fmul_rn(w, expf(l.ld(n, v) - lse[n]));
    if ((int64_t)targets[n] - col_offset == v) g = __fsub_rn(g, w);
    d.st(n, v, g);
  }
}

const int32_t* ids(const Tensor& t) { return static_cast<const int32_t*>(t.data); }
// The statistics are f32 (ops.h), whatever the logits' dtype.
float* f32(const Tensor& t) {
  if (t.dtype != DType::F32) kernel_error(Op::CROSSENTROPY, "statistics must be f32, got " + t.describe());
  return static_cast<float*>(t.data);
}

void row_max_cuda(const Tensor& row_max, const Tensor& logits) {
  if (logits.rows() == 0) return;
  row_max_kernel<<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(f32(row_max), view_of(logits),
                                                                                  logits.dim(-1));
  check_launch("crossentropy_row_max");
}

void sumexp_cuda(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                 const Tensor& targets, int64_t col_offset) {
  if (logits.rows() == 0) return;
  sumexp_kernel<<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(
      f32(sumexp), f32(target_logit), view_of(logits), f32(m), ids(targets), col_offset, logits.dim(-1));
  check_launch("crossentropy_sumexp");
}

void stats_cuda(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                const Tensor& targets, int64_t col_offset) {
  if (logits.rows() == 0) return;
  stats_kernel<<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(
      f32(row_max), f32(sumexp), f32(target_logit), view_of(logits), ids(targets), col_offset, logits.dim(-1));
  check_launch("crossentropy_stats");
}

void backward_cuda(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                   const Tensor& dloss, int64_t col_offset) {
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (N * V == 0) return;
  backward_kernel<<<blocks_for(N * V, 256), 256, 0, cuda_context().stream>>>(
      view_of(dlogits), view_of(logits), f32(lse), ids(targets), f32(dloss), col_offset, N, V);
  check_launch("crossentropy_backward");
}

}  // namespace

void register_crossentropy(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::CROSSENTROPY_ROW_MAX>(Device::CUDA, d, row_max_cuda);
    t.add<Kernel::CROSSENTROPY_SUMEXP>(Device::CUDA, d, sumexp_cuda);
    t.add<Kernel::CROSSENTROPY_STATS>(Device::CUDA, d, stats_cuda);
    t.add<Kernel::CROSSENTROPY_BACKWARD>(Device::CUDA, d, backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
