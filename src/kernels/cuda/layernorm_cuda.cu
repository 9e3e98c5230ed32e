// defines: the CUDA LayerNorm over the last axis, forward beside backward (ops.h). One block per row; the
//          parameter gradients through deterministic column sums (column_sums.cuh). Every dtype; mean and rstd f32.
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// mean = Σx/C; var = Σ(x−mean)²/C (two passes over the row: no cancellation for rows with a large mean);
// rstd = 1/sqrt(var + eps); y = (x−mean)·rstd·w + b.
__global__ void layernorm_forward_kernel(DView out, float* mean, float* rstd, DView inp, DView weight, DView bias,
                                         int64_t C, float eps) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += inp.ld(n, c);
  const float m = block_sum(s, scratch) / (float)C;
  float v = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float d = inp.ld(n, c) - m;
    v += d * d;
  }
  const float r = 1.0f / sqrtf(block_sum(v, scratch) / (float)C + eps);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    out.st(n * C + c, (inp.ld(n, c) - m) * r * weight.ld(c) + bias.ld(c));
  if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
}

// With xhat = (x−mean)·rstd and g = dout·w:  dinp += rstd·(g − mean_c(g) − xhat·mean_c(g·xhat)).
__global__ void layernorm_backward_input_kernel(DView dinp, DView dout, DView inp, DView weight, const float* mean,
                                                const float* rstd, int64_t C) {
  __shared__ float scratch[32];
  const int64_t n = blockIdx.x;
  const float m = mean[n], r = rstd[n];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = dout.ld(n * C + c) * weight.ld(c), xhat = (inp.ld(n, c) - m) * r;
    sg += g;
    sgx += g * xhat;
  }
  const float mg = block_sum(sg, scratch) / (float)C;
  const float mgx = block_sum(sgx, scratch) / (float)C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float g = dout.ld(n * C + c) * weight.ld(c), xhat = (inp.ld(n, c) - m) * r;
    dinp.st(n * C + c, dinp.ld(n * C + c) + r * (g - mg - xhat * mgx));
  }
}

// Terms of the parameter gradients: s[0] += dout·xhat (dweight), s[1] += dout (dbias).
struct ParamTerms {
  DView dout, inp;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void operator()(int64_t n, int64_t c, float* s) const {
    const float d = dout.ld(n * C + c);
    s[0] += d * (inp.ld(n, c) - mean[n]) * rstd[n];
    s[1] += d;
  }
};
struct AddParams {
  DView dweight, dbias;
  __device__ void operator()(int t, int64_t c, float sum) const {
    const DView& d = t == 0 ? dweight : dbias;
    d.st(c, d.ld(c) + sum);
  }
};

void layernorm_forward_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                            const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t N = inp.rows(), C = inp.dim(-1);
  if (N == 0) return;
  layernorm_forward_kernel<<<(unsigned)N, kThreads, 0, cuda_context().stream>>>(
      view_of(out), static_cast<float*>(mean.data), static_cast<float*>(rstd.data), view_of(inp), view_of(weight),
      view_of(bias), C, eps);
  check_launch("layernorm_forward");
}

void layernorm_backward_cuda(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                             const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = inp.rows(), C = inp.dim(-1);
  if (N == 0) return;
  cudaStream_t s = cuda_context().stream;
  const float* m = static_cast<const float*>(mean.data);
  const float* r = static_cast<const float*>(rstd.data);
  layernorm_backward_input_kernel<<<(unsigned)N, kThreads, 0, s>>>(view_of(dinp), view_of(dout), view_of(inp),
                                                                   view_of(weight), m, r, C);
  check_launch("layernorm_backward (input)");
  const int64_t chunk_rows = column_chunk_rows(N), chunks = column_chunks(N);
  Scratch scratch((size_t)(2 * chunks * C) * sizeof(float));
  const dim3 grid((unsigned)((C + 127) / 128), (unsigned)chunks);
  column_partials<2><<<grid, 128, 0, s>>>(static_cast<float*>(scratch.get()), N, C, chunk_rows,
                                          ParamTerms{view_of(dout), view_of(inp), m, r, C});
  check_launch("layernorm_backward (parameter partials)");
  column_finish<2><<<(unsigned)((C + 127) / 128), 128, 0, s>>>(static_cast<const float*>(scratch.get()), chunks, C,
                                                               AddParams{view_of(dweight), view_of(dbias)});
  check_launch("layernorm_backward (parameters)");
}

}  // namespace

void register_layernorm(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::LAYERNORM_FORWARD>(Device::CUDA, d, layernorm_forward_cuda);
    t.add<Kernel::LAYERNORM_BACKWARD>(Device::CUDA, d, layernorm_backward_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
