// defines: the CPU fp32 multi-head attention (masks, cross-attention, strided q/k/v, attention dropout) and its
//          key/value-cache decoding step
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace lmforge::kernels::cpu {

// Per (b,h) the head's q, k, v are [T,hs] matrices with a row stride (3C inside a fused q|k|v activation), so the
// scores, P·V and the four backward products are single-threaded GEMMs, one (b,h) per OpenMP thread at a time.
// Causal attention runs them on blocks of kRowBlock query rows, each against only the keys [0, block end): the lower
// triangle plus the diagonal blocks, about half the T×T square; entries beyond a row's last key are exact zeros.
constexpr int kRowBlock = 64;

namespace {

// The dropout factors (0 or 1/(1−p)) of elements [base, base+n) of the probabilities' index space.
void row_factors(const DropoutKey& key, uint64_t base, int n, float* f) {
  const float scale = 1.0f / (1.0f - key.p);
  const uint32_t k[2] = {(uint32_t)key.seed, (uint32_t)(key.seed >> 32)};
  uint64_t i = base;
  int done = 0;
  while (done < n) {
    const uint64_t j = i / 4;
    const uint32_t counter[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)key.stream, (uint32_t)(key.stream >> 32)};
    uint32_t w[4];
    philox4x32_10(counter, k, w);
    for (uint64_t r = i % 4; r < 4 && done < n; r++, i++, done++)
      f[done] = (float)(w[r] >> 8) * (1.0f / 16777216.0f) >= key.p ? scale : 0.0f;
  }
}

// The keys row t may attend: [0, end) minus padding.
inline int row_end(bool causal, int t, int Tk) { return causal ? (t + 1 < Tk ? t + 1 : Tk) : Tk; }

uint64_t probs_index(const AttentionShape& s, const AttentionDropout& d, int b, int h, int t) {
  const int64_t total = d.total_heads > 0 ? d.total_heads : s.H;
  return (((uint64_t)b * (uint64_t)total + (uint64_t)(d.head_offset + h)) * (uint64_t)s.Tq + (uint64_t)t) *
         (uint64_t)s.Tk;
}

}  // namespace

void attention_forward(float* out, float* probs, const float* q, const float* k, const float* v,
                       const AttentionShape& s, bool causal, const int32_t* key_padding,
                       const AttentionDropout& dropout) {
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const float scale = 1.0f / std::sqrt((float)hs);
  const bool drop = dropout.key.p > 0.0f;
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dropped(drop ? (size_t)Tq * Tk : 0);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const float* qp = q + (size_t)b * Tq * s.ldq + (size_t)h * hs;
        const float* kp = k + (size_t)b * Tk * s.ldk + (size_t)h * hs;
        const float* vp = v + (size_t)b * Tk * s.ldv + (size_t)h * hs;
        const int32_t* pad = key_padding ? key_padding + (size_t)b * Tk : nullptr;
        float* P = probs + ((size_t)b * H + h) * Tq * Tk;
        // S = Q·Kᵀ·scale  [Tq,Tk] (causal: row block [t0,t1) against keys [0,t1) only)
        for (int t0 = 0; t0 < Tq; t0 += causal ? kRowBlock : Tq) {
          const int t1 = causal ? std::min(Tq, t0 + kRowBlock) : Tq, keys = causal ? std::min(t1, Tk) : Tk;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, keys, hs, scale, qp + (size_t)t0 * s.ldq,
                      (int)s.ldq, kp, (int)s.ldk, 0.0f, P + (size_t)t0 * Tk, Tk);
        }
        for (int t = 0; t < Tq; t++) {
          float* p = P + (size_t)t * Tk;
          const int end = row_end(causal, t, Tk);
          if (pad)
            for (int j = 0; j < end; j++)
              if (pad[j] == 0) p[j] = -INFINITY;
          float maxv = -INFINITY;
          for (int j = 0; j < end; j++) maxv = p[j] > maxv ? p[j] : maxv;
          if (maxv == -INFINITY) {  // no key to attend: probabilities 0, output 0
            for (int j = 0; j < Tk; j++) p[j] = 0.0f;
            continue;
          }
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int j = 0; j < end; j++) {
            p[j] = fast_exp(p[j] - maxv);
            sum += p[j];
          }
          if (pad)
            for (int j = 0; j < end; j++)
              if (pad[j] == 0) sum -= p[j], p[j] = 0.0f;  // fast_exp clamps: exp(-inf) is not exactly 0 there
          const float inv = 1.0f / sum;
#pragma omp simd
          for (int j = 0; j < end; j++) p[j] *= inv;
          for (int j = end; j < Tk; j++) p[j] = 0.0f;
        }
        const float* A = P;
        if (drop) {
          for (int t = 0; t < Tq; t++) {
            float* dr = dropped.data() + (size_t)t * Tk;
            row_factors(dropout.key, probs_index(s, dropout, b, h, t), Tk, dr);
            const float* p = P + (size_t)t * Tk;
            for (int j = 0; j < Tk; j++) dr[j] *= p[j];
          }
          A = dropped.data();
        }
        // Y = drop(P)·V  [Tq,hs], written into the head's columns of out
        float* yp = out + (size_t)b * Tq * s.ldo + (size_t)h * hs;
        for (int t0 = 0; t0 < Tq; t0 += causal ? kRowBlock : Tq) {
          const int t1 = causal ? std::min(Tq, t0 + kRowBlock) : Tq, keys = causal ? std::min(t1, Tk) : Tk;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t1 - t0, hs, keys, 1.0f, A + (size_t)t0 * Tk, Tk,
                      vp, (int)s.ldv, 0.0f, yp + (size_t)t0 * s.ldo, (int)s.ldo);
        }
      }
    }
  }
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* probs, const AttentionShape& s, bool causal,
                        const int32_t* key_padding, const AttentionDropout& dropout) {
  (void)key_padding;  // masked entries of probs are exact zeros: they take no gradient
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const float scale = 1.0f / std::sqrt((float)hs);
  const bool drop = dropout.key.p > 0.0f;
  // dk and dv of (b,h) gather contributions from every query row, so one thread owns a whole (b,h).
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dP((size_t)Tq * Tk), factors(drop ? (size_t)Tq * Tk : 0), dropped(drop ? (size_t)Tq * Tk : 0);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const float* qp = q + (size_t)b * Tq * s.ldq + (size_t)h * hs;
        const float* kp = k + (size_t)b * Tk * s.ldk + (size_t)h * hs;
        const float* vp = v + (size_t)b * Tk * s.ldv + (size_t)h * hs;
        float* dqp = dq + (size_t)b * Tq * s.ldq + (size_t)h * hs;
        float* dkp = dk + (size_t)b * Tk * s.ldk + (size_t)h * hs;
        float* dvp = dv + (size_t)b * Tk * s.ldv + (size_t)h * hs;
        const float* P = probs + ((size_t)b * H + h) * Tq * Tk;
        const float* dy = dout + (size_t)b * Tq * s.ldo + (size_t)h * hs;
        float* d = dP.data();
        const float* A = P;
        if (drop) {
          for (int t = 0; t < Tq; t++)
            row_factors(dropout.key, probs_index(s, dropout, b, h, t), Tk, factors.data() + (size_t)t * Tk);
          for (size_t i = 0; i < (size_t)Tq * Tk; i++) dropped[i] = factors[i] * P[i];
          A = dropped.data();
        }
        // dA = dY·Vᵀ [Tq,Tk];  dV += Aᵀ·dY [Tk,hs]  (A = drop(P); causal: row blocks against their keys)
        const int step = causal ? kRowBlock : Tq;
        for (int t0 = 0; t0 < Tq; t0 += step) {
          const int t1 = std::min(Tq, t0 + step), keys = causal ? std::min(t1, Tk) : Tk;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, keys, hs, 1.0f, dy + (size_t)t0 * s.ldo,
                      (int)s.ldo, vp, (int)s.ldv, 0.0f, d + (size_t)t0 * Tk, Tk);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, hs, t1 - t0, 1.0f, A + (size_t)t0 * Tk, Tk,
                      dy + (size_t)t0 * s.ldo, (int)s.ldo, 1.0f, dvp, (int)s.ldv);
        }
        if (drop)
          for (size_t i = 0; i < (size_t)Tq * Tk; i++) d[i] *= factors[i];
        // dS = P∘(dP − rowsum(P∘dP))·scale, in place over dP (zero wherever P is)
        for (int t = 0; t < Tq; t++) {
          const float* p = P + (size_t)t * Tk;
          float* dr = d + (size_t)t * Tk;
          const int end = row_end(causal, t, Tk);
          float pdp = 0.0f;
#pragma omp simd reduction(+ : pdp)
          for (int j = 0; j < end; j++) pdp += p[j] * dr[j];
#pragma omp simd
          for (int j = 0; j < end; j++) dr[j] = p[j] * (dr[j] - pdp) * scale;
          for (int j = end; j < Tk; j++) dr[j] = 0.0f;
        }
        // dQ += dS·K;  dK += dSᵀ·Q  (causal: row blocks against their keys)
        for (int t0 = 0; t0 < Tq; t0 += step) {
          const int t1 = std::min(Tq, t0 + step), keys = causal ? std::min(t1, Tk) : Tk;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t1 - t0, hs, keys, 1.0f, d + (size_t)t0 * Tk, Tk, kp,
                      (int)s.ldk, 1.0f, dqp + (size_t)t0 * s.ldq, (int)s.ldq);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, hs, t1 - t0, 1.0f, d + (size_t)t0 * Tk, Tk,
                      qp + (size_t)t0 * s.ldq, (int)s.ldq, 1.0f, dkp, (int)s.ldk);
        }
      }
    }
  }
}

void attention_decode_forward(float* out, float* scratch, const float* q, int64_t ldq, const float* kcache,
                              const float* vcache, int B, int len, int max_len, int C, int H) {
  const int hs = C / H;
  const float scale = 1.0f / std::sqrt((float)hs);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * len * C >= kParallelMin)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      const float* qp = q + (size_t)b * ldq + (size_t)h * hs;
      float* p = scratch + ((size_t)b * H + h) * max_len;
      float maxv = -INFINITY;
      for (int j = 0; j < len; j++) {
        const float* kp = kcache + ((size_t)b * max_len + j) * C + (size_t)h * hs;
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int i = 0; i < hs; i++) d += qp[i] * kp[i];
        p[j] = d * scale;
        maxv = p[j] > maxv ? p[j] : maxv;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < len; j++) {
        p[j] = fast_exp(p[j] - maxv);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
      float* o = out + (size_t)b * C + (size_t)h * hs;
      for (int i = 0; i < hs; i++) o[i] = 0.0f;
      for (int j = 0; j < len; j++) {
        const float* vp = vcache + ((size_t)b * max_len + j) * C + (size_t)h * hs;
        const float pj = p[j] * inv;
#pragma omp simd
        for (int i = 0; i < hs; i++) o[i] += pj * vp[i];
      }
    }
  }
}

}  // namespace lmforge::kernels::cpu
