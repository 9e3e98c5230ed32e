// defines: the CPU multi-head attention (masks, cross-attention, strided q/k/v, attention dropout) in fp32 and on
//          bf16 / f16 storage, its key/value-cache decoding step, and their registration
#include <cblas.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm/gemm_narrow.h"
#include "kernels/cpu/lowp.h"
#include "kernels/cpu/philox_lanes.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// One attention problem: q rows of stride ldq, k/v rows of stride ldk/ldv, [B, T, H·hs] logically.
struct AttentionShape {
  int B = 0, Tq = 0, Tk = 0, H = 0, hs = 0;
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;  // row strides of q, k, v (and dq, dk, dv) and out/dout
};

// Per (b,h) the head's q, k, v are [T,hs] matrices with a row stride (3C inside a fused q|k|v activation), so the
// scores, P·V and the four backward products are single-threaded GEMMs, one (b,h) per OpenMP thread at a time.
// Causal attention runs them on blocks of kRowBlock query rows, each against only the keys [0, block end): the lower
// triangle plus the diagonal blocks, about half the T×T square; entries beyond a row's last key are exact zeros.
constexpr int kRowBlock = 64;

// C = beta·C + op(A)·B for a product one head wide (P·V, dS·K, Pᵀ·dY, dSᵀ·Q): gemm_narrow() where it applies
// (it does not copy the [T, T] operand into panels first; gemm/gemm_narrow.cpp), else OpenBLAS.
void head_product(bool trans_a, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc) {
  if (!gemm_narrow(trans_a, M, N, K, A, lda, B, ldb, beta, C, ldc))
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, beta,
                C, ldc);
}

// The dropout factors (0 or 1/(1−p)) of elements [base, base+n) of the probabilities' index space.
void row_factors(const DropoutKey& key, uint64_t base, int n, float* f) {
  const float scale = 1.0f / (1.0f - key.p);
  const uint32_t k[2] = {(uint32_t)key.seed, (uint32_t)(key.seed >> 32)};
  uint64_t i = base;
  int done = 0;
  while (done < n) {
    if (i % 4 == 0 && n - done >= 4 * kPhiloxLanes) {  // whole blocks: kPhiloxLanes at once (philox_lanes.h)
      uint32_t w[4][kPhiloxLanes];
      philox4x32_10_lanes(i / 4, key.stream, k[0], k[1], w);
      for (int l = 0; l < kPhiloxLanes; l++)
        for (int r = 0; r < 4; r++)
          f[done + 4 * l + r] = (float)(w[r][l] >> 8) * (1.0f / 16777216.0f) >= key.p ? scale : 0.0f;
      i += 4 * kPhiloxLanes, done += 4 * kPhiloxLanes;
      continue;
    }
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


// One (b,h) problem: the head's q, k, v, out (or dout) rows with their strides. Head h of batch b of the whole
// tensors for the fp32 ops; contiguous fp32 copies of the head for the low-precision ones (attention_lowp).
struct Head {
  const float *q, *k, *v;
  float* o;  // forward: the output rows; backward: unused
  int64_t ldq, ldk, ldv, ldo;
};
struct HeadGrad {
  float *dq, *dk, *dv;
  const float* dy;
};

// Forward of one head: P (its [Tq,Tk] probabilities) and the output rows. dropped: Tq·Tk scratch when dropout is on.
void head_forward(const Head& hd, float* P, const AttentionShape& s, int b, int h, bool causal, const int32_t* pad,
                  const AttentionDropout& dropout, float* dropped) {
  const int Tq = s.Tq, Tk = s.Tk, hs = s.hs;
  const float scale = 1.0f / std::sqrt((float)hs);
  // S = Q·Kᵀ·scale  [Tq,Tk] (causal: row block [t0,t1) against keys [0,t1) only)
  for (int t0 = 0; t0 < Tq; t0 += causal ? kRowBlock : Tq) {
    const int t1 = causal ? std::min(Tq, t0 + kRowBlock) : Tq, keys = causal ? std::min(t1, Tk) : Tk;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, keys, hs, scale, hd.q + (size_t)t0 * hd.ldq,
                (int)hd.ldq, hd.k, (int)hd.ldk, 0.0f, P + (size_t)t0 * Tk, Tk);
  }
  for (int t = 0; t < Tq; t++) {
    float* p = P + (size_t)t * Tk;
    const int end = row_end(causal, t, Tk);
    if (pad)
      for (int j = 0; j < end; j++)
        if (pad[j] == 0) p[j] = -INFINITY;
    float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
    for (int j = 0; j < end; j++) maxv = p[j] > maxv ? p[j] : maxv;
    // No key to attend (every score -inf): probabilities 0, output 0. Tested as "not above -FLT_MAX", not as
    // == -inf: OpenMP starts each lane of a max reduction at the type's least value, which GCC takes as -inf and
    // clang as -FLT_MAX, so with clang an all-masked row ended at -FLT_MAX and its softmax divided 0 by 0.
    if (!(maxv > -FLT_MAX)) {
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
  if (dropout.key.p > 0.0f) {
    for (int t = 0; t < Tq; t++) {
      float* dr = dropped + (size_t)t * Tk;
      row_factors(dropout.key, probs_index(s, dropout, b, h, t), Tk, dr);
      const float* p = P + (size_t)t * Tk;
      for (int j = 0; j < Tk; j++) dr[j] *= p[j];
    }
    A = dropped;
  }
  // Y = drop(P)·V  [Tq,hs]
  for (int t0 = 0; t0 < Tq; t0 += causal ? kRowBlock : Tq) {
    const int t1 = causal ? std::min(Tq, t0 + kRowBlock) : Tq, keys = causal ? std::min(t1, Tk) : Tk;
    head_product(false, t1 - t0, hs, keys, A + (size_t)t0 * Tk, Tk, hd.v, (int)hd.ldv, 0.0f, hd.o + (size_t)t0 * hd.ldo,
                 (int)hd.ldo);
  }
}

// Backward of one head, accumulating into dq, dk, dv (strides of q, k, v). scratch: dP [Tq·Tk] and, with dropout,
// factors and dropped [Tq·Tk] each.
void head_backward(const Head& hd, const HeadGrad& g, const float* P, const AttentionShape& s, int b, int h,
                   bool causal, const AttentionDropout& dropout, float* d, float* factors, float* dropped) {
  const int Tq = s.Tq, Tk = s.Tk, hs = s.hs;
  const float scale = 1.0f / std::sqrt((float)hs);
  const bool drop = dropout.key.p > 0.0f;
  const float* A = P;
  if (drop) {
    for (int t = 0; t < Tq; t++) row_factors(dropout.key, probs_index(s, dropout, b, h, t), Tk, factors + (size_t)t * Tk);
    for (size_t i = 0; i < (size_t)Tq * Tk; i++) dropped[i] = factors[i] * P[i];
    A = dropped;
  }
  // dA = dY·Vᵀ [Tq,Tk];  dV += Aᵀ·dY [Tk,hs]  (A = drop(P); causal: row blocks against their keys)
  const int step = causal ? kRowBlock : Tq;
  for (int t0 = 0; t0 < Tq; t0 += step) {
    const int t1 = std::min(Tq, t0 + step), keys = causal ? std::min(t1, Tk) : Tk;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t1 - t0, keys, hs, 1.0f, g.dy + (size_t)t0 * hd.ldo,
                (int)hd.ldo, hd.v, (int)hd.ldv, 0.0f, d + (size_t)t0 * Tk, Tk);
    head_product(true, keys, hs, t1 - t0, A + (size_t)t0 * Tk, Tk, g.dy + (size_t)t0 * hd.ldo, (int)hd.ldo, 1.0f, g.dv,
                 (int)hd.ldv);
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
    head_product(false, t1 - t0, hs, keys, d + (size_t)t0 * Tk, Tk, hd.k, (int)hd.ldk, 1.0f,
                 g.dq + (size_t)t0 * hd.ldq, (int)hd.ldq);
    head_product(true, keys, hs, t1 - t0, d + (size_t)t0 * Tk, Tk, hd.q + (size_t)t0 * hd.ldq, (int)hd.ldq, 1.0f, g.dk,
                 (int)hd.ldk);
  }
}

void attention_forward_heads(float* out, float* probs, const float* q, const float* k, const float* v,
                       const AttentionShape& s, bool causal, const int32_t* key_padding,
                       const AttentionDropout& dropout) {
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const bool drop = dropout.key.p > 0.0f;
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dropped(drop ? (size_t)Tq * Tk : 0);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const Head hd{q + (size_t)b * Tq * s.ldq + (size_t)h * hs, k + (size_t)b * Tk * s.ldk + (size_t)h * hs,
                      v + (size_t)b * Tk * s.ldv + (size_t)h * hs, out + (size_t)b * Tq * s.ldo + (size_t)h * hs,
                      s.ldq, s.ldk, s.ldv, s.ldo};
        head_forward(hd, probs + ((size_t)b * H + h) * Tq * Tk, s, b, h, causal,
                     key_padding ? key_padding + (size_t)b * Tk : nullptr, dropout, dropped.data());
      }
    }
  }
}

void attention_backward_heads(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* probs, const AttentionShape& s, bool causal,
                        const int32_t* key_padding, const AttentionDropout& dropout) {
  (void)key_padding;  // masked entries of probs are exact zeros: they take no gradient
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const bool drop = dropout.key.p > 0.0f;
  // dk and dv of (b,h) gather contributions from every query row, so one thread owns a whole (b,h).
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dP((size_t)Tq * Tk), factors(drop ? (size_t)Tq * Tk : 0), dropped(drop ? (size_t)Tq * Tk : 0);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        const size_t oq = (size_t)b * Tq * s.ldq + (size_t)h * hs, ok = (size_t)b * Tk * s.ldk + (size_t)h * hs,
                     ov = (size_t)b * Tk * s.ldv + (size_t)h * hs;
        const Head hd{q + oq, k + ok, v + ov, nullptr, s.ldq, s.ldk, s.ldv, s.ldo};
        const HeadGrad g{dq + oq, dk + ok, dv + ov, dout + (size_t)b * Tq * s.ldo + (size_t)h * hs};
        head_backward(hd, g, probs + ((size_t)b * H + h) * Tq * Tk, s, b, h, causal, dropout, dP.data(),
                      factors.data(), dropped.data());
      }
    }
  }
}

// ---- bf16 / f16 q, k, v: each head converted into contiguous fp32 [T, hs] scratch ---------------------------------

// Rows [b·T, b·T + T), columns [h·hs, (h+1)·hs) of a [B,T,H·hs] view into dst [T, hs] fp32 (or += from src back).
void gather_head(float* dst, const Tensor& t, int b, int h, int T, int hs) {
  const size_t es = dtype_size(t.dtype);
  const char* base = static_cast<const char*>(t.data);
  for (int i = 0; i < T; i++)
    row_to_f32(dst + (size_t)i * hs, base + ((size_t)((int64_t)b * T + i) * t.stride() + (size_t)h * hs) * es, t.dtype,
               (size_t)hs);
}
// add: the head's rows += src (accumulating gradients), else = src; rounded to t's dtype.
void scatter_head(const Tensor& t, const float* src, int b, int h, int T, int hs, bool add, float* tmp) {
  const size_t es = dtype_size(t.dtype);
  char* base = static_cast<char*>(t.data);
  for (int i = 0; i < T; i++) {
    char* row = base + ((size_t)((int64_t)b * T + i) * t.stride() + (size_t)h * hs) * es;
    const float* v = src + (size_t)i * hs;
    if (add) {
      row_to_f32(tmp, row, t.dtype, (size_t)hs);
      for (int c = 0; c < hs; c++) tmp[c] += v[c];
      v = tmp;
    }
    row_from_f32(row, t.dtype, v, (size_t)hs);
  }
}

void attention_forward_lowp_heads(const Tensor& out, float* probs, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionShape& s, bool causal, const int32_t* key_padding,
                            const AttentionDropout& dropout) {
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const bool drop = dropout.key.p > 0.0f;
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dropped(drop ? (size_t)Tq * Tk : 0), qh((size_t)Tq * hs), kh((size_t)Tk * hs),
        vh((size_t)Tk * hs), oh((size_t)Tq * hs);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        gather_head(qh.data(), q, b, h, Tq, hs);
        gather_head(kh.data(), k, b, h, Tk, hs);
        gather_head(vh.data(), v, b, h, Tk, hs);
        const Head hd{qh.data(), kh.data(), vh.data(), oh.data(), hs, hs, hs, hs};
        head_forward(hd, probs + ((size_t)b * H + h) * Tq * Tk, s, b, h, causal,
                     key_padding ? key_padding + (size_t)b * Tk : nullptr, dropout, dropped.data());
        scatter_head(out, oh.data(), b, h, Tq, hs, false, nullptr);
      }
    }
  }
}

void attention_backward_lowp_heads(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                             const Tensor& q, const Tensor& k, const Tensor& v, const float* probs,
                             const AttentionShape& s, bool causal, const int32_t* key_padding,
                             const AttentionDropout& dropout) {
  (void)key_padding;
  use_single_threaded_blas();
  const int B = s.B, Tq = s.Tq, Tk = s.Tk, H = s.H, hs = s.hs;
  const bool drop = dropout.key.p > 0.0f;
#pragma omp parallel if ((size_t)B * Tq * Tk * H * hs >= kParallelMin)
  {
    std::vector<float> dP((size_t)Tq * Tk), factors(drop ? (size_t)Tq * Tk : 0), dropped(drop ? (size_t)Tq * Tk : 0);
    std::vector<float> qh((size_t)Tq * hs), kh((size_t)Tk * hs), vh((size_t)Tk * hs), dyh((size_t)Tq * hs),
        dqh((size_t)Tq * hs), dkh((size_t)Tk * hs), dvh((size_t)Tk * hs), tmp((size_t)hs);
#pragma omp for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < H; h++) {
        gather_head(qh.data(), q, b, h, Tq, hs);
        gather_head(kh.data(), k, b, h, Tk, hs);
        gather_head(vh.data(), v, b, h, Tk, hs);
        gather_head(dyh.data(), dout, b, h, Tq, hs);
        std::fill(dqh.begin(), dqh.end(), 0.0f), std::fill(dkh.begin(), dkh.end(), 0.0f);
        std::fill(dvh.begin(), dvh.end(), 0.0f);
        const Head hd{qh.data(), kh.data(), vh.data(), nullptr, hs, hs, hs, hs};
        const HeadGrad g{dqh.data(), dkh.data(), dvh.data(), dyh.data()};
        head_backward(hd, g, probs + ((size_t)b * H + h) * Tq * Tk, s, b, h, causal, dropout, dP.data(),
                      factors.data(), dropped.data());
        scatter_head(dq, dqh.data(), b, h, Tq, hs, true, tmp.data());
        scatter_head(dk, dkh.data(), b, h, Tk, hs, true, tmp.data());
        scatter_head(dv, dvh.data(), b, h, Tk, hs, true, tmp.data());
      }
    }
  }
}

void attention_decode_heads(float* out, float* scratch, const float* q, int64_t ldq, const float* kcache,
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

// ---- entry points ---------------------------------------------------------------------------------------------------

// The problem of checked operands (ops.cpp): q [B,Tq,H·hs], k and v [B,Tk,H·hs], out (or dout) [B,Tq,H·hs].
AttentionShape attention_shape_of(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, int heads) {
  AttentionShape s;
  s.B = (int)q.dim(0), s.Tq = (int)q.dim(1), s.Tk = (int)k.dim(1), s.H = heads, s.hs = (int)(q.dim(2) / heads);
  s.ldq = q.stride(), s.ldk = k.stride(), s.ldv = v.stride(), s.ldo = out.stride();
  return s;
}

// fp32, and the low-precision combinations without their own path (bf16 / f16 probabilities) through whole
// operands converted into temporaries.
void attention_forward_f32(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k, const Tensor& v,
                           int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  const AttentionShape s = attention_shape_of(out, q, k, v, heads);
  const AsF32 o(out, AsF32::OUT), p(probs, AsF32::OUT), qf(q, AsF32::IN), kf(k, AsF32::IN), vf(v, AsF32::IN);
  attention_forward_heads(o, p, qf, kf, vf, s, mask == AttentionMask::CAUSAL, id_data(key_padding), dropout);
}

// The CPU saves the probabilities (AttentionSaved::PROBS), so the forward's output is not needed.
void attention_backward_f32(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                            const Tensor& /*out*/, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                            int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  const AttentionShape s = attention_shape_of(dout, q, k, v, heads);
  const AsF32 dqf(dq, AsF32::INOUT), dkf(dk, AsF32::INOUT), dvf(dv, AsF32::INOUT), d(dout, AsF32::IN), qf(q, AsF32::IN),
      kf(k, AsF32::IN), vf(v, AsF32::IN), p(probs, AsF32::IN);
  attention_backward_heads(dqf, dkf, dvf, d, qf, kf, vf, p, s, mask == AttentionMask::CAUSAL, id_data(key_padding),
                           dropout);
}

void attention_forward_lowp(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k, const Tensor& v,
                            int heads, AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  if (probs.dtype != DType::F32)
    return attention_forward_f32(out, probs, q, k, v, heads, mask, key_padding, dropout);
  attention_forward_lowp_heads(out, probs.f32(), q, k, v, attention_shape_of(out, q, k, v, heads),
                               mask == AttentionMask::CAUSAL, id_data(key_padding), dropout);
}

void attention_backward_lowp(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                             const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs, int heads,
                             AttentionMask mask, const Tensor& key_padding, const AttentionDropout& dropout) {
  if (probs.dtype != DType::F32)
    return attention_backward_f32(dq, dk, dv, dout, out, q, k, v, probs, heads, mask, key_padding, dropout);
  attention_backward_lowp_heads(dq, dk, dv, dout, q, k, v, probs.f32(), attention_shape_of(dout, q, k, v, heads),
                                mask == AttentionMask::CAUSAL, id_data(key_padding), dropout);
}

// Every dtype: decoding converts whole (small) operands.
void attention_decode_f32(const Tensor& out, const Tensor& scratch, const Tensor& q, const Tensor& kcache,
                          const Tensor& vcache, int len, int heads) {
  const int64_t B = kcache.dim(0), P = kcache.dim(1), C = kcache.dim(2);
  const AsF32 o(out, AsF32::OUT), sc(scratch, AsF32::OUT), qf(q, AsF32::IN), kc(kcache, AsF32::IN),
      vc(vcache, AsF32::IN);
  attention_decode_heads(o, sc, qf, q.stride(), kc, vc, (int)B, len, (int)P, (int)C, heads);
}

}  // namespace

void register_attention(KernelTable& t) {
  t.add<Kernel::ATTENTION_FORWARD>(Device::CPU, DType::F32, attention_forward_f32);
  t.add<Kernel::ATTENTION_BACKWARD>(Device::CPU, DType::F32, attention_backward_f32);
  t.add<Kernel::ATTENTION_DECODE>(Device::CPU, DType::F32, attention_decode_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::ATTENTION_FORWARD>(Device::CPU, lowp, attention_forward_lowp);
    t.add<Kernel::ATTENTION_BACKWARD>(Device::CPU, lowp, attention_backward_lowp);
    t.add<Kernel::ATTENTION_DECODE>(Device::CPU, lowp, attention_decode_f32);
  }
}

}  // namespace lmforge::kernels::cpu
