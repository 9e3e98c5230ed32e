// defines: the CUDA pieces of the (vocabulary-parallel) softmax cross-entropy (ops.h): row maxima, Σexp(l − m) with
//          the target logit, both in one pass, and the backward written in place over the logits. One block per
//          row reads the logits in their own dtype (no fp32 copy of bf16 logits), 16 bytes per load where
//          the rows are aligned; statistics in fp32.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/vec.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 512;

// Row n of the logits, read two ways: GenericRow through DView (any dtype, any alignment), one element per thread
// and step; VecRow<T> (dtype T, row start 16-byte aligned) 8 elements per thread and step through 16-byte loads,
// then the row's last V % 8 one per thread. each(V, f) calls f(v, value) for this thread's share of the row, in a
// fixed order, so the per-thread sums and the block_sum tree over them are the same on every run.
struct GenericRow {
  DView l;
  int64_t n;
  __device__ static GenericRow make(const DView& l, int64_t n) { return GenericRow{l, n}; }
  __device__ float at(int64_t v) const { return l.ld(n, v); }
  template <class F>
  __device__ void each(int64_t V, F&& f) const {
    for (int64_t v = threadIdx.x; v < V; v += blockDim.x) f(v, l.ld(n, v));
  }
};
template <class T>
struct VecRow {
  const T* p;
  __device__ static VecRow make(const DView& l, int64_t n) { return VecRow{static_cast<const T*>(l.p) + n * l.stride}; }
  __device__ float at(int64_t v) const { return to_f(p[v]); }
  template <class F>
  __device__ void each(int64_t V, F&& f) const {
    const int64_t nv = V / kVec;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float x[kVec];
      load8(p + i * kVec, x);
#pragma unroll
      for (int j = 0; j < kVec; j++) f(i * kVec + j, x[j]);
    }
    for (int64_t v = nv * kVec + threadIdx.x; v < V; v += blockDim.x) f(v, to_f(p[v]));
  }
};

// The row's maximum, to every thread (max is order-independent: exact).
template <class Row>
__device__ float row_max_of(const Row& row, int64_t V, float* scratch) {
  float mx = -INFINITY;
  row.each(V, [&](int64_t, float x) { mx = fmaxf(mx, x); });
  return block_max(mx, scratch);
}

// Σ_v exp(l − m) over the row (fixed tree: each thread's sum in its order, then block_sum) and the target logit
// (0 when the target is in another rank's columns). The one-pass and two-pass ops share it: equal bits.
template <class Row>
__device__ void row_sumexp(float* sumexp, float* target_logit, const Row& row, int64_t n, int64_t V, float m,
                           int32_t target, int64_t col_offset, float* scratch) {
  float s = 0.0f;
  row.each(V, [&](int64_t, float x) { s += expf(x - m); });
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int64_t t = (int64_t)target - col_offset;
    sumexp[n] = s;
    target_logit[n] = t >= 0 && t < V ? row.at(t) : 0.0f;
  }
}

// One block per row. Bytes for GPT-2's logits (16384 × 50304 bf16, 1.65 GB): row_max and sumexp read them once
// each, ~0.55 ms apiece at 3 TB/s; stats reads each row twice, the second time mostly from L2 (the 100 KB rows of
// the ~500 resident blocks), ~0.55-1.1 ms.
template <class Row>
__global__ void row_max_kernel(float* row_max, DView l, int64_t V) {
  __shared__ float scratch[32];
  const float m = row_max_of(Row::make(l, blockIdx.x), V, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <class Row>
__global__ void sumexp_kernel(float* sumexp, float* target_logit, DView l, const float* m, const int32_t* targets,
                              int64_t col_offset, int64_t V) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  row_sumexp(sumexp, target_logit, Row::make(l, n), n, V, m[n], targets[n], col_offset, scratch);
}

template <class Row>
__global__ void stats_kernel(float* row_max, float* sumexp, float* target_logit, DView l, const int32_t* targets,
                             int64_t col_offset, int64_t V) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  const Row row = Row::make(l, n);
  const float m = row_max_of(row, V, scratch);
  if (threadIdx.x == 0) row_max[n] = m;
  row_sumexp(sumexp, target_logit, row, n, V, m, targets[n], col_offset, scratch);
}

// dlogits[n,v] = dloss[n]·exp(l − lse[n]), minus dloss[n] at the target column (the CPU's two roundings). Each
// element is read and written by the same thread, so dlogits may alias logits. One block per row (no division per
// element). Bytes for GPT-2 (in place, bf16): 1.65 GB read + 1.65 GB written, ~1.1 ms at 3 TB/s.
__device__ __forceinline__ float ce_grad(float x, float lse, float w, bool target) {
  const float g = __fmul_rn(w, expf(x - lse));
  return target ? __fsub_rn(g, w) : g;
}

__global__ void backward_kernel(DView d, DView l, const float* lse, const int32_t* targets, const float* dloss,
                                int64_t col_offset, int64_t V) {
  const int64_t n = blockIdx.x, t = (int64_t)targets[n] - col_offset;
  const float w = dloss[n], e = lse[n];
  for (int64_t v = threadIdx.x; v < V; v += blockDim.x) d.st(n, v, ce_grad(l.ld(n, v), e, w, v == t));
}

// The fast path: d and l of dtype T, row starts 16-byte aligned.
template <class T>
__global__ void backward_vec(T* d, int64_t d_stride, const T* l, int64_t l_stride, const float* lse,
                             const int32_t* targets, const float* dloss, int64_t col_offset, int64_t V) {
  const int64_t n = blockIdx.x, t = (int64_t)targets[n] - col_offset, nv = V / kVec;
  const float w = dloss[n], e = lse[n];
  const T* src = l + n * l_stride;
  T* dst = d + n * d_stride;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float x[kVec];
    load8(src + i * kVec, x);
#pragma unroll
    for (int j = 0; j < kVec; j++) x[j] = ce_grad(x[j], e, w, i * kVec + j == t);
    store8(dst + i * kVec, x);
  }
  for (int64_t v = nv * kVec + threadIdx.x; v < V; v += blockDim.x)
    dst[v] = from_f<T>(ce_grad(to_f(src[v]), e, w, v == t));
}

// launch(Row{}) with Row the fast reader of the logits' dtype where their rows are aligned, else GenericRow.
template <class F>
void with_row(const Tensor& logits, F&& launch) {
  if (vec_rows_ok(logits))
    with_dtype(logits.dtype, [&](auto tag) { launch(VecRow<decltype(tag)>{}); });
  else
    launch(GenericRow{});
}

const int32_t* ids(const Tensor& t) { return static_cast<const int32_t*>(t.data); }
// The statistics are f32 (ops.h), whatever the logits' dtype.
float* f32(const Tensor& t) {
  if (t.dtype != DType::F32) kernel_error(Op::CROSSENTROPY, "statistics must be f32, got " + t.describe());
  return static_cast<float*>(t.data);
}

void row_max_cuda(const Tensor& row_max, const Tensor& logits) {
  if (logits.rows() == 0) return;
  with_row(logits, [&](auto row) {
    row_max_kernel<decltype(row)><<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(
        f32(row_max), view_of(logits), logits.dim(-1));
  });
  check_launch("crossentropy_row_max");
}

void sumexp_cuda(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                 const Tensor& targets, int64_t col_offset) {
  if (logits.rows() == 0) return;
  with_row(logits, [&](auto row) {
    sumexp_kernel<decltype(row)><<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(
        f32(sumexp), f32(target_logit), view_of(logits), f32(m), ids(targets), col_offset, logits.dim(-1));
  });
  check_launch("crossentropy_sumexp");
}

void stats_cuda(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits,
                const Tensor& targets, int64_t col_offset) {
  if (logits.rows() == 0) return;
  with_row(logits, [&](auto row) {
    stats_kernel<decltype(row)><<<(unsigned)logits.rows(), kThreads, 0, cuda_context().stream>>>(
        f32(row_max), f32(sumexp), f32(target_logit), view_of(logits), ids(targets), col_offset, logits.dim(-1));
  });
  check_launch("crossentropy_stats");
}

void backward_cuda(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                   const Tensor& dloss, int64_t col_offset) {
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (N * V == 0) return;
  cudaStream_t s = cuda_context().stream;
  if (dlogits.dtype == logits.dtype && vec_rows_ok(dlogits) && vec_rows_ok(logits)) {
    with_dtype(logits.dtype, [&](auto tag) {
      using T = decltype(tag);
      backward_vec<T><<<(unsigned)N, 256, 0, s>>>(static_cast<T*>(dlogits.data), dlogits.stride(),
                                                  static_cast<const T*>(logits.data), logits.stride(), f32(lse),
                                                  ids(targets), f32(dloss), col_offset, V);
    });
  } else {
    backward_kernel<<<(unsigned)N, 256, 0, s>>>(view_of(dlogits), view_of(logits), f32(lse), ids(targets), f32(dloss),
                                                col_offset, V);
  }
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
