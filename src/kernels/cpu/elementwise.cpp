// defines: the CPU fp32 embedding lookup, layer normalisation, GELU (tanh and erf), add and strided copy
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace lmforge::kernels::cpu {

// ---- embedding --------------------------------------------------------------------------------------------------

void embedding_forward(float* out, const int32_t* ids, const float* table, int64_t rows, int64_t row_offset, int N,
                       int C, bool accumulate) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++) {
    float* o = out + (size_t)n * C;
    const int64_t r = (int64_t)ids[n] - row_offset;
    if (r < 0 || r >= rows) {
      if (!accumulate) std::memset(o, 0, sizeof(float) * (size_t)C);
      continue;
    }
    const float* e = table + (size_t)r * C;
    if (accumulate) {
#pragma omp simd
      for (int c = 0; c < C; c++) o[c] += e[c];
    } else {
      std::memcpy(o, e, sizeof(float) * (size_t)C);
    }
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t rows, int64_t row_offset, int N,
                        int C) {
  // Ids may repeat, so the scatter-add is split over channel blocks: each thread owns columns [c0,c1) of every row
  // and walks n in ascending order, so every element's sum has the same order on any thread count.
  const int block = 64;
  const int nblocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int k = 0; k < nblocks; k++) {
    const int c0 = k * block, c1 = c0 + block < C ? c0 + block : C;
    for (int n = 0; n < N; n++) {
      const int64_t r = (int64_t)ids[n] - row_offset;
      if (r < 0 || r >= rows) continue;
      float* dw = dtable + (size_t)r * C;
      const float* d = dout + (size_t)n * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) dw[c] += d[c];
    }
  }
}

// ---- layernorm --------------------------------------------------------------------------------------------------

void layernorm_forward_row(float* y, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                           int C, float eps) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int c = 0; c < C; c++) s += x[c];
  const float m = s / C;
  // Two passes (mean, then squared deviations) rather than E[x²]-E[x]², which cancels badly.
  float v = 0.0f;
#pragma omp simd reduction(+ : v)
  for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
  const float r = 1.0f / std::sqrt(v / C + eps);
#pragma omp simd
  for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
  *mean = m;
  *rstd = r;
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++)
    layernorm_forward_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C, eps);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C) {
  // dweight and dbias sum over all rows: each thread sums its rows privately, then adds once under a lock.
#pragma omp parallel if ((size_t)N * C >= kParallelMin)
  {
    std::vector<float> dw(C, 0.0f), db(C, 0.0f);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const float* x = inp + (size_t)n * C;
      const float* d = dout + (size_t)n * C;
      float* dx = dinp + (size_t)n * C;
      const float m = mean[n], r = rstd[n];
      float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int c = 0; c < C; c++) {
        const float g = d[c] * weight[c];
        g_mean += g;
        gx_mean += g * (x[c] - m) * r;
      }
      g_mean /= C;
      gx_mean /= C;
      float* dwp = dw.data();
      float* dbp = db.data();
#pragma omp simd
      for (int c = 0; c < C; c++) {
        const float xhat = (x[c] - m) * r;
        dbp[c] += d[c];
        dwp[c] += d[c] * xhat;
        dx[c] += r * (d[c] * weight[c] - g_mean - xhat * gx_mean);
      }
    }
#pragma omp critical
    for (int c = 0; c < C; c++) {
      dweight[c] += dw[c];
      dbias[c] += db[c];
    }
  }
}

// ---- GELU -------------------------------------------------------------------------------------------------------

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
}  // namespace

// The tanh GELU and its derivative per element, for the parallel loops and the serial ones below kParallelMin (the
// bf16 ops' 4096-element blocks): a parallel construct whose if clause is false still costs ~1 µs of team set-up.
#pragma omp declare simd
inline float gelu_tanh(float x) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + fast_tanh(u));
}
#pragma omp declare simd
inline float gelu_tanh_grad(float x, float d) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  const float th = fast_tanh(u);
  const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return d * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
}

void gelu_forward(float* out, const float* inp, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH) {
    if (n < kParallelMin) {
#pragma omp simd
      for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(inp[i]);
      return;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(inp[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH) {
    if (n < kParallelMin) {
#pragma omp simd
      for (size_t i = 0; i < n; i++) dinp[i] += gelu_tanh_grad(inp[i], dout[i]);
      return;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] += gelu_tanh_grad(inp[i], dout[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    dinp[i] += dout[i] * (0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * fast_exp(-0.5f * x * x) * kInvSqrt2Pi);
  }
}

// ---- add, copy --------------------------------------------------------------------------------------------------

void add_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void accumulate(float* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t rows, int64_t cols) {
  if (dst_stride == cols && src_stride == cols) {
    std::memcpy(dst, src, sizeof(float) * (size_t)(rows * cols));
    return;
  }
  for (int64_t r = 0; r < rows; r++) std::memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)cols);
}

}  // namespace lmforge::kernels::cpu
