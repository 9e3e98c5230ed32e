// defines: the CUDA LayerNorm over the last axis, forward beside backward (ops.h). One warp per row with 16-byte
//          loads where the rows allow (C a multiple of 8, aligned, one dtype), else one block per row; the
//          parameter gradients through deterministic column sums (column_sums.cuh). Every dtype; mean and rstd f32.
#include <initializer_list>

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/cuda/vec.cuh"
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

template <class T>
struct ParamTermsPair {
  const T* dout;
  const T* inp;
  int64_t in_stride;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void pair(int64_t n, int64_t c, float (&s)[2][2]) const {
    float d[2], x[2];
    load2(dout + n * C + c, d);
    load2(inp + n * in_stride + c, x);
    const float m = mean[n], r = rstd[n];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      s[j][0] += d[j] * (x[j] - m) * r;
      s[j][1] += d[j];
    }
  }
};

// The fast paths: one warp per row (8 rows per block of 256), rows of dtype T read 8 elements per lane and step
// through 16-byte loads, weight and bias of dtype W; C a multiple of 8. The same formulas as the block kernels
// above, the row sums over a warp's lanes (each lane's elements in order, then warp_sum's fixed tree).
// Forward bytes for GPT-2 ([16384, 768] bf16): 25 MB read, 25 MB written, ~17 µs at 3 TB/s (the second and third
// reads of a row come from L1/L2).
template <class T, class W>
__global__ void layernorm_forward_warp(T* out, float* mean, float* rstd, const T* inp, int64_t in_stride,
                                       const W* weight, const W* bias, int64_t N, int64_t C, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32, nv = C / kVec;
  if (n >= N) return;  // the whole warp
  const T* x = inp + n * in_stride;
  float s = 0.0f;
  for (int64_t i = lane; i < nv; i += 32) {
    float v[kVec];
    load8(x + i * kVec, v);
#pragma unroll
    for (int j = 0; j < kVec; j++) s += v[j];
  }
  const float m = warp_sum(s) / (float)C;
  float q = 0.0f;
  for (int64_t i = lane; i < nv; i += 32) {
    float v[kVec];
    load8(x + i * kVec, v);
#pragma unroll
    for (int j = 0; j < kVec; j++) {
      const float d = v[j] - m;
      q += d * d;
    }
  }
  const float r = 1.0f / sqrtf(warp_sum(q) / (float)C + eps);
  for (int64_t i = lane; i < nv; i += 32) {
    float v[kVec], w[kVec], b[kVec];
    load8(x + i * kVec, v);
    load8(weight + i * kVec, w);
    load8(bias + i * kVec, b);
#pragma unroll
    for (int j = 0; j < kVec; j++) v[j] = (v[j] - m) * r * w[j] + b[j];
    store8(out + n * C + i * kVec, v);
  }
  if (lane == 0) mean[n] = m, rstd[n] = r;
}

// Backward input bytes for GPT-2: dout, inp, dinp read and dinp written, 101 MB, ~34 µs at 3 TB/s.
template <class T, class W>
__global__ void layernorm_backward_input_warp(T* dinp, const T* dout, const T* inp, int64_t in_stride,
                                              const W* weight, const float* mean, const float* rstd, int64_t N,
                                              int64_t C) {
  const int lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32, nv = C / kVec;
  if (n >= N) return;
  const float m = mean[n], r = rstd[n];
  const T* x = inp + n * in_stride;
  const T* dy = dout + n * C;
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = lane; i < nv; i += 32) {
    float d[kVec], v[kVec], w[kVec];
    load8(dy + i * kVec, d);
    load8(x + i * kVec, v);
    load8(weight + i * kVec, w);
#pragma unroll
    for (int j = 0; j < kVec; j++) {
      const float g = d[j] * w[j], xhat = (v[j] - m) * r;
      sg += g;
      sgx += g * xhat;
    }
  }
  const float mg = warp_sum(sg) / (float)C;
  const float mgx = warp_sum(sgx) / (float)C;
  for (int64_t i = lane; i < nv; i += 32) {
    float d[kVec], v[kVec], w[kVec], o[kVec];
    load8(dy + i * kVec, d);
    load8(x + i * kVec, v);
    load8(weight + i * kVec, w);
    load8(dinp + n * C + i * kVec, o);
#pragma unroll
    for (int j = 0; j < kVec; j++) {
      const float g = d[j] * w[j], xhat = (v[j] - m) * r;
      o[j] = o[j] + r * (g - mg - xhat * mgx);
    }
    store8(dinp + n * C + i * kVec, o);
  }
}

// The warp kernels' conditions: C a multiple of 8; the row operands (out/dinp, dout: contiguous) of one dtype with
// 16-byte aligned rows; weight and bias (where present) contiguous, 16-byte aligned, of one dtype.
bool warp_path_ok(int64_t C, std::initializer_list<const Tensor*> rows, std::initializer_list<const Tensor*> params) {
  if (C % kVec != 0) return false;
  const DType t = rows.begin()[0]->dtype, w = params.begin()[0]->dtype;
  for (const Tensor* r : rows)
    if (r->dtype != t || !vec_rows_ok(*r)) return false;
  for (const Tensor* p : params)
    if (p->dtype != w || !p->contiguous() || !vec_rows_ok(*p)) return false;
  return true;
}

void layernorm_forward_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                            const Tensor& weight, const Tensor& bias, float eps) {
  const int64_t N = inp.rows(), C = inp.dim(-1);
  if (N == 0) return;
  cudaStream_t s = cuda_context().stream;
  float* m = static_cast<float*>(mean.data);
  float* r = static_cast<float*>(rstd.data);
  if (out.contiguous() && warp_path_ok(C, {&out, &inp}, {&weight, &bias})) {
    with_dtype(inp.dtype, [&](auto ttag) {
      with_dtype(weight.dtype, [&](auto wtag) {
        using T = decltype(ttag);
        using W = decltype(wtag);
        layernorm_forward_warp<T, W><<<(unsigned)((N + 7) / 8), 256, 0, s>>>(
            static_cast<T*>(out.data), m, r, static_cast<const T*>(inp.data), inp.stride(),
            static_cast<const W*>(weight.data), static_cast<const W*>(bias.data), N, C, eps);
      });
    });
  } else {
    layernorm_forward_kernel<<<(unsigned)N, kThreads, 0, s>>>(view_of(out), m, r, view_of(inp), view_of(weight),
                                                              view_of(bias), C, eps);
  }
  check_launch("layernorm_forward");
}

void layernorm_backward_cuda(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                             const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = inp.rows(), C = inp.dim(-1);
  if (N == 0) return;
  cudaStream_t s = cuda_context().stream;
  const float* m = static_cast<const float*>(mean.data);
  const float* r = static_cast<const float*>(rstd.data);
  if (dinp.contiguous() && dout.contiguous() && warp_path_ok(C, {&dinp, &dout, &inp}, {&weight})) {
    with_dtype(inp.dtype, [&](auto ttag) {
      with_dtype(weight.dtype, [&](auto wtag) {
        using T = decltype(ttag);
        using W = decltype(wtag);
        layernorm_backward_input_warp<T, W><<<(unsigned)((N + 7) / 8), 256, 0, s>>>(
            static_cast<T*>(dinp.data), static_cast<const T*>(dout.data), static_cast<const T*>(inp.data),
            inp.stride(), static_cast<const W*>(weight.data), m, r, N, C);
      });
    });
  } else {
    layernorm_backward_input_kernel<<<(unsigned)N, kThreads, 0, s>>>(view_of(dinp), view_of(dout), view_of(inp),
                                                                     view_of(weight), m, r, C);
  }
  check_launch("layernorm_backward (input)");
  const int64_t chunk_rows = column_chunk_rows(N), chunks = column_chunks(N);
  Scratch scratch((size_t)(2 * chunks * C) * sizeof(float));
  float* partials = static_cast<float*>(scratch.get());
  if (C % 2 == 0 && dout.dtype == inp.dtype && dout.contiguous() && pair_rows_ok(dout) && pair_rows_ok(inp)) {
    with_dtype(inp.dtype, [&](auto tag) {
      using T = decltype(tag);
      const dim3 grid((unsigned)((C / 2 + 127) / 128), (unsigned)chunks);
      column_partials_pair<2><<<grid, 128, 0, s>>>(
          partials, N, C, chunk_rows,
          ParamTermsPair<T>{static_cast<const T*>(dout.data), static_cast<const T*>(inp.data), inp.stride(), m, r, C});
    });
  } else {
    const dim3 grid((unsigned)((C + 127) / 128), (unsigned)chunks);
    column_partials<2><<<grid, 128, 0, s>>>(partials, N, C, chunk_rows,
                                            ParamTerms{view_of(dout), view_of(inp), m, r, C});
  }
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
