// defines: the CUDA multi-head attention (ops.h): forward and backward entry points (the tensor-core kernels of
//          attention_mma_cuda.cu, then the flash kernels of attention_flash_cuda.cu where they apply, the row kernels
//          here otherwise), the row kernels, and
//          key/value-cache decode. Causal, key-padding and cross (Tq != Tk) masks; attention dropout with the CPU's
//          Philox keys at the element's index in the whole model's [B, total_heads, Tq, Tk] probabilities, so the
//          keep decisions are the CPU's. Every dtype; scores and sums in fp32.
//
// Saved state (ops.h, AttentionSaved::LSE): the row log-sum-exp f32 [B,H,Tq], +inf for a row with no allowed key.
// Row kernels (stage 1; head sizes the flash kernels lack, and LMFORGE_CUDA_ATTENTION=rows): one block per query row
// (forward, decode, backward's dq) or per key row (backward's dk, dv); the probabilities live in an f32
// [B,H,Tq,Tk] scratch for the call only (the forward's scores; the backward's p = exp(s − lse) recomputed); no
// float atomics (deterministic).
#include "kernels/cuda/attention_flash.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/cuda_device.cuh"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cuda {
namespace {

constexpr int kThreads = 128;

// One block per (b, h, t):  s_j = q_t·k_j / √hs over the allowed keys;  p = softmax(s) (0 elsewhere, and for a row
// with no allowed key);  out_t = Σ_j drop(p_tj)·v_j;  lse_t = max + log Σ exp(s − max) (+inf without allowed keys).
// probs (scratch) holds the undropped p.
__global__ void attention_forward_kernel(DView out, float* lse, float* probs, DView q, DView k, DView v, Geometry g) {
  __shared__ float scratch[32];
  extern __shared__ float qrow[];  // hs
  const int64_t t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  float* prow = probs + ((b * g.H + h) * g.Tq + t) * g.Tk;
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) qrow[c] = q.ld(b * g.Tq + t, h * g.hs + c);
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
    float s = -INFINITY;
    if (g.allowed(b, t, j)) {
      s = 0.0f;
      for (int64_t c = 0; c < g.hs; c++) s += qrow[c] * k.ld(b * g.Tk + j, h * g.hs + c);
      s *= g.scale;
    }
    prow[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
    const float e = mx == -INFINITY || prow[j] == -INFINITY ? 0.0f : expf(prow[j] - mx);
    prow[j] = e;
    sum += e;
  }
  sum = block_sum(sum, scratch);  // ends with a barrier: every prow[j] above is visible
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  if (threadIdx.x == 0) lse[(b * g.H + h) * g.Tq + t] = sum > 0.0f ? mx + logf(sum) : INFINITY;
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) prow[j] *= inv;
  __syncthreads();
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) {
    float o = 0.0f;
    const int64_t end = g.causal ? t + 1 : g.Tk;
    for (int64_t j = 0; j < end; j++) {
      const float pj = prow[j];
      if (pj != 0.0f) o += pj * g.factor(b, h, t, j) * v.ld(b * g.Tk + j, h * g.hs + c);
    }
    out.st((b * g.Tq + t) * g.H * g.hs + h * g.hs + c, o);
  }
}

// Backward's probabilities, one block per (b, h, t): p_tj = exp(s_tj − lse_t) for the allowed keys, 0 elsewhere
// (lse = +inf, a row with no allowed key, gives 0 too).
__global__ void attention_probs_kernel(float* probs, const float* lse, DView q, DView k, Geometry g) {
  extern __shared__ float qrow[];  // hs
  const int64_t t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  float* prow = probs + ((b * g.H + h) * g.Tq + t) * g.Tk;
  const float l = lse[(b * g.H + h) * g.Tq + t];
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) qrow[c] = q.ld(b * g.Tq + t, h * g.hs + c);
  __syncthreads();
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
    float p = 0.0f;
    if (g.allowed(b, t, j)) {
      float s = 0.0f;
      for (int64_t c = 0; c < g.hs; c++) s += qrow[c] * k.ld(b * g.Tk + j, h * g.hs + c);
      p = expf(s * g.scale - l);
    }
    prow[j] = p;
  }
}

// Backward, per query row (b, h, t):  dp_tj = drop_tj·(dout_t·v_j);  dz_tj = p_tj·(dp_tj − Σ_j' p_tj'·dp_tj')
// written to dz;  dq_t += Σ_j dz_tj·k_j/√hs.
__global__ void attention_backward_query_kernel(float* dz, DView dq, DView dout, DView k, DView v, const float* probs,
                                                Geometry g) {
  __shared__ float scratch[32];
  extern __shared__ float drow[];  // hs: dout_t
  const int64_t t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t row = ((b * g.H + h) * g.Tq + t) * g.Tk;
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) drow[c] = dout.ld(b * g.Tq + t, h * g.hs + c);
  __syncthreads();
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
    const float p = probs[row + j];
    float dp = 0.0f;
    if (p != 0.0f) {
      for (int64_t c = 0; c < g.hs; c++) dp += drow[c] * v.ld(b * g.Tk + j, h * g.hs + c);
      dp *= g.factor(b, h, t, j);
    }
    dz[row + j] = dp;
    dot += p * dp;
  }
  dot = block_sum(dot, scratch);
  for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) dz[row + j] = probs[row + j] * (dz[row + j] - dot);
  __syncthreads();
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) {
    float s = 0.0f;
    for (int64_t j = 0; j < g.Tk; j++) {
      const float z = dz[row + j];
      if (z != 0.0f) s += z * k.ld(b * g.Tk + j, h * g.hs + c);
    }
    dq.st(b * g.Tq + t, h * g.hs + c, dq.ld(b * g.Tq + t, h * g.hs + c) + s * g.scale);
  }
}

// Backward, per key row (b, h, j):  dv_j += Σ_t drop(p_tj)·dout_t;  dk_j += Σ_t dz_tj·q_t/√hs (t ascending).
__global__ void attention_backward_key_kernel(DView dk, DView dv, const float* dz, DView dout, DView q,
                                              const float* probs, Geometry g) {
  const int64_t j = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t base = (b * g.H + h) * g.Tq * g.Tk + j;
  const int64_t first = g.causal ? j : 0;  // causal: queries t >= j see key j
  for (int64_t c = threadIdx.x; c < g.hs; c += blockDim.x) {
    float sv = 0.0f, sk = 0.0f;
    for (int64_t t = first; t < g.Tq; t++) {
      const float p = probs[base + t * g.Tk];
      if (p == 0.0f) continue;
      sv += p * g.factor(b, h, t, j) * dout.ld(b * g.Tq + t, h * g.hs + c);
      sk += dz[base + t * g.Tk] * q.ld(b * g.Tq + t, h * g.hs + c);
    }
    dv.st(b * g.Tk + j, h * g.hs + c, dv.ld(b * g.Tk + j, h * g.hs + c) + sv);
    dk.st(b * g.Tk + j, h * g.hs + c, dk.ld(b * g.Tk + j, h * g.hs + c) + sk * g.scale);
  }
}

// Decode: one block per (b, h), the query against cached positions 0..len−1 (all allowed), scores in scratch.
__global__ void attention_decode_kernel(DView out, float* scratch_scores, DView q, DView kc, DView vc, int64_t P,
                                        int64_t len, int64_t H, int64_t hs, float scale) {
  __shared__ float scratch[32];
  const int64_t h = blockIdx.x, b = blockIdx.y;
  float* srow = scratch_scores + (b * H + h) * P;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    float s = 0.0f;
    for (int64_t c = 0; c < hs; c++) s += q.ld(b, h * hs + c) * kc.ld(b * P + j, h * hs + c);
    srow[j] = s * scale;
    mx = fmaxf(mx, srow[j]);
  }
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    srow[j] = expf(srow[j] - mx);
    sum += srow[j];
  }
  sum = block_sum(sum, scratch);
  for (int64_t c = threadIdx.x; c < hs; c += blockDim.x) {
    float o = 0.0f;
    for (int64_t j = 0; j < len; j++) o += srow[j] * vc.ld(b * P + j, h * hs + c);
    out.st(b * H * hs + h * hs + c, o / sum);
  }
}

// The dynamic shared memory of a kernel that keeps one head row (hs floats), rounded up to whole 16-byte words:
// ptxas may merge the loop's remainder reads of the row into one wide read (compute-sanitizer reported a 12-byte
// read past a 2-float row on an H200), which must stay inside the allocation.
size_t row_smem(int64_t hs) { return (size_t)((hs + 3) / 4 * 4) * sizeof(float); }

float* f32(const Tensor& t, const char* what) {
  if (t.dtype != DType::F32) kernel_error(Op::ATTENTION, std::string(what) + " must be f32, got " + t.describe());
  return static_cast<float*>(t.data);
}

void rows_forward(const AttentionArgs& a, const Tensor& out, float* lse) {
  const Geometry g = geometry(a);
  Scratch probs((size_t)(g.B * g.H * g.Tq * g.Tk) * sizeof(float));
  const dim3 grid((unsigned)g.Tq, (unsigned)g.H, (unsigned)g.B);
  attention_forward_kernel<<<grid, kThreads, row_smem(g.hs), cuda_context().stream>>>(
      view_of(out), lse, static_cast<float*>(probs.get()), view_of(a.q), view_of(a.k), view_of(a.v), g);
  check_launch("attention_forward (rows)");
}

void rows_backward(const AttentionArgs& a, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                   const float* lse) {
  const Geometry g = geometry(a);
  cudaStream_t s = cuda_context().stream;
  const size_t bytes = (size_t)(g.B * g.H * g.Tq * g.Tk) * sizeof(float);
  Scratch dz(bytes), probs(bytes);
  float* p = static_cast<float*>(probs.get());
  const dim3 rows((unsigned)g.Tq, (unsigned)g.H, (unsigned)g.B);
  if (g.Tq > 0) {
    attention_probs_kernel<<<rows, kThreads, row_smem(g.hs), s>>>(p, lse, view_of(a.q), view_of(a.k),
                                                                               g);
    check_launch("attention_backward (probabilities)");
    attention_backward_query_kernel<<<rows, kThreads, row_smem(g.hs), s>>>(
        static_cast<float*>(dz.get()), view_of(dq), view_of(dout), view_of(a.k), view_of(a.v), p, g);
    check_launch("attention_backward (queries)");
  }
  if (g.Tk > 0) {
    attention_backward_key_kernel<<<dim3((unsigned)g.Tk, (unsigned)g.H, (unsigned)g.B), kThreads, 0, s>>>(
        view_of(dk), view_of(dv), static_cast<const float*>(dz.get()), view_of(dout), view_of(a.q), p, g);
    check_launch("attention_backward (keys)");
  }
}

void attention_forward_cuda(const Tensor& out, const Tensor& saved, const Tensor& q, const Tensor& k, const Tensor& v,
                            int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  if (!out.contiguous()) kernel_error(Op::ATTENTION, "strided output " + out.describe());
  const AttentionArgs a{q, k, v, heads, mask, key_padding, dropout};
  if (q.dim(0) * q.dim(1) * heads == 0) return;
  float* lse = f32(saved, "saved log-sum-exp");
  using K = CudaContext::AttentionKernels;
  const K first = cuda_context().attention;
  if (first == K::TENSOR_CORES && mma_forward(a, out, lse)) return;
  if (first != K::ROWS && flash_forward(a, out, lse)) return;
  rows_forward(a, out, lse);
}

void attention_backward_cuda(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& saved,
                             int heads, AttentionMask mask, const Tensor& key_padding,
                             const AttentionDropout& dropout) {
  const AttentionArgs a{q, k, v, heads, mask, key_padding, dropout};
  if (q.dim(0) * heads == 0) return;
  const float* lse = f32(saved, "saved log-sum-exp");
  using K = CudaContext::AttentionKernels;
  const K first = cuda_context().attention;
  if (first == K::TENSOR_CORES && mma_backward(a, dq, dk, dv, dout, out, lse)) return;
  if (first != K::ROWS && flash_backward(a, dq, dk, dv, dout, out, lse)) return;
  rows_backward(a, dq, dk, dv, dout, lse);
}

void attention_decode_cuda(const Tensor& out, const Tensor& scratch, const Tensor& q, const Tensor& kcache,
                           const Tensor& vcache, int len, int heads) {
  const int64_t B = kcache.dim(0), P = kcache.dim(1), C = kcache.dim(2), hs = C / heads;
  if (scratch.dtype != DType::F32) kernel_error(Op::ATTENTION_DECODE, "scratch must be f32, got " + scratch.describe());
  if (B == 0) return;
  attention_decode_kernel<<<dim3((unsigned)heads, (unsigned)B), kThreads, 0, cuda_context().stream>>>(
      view_of(out), static_cast<float*>(scratch.data), view_of(q), view_of(kcache), view_of(vcache), P, len, heads, hs,
      1.0f / sqrtf((float)hs));
  check_launch("attention_decode");
}

}  // namespace

void register_attention(KernelTable& t) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    t.add<Kernel::ATTENTION_FORWARD>(Device::CUDA, d, attention_forward_cuda);
    t.add<Kernel::ATTENTION_BACKWARD>(Device::CUDA, d, attention_backward_cuda);
    t.add<Kernel::ATTENTION_DECODE>(Device::CUDA, d, attention_decode_cuda);
  }
}

}  // namespace lmforge::kernels::cuda
