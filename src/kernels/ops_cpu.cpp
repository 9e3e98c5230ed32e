// defines: the CPU (fp32, OpenMP, OpenBLAS) implementation of kernels/ops.h
#include <cblas.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

// expf that vectorises inside `omp simd` loops (glibc's expf does not at -O3 without -ffast-math, and the
// softmax over 50k vocabulary columns and the GELU's tanh are dominated by it otherwise).
// exp(x) = 2^n · e^r with n = round(x·log2 e), |r| <= ln2/2; e^r by Cephes' degree-7 polynomial (error ~1 ulp).
#pragma omp declare simd
inline float fast_exp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Adding and subtracting 1.5·2^23 rounds to the nearest integer in float arithmetic.
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// tanh(u) = 1 - 2/(e^{2u} + 1); absolute error ~1e-7, which is what GELU's 0.5·x·(1 + tanh) sees.
#pragma omp declare simd
inline float fast_tanh(float u) { return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f); }

// Below this many elements of work a loop runs on the calling thread: waking the team costs more than it saves,
// and far more on a loaded machine, where every barrier may wait a scheduler time slice for a descheduled thread.
constexpr size_t kParallelMin = 1 << 15;

}  // namespace

// ---- embedding --------------------------------------------------------------------------------------------------

void embedding_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C) {
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * C >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      float* o = out + ((size_t)b * T + t) * C;
      const float* e = wte + (size_t)tokens[(size_t)b * T + t] * C;
      const float* p = wpe + (size_t)t * C;
#pragma omp simd
      for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C) {
  // Positions are distinct per t, so splitting over t is race-free; tokens may repeat, so the scatter-add into
  // dwte is split over channel blocks instead (each thread owns columns [c0,c1) of every row).
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= kParallelMin)
  for (int t = 0; t < T; t++) {
    float* dp = dwpe + (size_t)t * C;
    for (int b = 0; b < B; b++) {
      const float* d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
      for (int c = 0; c < C; c++) dp[c] += d[c];
    }
  }
  const int block = 64;
  const int nblocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= kParallelMin)
  for (int k = 0; k < nblocks; k++) {
    int c0 = k * block, c1 = c0 + block < C ? c0 + block : C;
    for (size_t n = 0; n < (size_t)B * T; n++) {
      float* dw = dwte + (size_t)tokens[n] * C;
      const float* d = dout + n * C;
#pragma omp simd
      for (int c = c0; c < c1; c++) dw[c] += d[c];
    }
  }
}

// ---- layernorm --------------------------------------------------------------------------------------------------

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  const float eps = 1e-5f;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* x = inp + (size_t)n * C;
    float* y = out + (size_t)n * C;
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
    mean[n] = m;
    rstd[n] = r;
  }
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

// ---- linear -----------------------------------------------------------------------------------------------------

namespace {

// Row-major C[M,N] = op(A)[M,K]·op(B)[K,N] + beta·C, split over the threads of ONE OpenMP team, each thread
// calling single-threaded OpenBLAS on its block of C's rows (or columns, whichever dimension is longer).
// Why not OpenBLAS's own threads: its pthread pool and OpenMP's team both busy-wait after their work, so
// alternating GEMMs with OpenMP loops makes the two pools fight over the cores (10 AdamW steps of the parity
// test's small model: 522 ms with both pools, 23 ms with one). One pool, split by us, has no such hand-over.
void use_single_threaded_blas() {
  static const bool once = (openblas_set_num_threads(1), true);
  (void)once;
}

// One row of A (a decode step): c[j] = beta·c[j] + Σ_k a[k]·op(B)[k,j] as SGEMV over column blocks, one per thread.
// SGEMM would repack all of B for a single row, which costs more than the product itself.
void gemv_row(bool trans_b, int N, int K, const float* a, const float* B, int ldb, float beta, float* c,
              int threads) {
  if (beta == 0.0f) {  // OpenBLAS multiplies by beta=0 rather than overwriting: clear stale NaNs first
    std::memset(c, 0, sizeof(float) * (size_t)N);
    beta = 1.0f;
  }
  if ((size_t)N * K < kParallelMin || omp_in_parallel()) threads = 1;
  const int chunk = ((N + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel num_threads(threads)
  {
    const int j0 = omp_get_thread_num() * chunk;
    const int j1 = j0 + chunk < N ? j0 + chunk : N;
    if (j0 < j1) {
      if (trans_b)  // B is [N,K]: c = B·a
        cblas_sgemv(CblasRowMajor, CblasNoTrans, j1 - j0, K, 1.0f, B + (size_t)j0 * ldb, ldb, a, 1, beta, c + j0, 1);
      else  // B is [K,N]: c = Bᵀ·a
        cblas_sgemv(CblasRowMajor, CblasTrans, K, j1 - j0, 1.0f, B + j0, ldb, a, 1, beta, c + j0, 1);
    }
  }
}

void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc) {
  use_single_threaded_blas();
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int threads = omp_get_max_threads();
  if (M == 1 && !trans_a) {
    gemv_row(trans_b, N, K, A, B, ldb, beta, C, threads);
    return;
  }
  const double work = 2.0 * M * N * K;
  if (threads <= 1 || work < 4e6 || omp_in_parallel()) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_rows = M >= N;
  const int len = split_rows ? M : N;
  // Blocks are multiples of 16 rows/columns (whole AVX-512 vectors, and OpenBLAS's register tiles).
  const int chunk = ((len + threads - 1) / threads + 15) / 16 * 16;
#pragma omp parallel num_threads(threads)
  {
    const int i0 = omp_get_thread_num() * chunk;
    const int i1 = i0 + chunk < len ? i0 + chunk : len;
    if (i0 < i1) {
      if (split_rows) {
        const float* a = trans_a ? A + i0 : A + (size_t)i0 * lda;
        cblas_sgemm(CblasRowMajor, ta, tb, i1 - i0, N, K, 1.0f, a, lda, B, ldb, beta, C + (size_t)i0 * ldc, ldc);
      } else {
        const float* b = trans_b ? B + (size_t)i0 * ldb : B + i0;
        cblas_sgemm(CblasRowMajor, ta, tb, M, i1 - i0, K, 1.0f, A, lda, b, ldb, beta, C + i0, ldc);
      }
    }
  }
}

}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int IC, int OC,
                    WeightLayout layout) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= kParallelMin)
    for (int n = 0; n < N; n++) std::memcpy(out + (size_t)n * OC, bias, sizeof(float) * OC);
    beta = 1.0f;
  }
  if (layout == WeightLayout::IN_OUT) {
    gemm(false, false, N, OC, IC, inp, IC, weight, OC, beta, out, OC);
  } else {
    gemm(false, true, N, OC, IC, inp, IC, weight, IC, beta, out, OC);
  }
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int IC, int OC, WeightLayout layout) {
  if (layout == WeightLayout::IN_OUT) {
    if (dinp != nullptr) gemm(false, true, N, IC, OC, dout, OC, weight, OC, 1.0f, dinp, IC);  // [N,IC] += [N,OC]·[IC,OC]ᵀ
    gemm(true, false, IC, OC, N, inp, IC, dout, OC, 1.0f, dweight, OC);  // [IC,OC] += [N,IC]ᵀ·[N,OC]
  } else {
    if (dinp != nullptr) gemm(false, false, N, IC, OC, dout, OC, weight, IC, 1.0f, dinp, IC);  // [N,IC] += [N,OC]·[OC,IC]
    gemm(true, false, OC, IC, N, dout, OC, inp, IC, 1.0f, dweight, IC);  // [OC,IC] += [N,OC]ᵀ·[N,IC]
  }
  if (dbias != nullptr) {
    // Column sums: threads own disjoint column blocks and walk all rows.
    const int block = 256;
    const int nblocks = (OC + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)N * OC >= kParallelMin)
    for (int k = 0; k < nblocks; k++) {
      int o0 = k * block, o1 = o0 + block < OC ? o0 + block : OC;
      float acc[block];
      for (int o = o0; o < o1; o++) acc[o - o0] = 0.0f;
      for (int n = 0; n < N; n++) {
        const float* d = dout + (size_t)n * OC;
#pragma omp simd
        for (int o = o0; o < o1; o++) acc[o - o0] += d[o];
      }
      for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
  }
}

// ---- attention --------------------------------------------------------------------------------------------------
// Per (b,h) the head's q, k, v are [T,hs] matrices with row stride 3C inside qkv, so scores, P·V and the four
// backward products are single-threaded GEMMs, one (b,h) per OpenMP thread at a time. The GEMMs compute the
// full T×T square (twice the causal work) but run ~10x faster than dot-product loops; the masked entries of P
// are exact zeros, so they add nothing.

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  use_single_threaded_blas();
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt((float)hs);
#pragma omp parallel for collapse(2) schedule(dynamic, 1) if ((size_t)B * T * T * C >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* P = att + ((size_t)b * NH + h) * T * T;
      // S = Q·Kᵀ·scale  [T,T]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, k, C3, 0.0f, P, T);
      for (int t = 0; t < T; t++) {
        float* p = P + (size_t)t * T;
        float maxv = -INFINITY;
        for (int s = 0; s <= t; s++) maxv = p[s] > maxv ? p[s] : maxv;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int s = 0; s <= t; s++) {
          p[s] = fast_exp(p[s] - maxv);
          sum += p[s];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (int s = 0; s <= t; s++) p[s] *= inv;
        for (int s = t + 1; s < T; s++) p[s] = 0.0f;
      }
      // Y = P·V  [T,hs], written into the head's columns of out [B,T,C]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, v, C3, 0.0f,
                  out + (size_t)b * T * C + (size_t)h * hs, C);
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                        int NH) {
  use_single_threaded_blas();
  const int hs = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt((float)hs);
  // dk and dv of (b,h) gather contributions from every query row, so one thread owns a whole (b,h).
#pragma omp parallel if ((size_t)B * T * T * C >= kParallelMin)
  {
    std::vector<float> dP((size_t)T * T);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        const float* q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
        const float* k = q + C;
        const float* v = q + 2 * C;
        float* dq = dqkv + (size_t)b * T * C3 + (size_t)h * hs;
        float* dk = dq + C;
        float* dv = dq + 2 * C;
        const float* P = att + ((size_t)b * NH + h) * T * T;
        const float* dy = dout + (size_t)b * T * C + (size_t)h * hs;
        float* d = dP.data();
        // dP = dY·Vᵀ [T,T];  dV += Pᵀ·dY [T,hs]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, d, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, P, T, dy, C, 1.0f, dv, C3);
        // dS = P∘(dP - rowsum(P∘dP))·scale, in place over dP (zero where s > t because P is)
        for (int t = 0; t < T; t++) {
          const float* p = P + (size_t)t * T;
          float* dr = d + (size_t)t * T;
          float pdp = 0.0f;
#pragma omp simd reduction(+ : pdp)
          for (int s = 0; s <= t; s++) pdp += p[s] * dr[s];
#pragma omp simd
          for (int s = 0; s <= t; s++) dr[s] = p[s] * (dr[s] - pdp) * scale;
          for (int s = t + 1; s < T; s++) dr[s] = 0.0f;
        }
        // dQ += dS·K;  dK += dSᵀ·Q
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, d, T, k, C3, 1.0f, dq, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, d, T, q, C3, 1.0f, dk, C3);
      }
    }
  }
}

void attention_decode_forward(float* out, float* scratch, const float* qkv, const float* kcache,
                              const float* vcache, int B, int len, int max_len, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt((float)hs);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * len * C >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + (size_t)b * 3 * C + (size_t)h * hs;
      float* p = scratch + ((size_t)b * NH + h) * len;
      float maxv = -INFINITY;
      for (int s = 0; s < len; s++) {
        const float* k = kcache + ((size_t)b * max_len + s) * C + (size_t)h * hs;
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int i = 0; i < hs; i++) d += q[i] * k[i];
        p[s] = d * scale;
        maxv = p[s] > maxv ? p[s] : maxv;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int s = 0; s < len; s++) {
        p[s] = fast_exp(p[s] - maxv);
        sum += p[s];
      }
      const float inv = 1.0f / sum;
      float* o = out + (size_t)b * C + (size_t)h * hs;
      for (int i = 0; i < hs; i++) o[i] = 0.0f;
      for (int s = 0; s < len; s++) {
        const float* v = vcache + ((size_t)b * max_len + s) * C + (size_t)h * hs;
        const float ps = p[s] * inv;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += ps * v[i];
      }
    }
  }
}

// ---- gelu -------------------------------------------------------------------------------------------------------

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
}

void gelu_forward(float* out, const float* inp, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    out[i] = 0.5f * x * (1.0f + fast_tanh(u));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    const float u = kGeluScale * (x + 0.044715f * x * x * x);
    const float th = fast_tanh(u);
    const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
  }
}

// ---- residual ---------------------------------------------------------------------------------------------------

void residual_forward(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

// ---- softmax + cross-entropy ------------------------------------------------------------------------------------

void crossentropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
    for (int v = 0; v < V; v++) maxv = l[v] > maxv ? l[v] : maxv;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += fast_exp(l[v] - maxv);
    lse[n] = maxv + std::log(sum);
    losses[n] = lse[n] - l[targets[n]];
  }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           float dloss, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    float* d = dlogits + (size_t)n * V;
    const float m = lse[n];
#pragma omp simd
    for (int v = 0; v < V; v++) d[v] = dloss * fast_exp(l[v] - m);
    d[targets[n]] -= dloss;
  }
}

}  // namespace lmforge::kernels
