// defines: the CUDA optimizer steps and gradient passes over flat f32 buffers (ops.h): AdamW, LAMB's two phases,
//          SGD, scale, sum of squares, non-finite count, f16 storage rounding. The element-wise steps use the CPU's
//          operation order with explicitly rounded operations (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn,
//          __fmaf_rn where ops.h writes fma): nvcc contracts a·b + c otherwise, the CPU file is compiled without
//          contraction, and this way each update is the CPU's bit for bit. Sums (Σp², Σu², Σx²) are in double,
//          per-block partials in a fixed tree then the blocks in order: deterministic, not the CPU's order.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kSumBlocks = 256;  // partial sums of the reductions (fixed: results do not depend on the GPU)

#define LMFORGE_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// p' = p·decay;  m = fma(g, 1−β1, m·β1);  v = v·β2 + ((1−β2)·g)·g;  p = p' + (−step·m) / (√v / bc2 + eps)
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamWScalars s) {
  LMFORGE_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float pi = __fmul_rn(p[i], s.decay);
    const float mi = __fmaf_rn(gi, s.one_minus_beta1, __fmul_rn(m[i], s.beta1));
    const float vi = __fadd_rn(__fmul_rn(v[i], s.beta2), __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias_correction2_sqrt), s.eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
  }
}

// u = (m / bc1) / (√(v / bc2) + eps) + wd·p
__device__ __forceinline__ float lamb_direction(float m, float v, float p, float wd, const LambScalars& s) {
  const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(v, s.bias_correction2)), s.eps);
  return __fadd_rn(__fdiv_rn(__fdiv_rn(m, s.bias_correction1), denom), __fmul_rn(wd, p));
}

// m = β1·m + β3·g;  v = β2·v + ((1−β2)·g)·g;  partial[block] = (Σp², Σu²) of the block's elements.
__global__ void lamb_moments_kernel(const float* p, const float* g, float* m, float* v, int64_t n, LambScalars s,
                                    float wd, double* partial) {
  __shared__ double scratch[32];
  double pp = 0.0, uu = 0.0;
  LMFORGE_GRID_STRIDE(j, n) {
    const float mj = __fadd_rn(__fmul_rn(s.beta1, m[j]), __fmul_rn(s.beta3, g[j]));
    const float vj = __fadd_rn(__fmul_rn(s.beta2, v[j]), __fmul_rn(__fmul_rn(s.one_minus_beta2, g[j]), g[j]));
    m[j] = mj;
    v[j] = vj;
    const float u = lamb_direction(mj, vj, p[j], wd, s);
    pp += (double)p[j] * p[j];
    uu += (double)u * u;
  }
  pp = block_sum(pp, scratch);
  uu = block_sum(uu, scratch);
  if (threadIdx.x == 0) partial[2 * blockIdx.x] = pp, partial[2 * blockIdx.x + 1] = uu;
}

__global__ void lamb_apply_kernel(float* p, const float* m, const float* v, int64_t n, LambScalars s, float wd,
                                  float rate) {
  LMFORGE_GRID_STRIDE(j, n) p[j] = __fsub_rn(p[j], __fmul_rn(rate, lamb_direction(m[j], v[j], p[j], wd, s)));
}

// d = decay ? fma(p, wd, g) : g;  b = first ? d : b·μ + d;  p = fma(b, −lr, p)
__global__ void sgd_kernel(float* p, const float* g, float* b, int64_t n, SgdScalars s) {
  LMFORGE_GRID_STRIDE(j, n) {
    const float d = s.decay ? __fmaf_rn(p[j], s.weight_decay, g[j]) : g[j];
    float step = d;
    if (b != nullptr) {
      step = s.first ? d : __fadd_rn(__fmul_rn(b[j], s.momentum), d);
      b[j] = step;
    }
    p[j] = __fmaf_rn(step, s.neg_lr, p[j]);
  }
}

__global__ void scale_kernel(float* x, int64_t n, float factor) { LMFORGE_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], factor); }

__global__ void sum_squares_kernel(const float* x, int64_t n, double* partial) {
  __shared__ double scratch[32];
  double s = 0.0;
  LMFORGE_GRID_STRIDE(i, n) s += (double)x[i] * (double)x[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void count_nonfinite_kernel(const float* x, int64_t n, unsigned long long* partial) {
  __shared__ double scratch[32];
  double c = 0.0;  // exact in double up to 2^53 elements
  LMFORGE_GRID_STRIDE(i, n) c += isfinite(x[i]) ? 0.0 : 1.0;
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = (unsigned long long)c;
}

// x = f32(f16(x)), round to nearest even, |x| >= 65520 → ±inf (as the CPU's conversion).
__global__ void round_f16_kernel(float* x, int64_t n) { LMFORGE_GRID_STRIDE(i, n) x[i] = __half2float(__float2half_rn(x[i])); }

float* f32(const Tensor& t) { return static_cast<float*>(t.data); }
unsigned grid(int64_t n) { return blocks_for(n, kThreads); }

void adamw_cuda(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWScalars& s) {
  const int64_t n = param.numel();
  adamw_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(param), f32(grad), f32(m), f32(v), n, s);
  check_launch("adamw_update");
}

// The blocks' partial sums, copied to the host and added there in block order (a handful of doubles).
template <class T>
void sum_partials(const Scratch& partial, size_t count, T* out) {
  CudaContext& ctx = cuda_context();
  check_cuda(cudaMemcpyAsync(out, partial.get(), count * sizeof(T), cudaMemcpyDeviceToHost, ctx.stream),
             "copy of partial sums");
  check_cuda(cudaStreamSynchronize(ctx.stream), "partial sums (synchronize)");
}

LambSums lamb_moments_cuda(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                           const LambScalars& s, float wd) {
  const int64_t n = param.numel();
  Scratch partial(2 * kSumBlocks * sizeof(double));
  lamb_moments_kernel<<<kSumBlocks, kThreads, 0, cuda_context().stream>>>(
      f32(param), f32(grad), f32(m), f32(v), n, s, wd, static_cast<double*>(partial.get()));
  check_launch("lamb_moments");
  double host[2 * kSumBlocks];
  sum_partials(partial, 2 * kSumBlocks, host);
  LambSums sums{0.0, 0.0};
  for (unsigned b = 0; b < kSumBlocks; b++) sums.p_sq += host[2 * b], sums.u_sq += host[2 * b + 1];
  return sums;
}

void lamb_apply_cuda(const Tensor& param, const Tensor& m, const Tensor& v, const LambScalars& s, float wd,
                     float rate) {
  const int64_t n = param.numel();
  lamb_apply_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(param), f32(m), f32(v), n, s, wd, rate);
  check_launch("lamb_apply");
}

void sgd_cuda(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
  const int64_t n = param.numel();
  sgd_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(
      f32(param), f32(grad), momentum_buffer.present() ? f32(momentum_buffer) : nullptr, n, s);
  check_launch("sgd_update");
}

void scale_cuda(const Tensor& x, float factor) {
  const int64_t n = x.numel();
  scale_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(x), n, factor);
  check_launch("scale");
}

// Both orders of ops.h give the same fixed-tree sum here (the GPU has no thread count to depend on); they differ
// from the CPU's orders by double rounding only (~1e-16 relative).
double sum_squares_cuda(const Tensor& x, SumOrder, double start) {
  Scratch partial(kSumBlocks * sizeof(double));
  sum_squares_kernel<<<kSumBlocks, kThreads, 0, cuda_context().stream>>>(f32(x), x.numel(),
                                                                         static_cast<double*>(partial.get()));
  check_launch("sum_squares");
  double host[kSumBlocks];
  sum_partials(partial, kSumBlocks, host);
  double s = start;
  for (unsigned b = 0; b < kSumBlocks; b++) s += host[b];
  return s;
}

int64_t count_nonfinite_cuda(const Tensor& x) {
  Scratch partial(kSumBlocks * sizeof(unsigned long long));
  count_nonfinite_kernel<<<kSumBlocks, kThreads, 0, cuda_context().stream>>>(
      f32(x), x.numel(), static_cast<unsigned long long*>(partial.get()));
  check_launch("count_nonfinite");
  unsigned long long host[kSumBlocks];
  sum_partials(partial, kSumBlocks, host);
  int64_t c = 0;
  for (unsigned b = 0; b < kSumBlocks; b++) c += (int64_t)host[b];
  return c;
}

void round_f16_cuda(const Tensor& x) {
  const int64_t n = x.numel();
  round_f16_kernel<<<grid(n), kThreads, 0, cuda_context().stream>>>(f32(x), n);
  check_launch("round_to_f16_storage");
}

#undef LMFORGE_GRID_STRIDE

}  // namespace

void register_optim(KernelTable& t) {
  t.add<Kernel::ADAMW_UPDATE>(Device::CUDA, DType::F32, adamw_cuda);
  t.add<Kernel::LAMB_MOMENTS>(Device::CUDA, DType::F32, lamb_moments_cuda);
  t.add<Kernel::LAMB_APPLY>(Device::CUDA, DType::F32, lamb_apply_cuda);
  t.add<Kernel::SGD_UPDATE>(Device::CUDA, DType::F32, sgd_cuda);
  t.add<Kernel::SCALE>(Device::CUDA, DType::F32, scale_cuda);
  t.add<Kernel::SUM_SQUARES>(Device::CUDA, DType::F32, sum_squares_cuda);
  t.add<Kernel::COUNT_NONFINITE>(Device::CUDA, DType::F32, count_nonfinite_cuda);
  t.add<Kernel::ROUND_TO_F16_STORAGE>(Device::CUDA, DType::F32, round_f16_cuda);
}

}  // namespace lmforge::kernels::cuda
