// defines: the CPU ops on bf16 / f16 storage (and mixed f32 operands): embedding, layernorm, bias add and its
//          gradient, add, GELU, dropout, strided copy and the cross-entropy pieces, converting a row or a block of
//          4096 elements at a time into a thread's fp32 scratch (L1-resident), doing fp32 math there and rounding
//          the results back — no tensor-sized temporaries
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp.h"

namespace lmforge::kernels::cpu {
namespace {

// Why blocks and not whole tensors: converting a whole bf16 operand into an fp32 temporary writes and re-reads 4
// bytes per element through memory (and page-faults a fresh allocation each call); a block of 4096 converts into
// 16 KB that stays in L1 between the conversion, the arithmetic and the rounding back, so memory sees only the
// 2-byte storage.
constexpr int64_t kBlock = 4096;

// One floating operand: its memory, dtype and row stride in elements (views may be strided: q|k|v columns).
struct Ref {
  char* p = nullptr;
  DType dt = DType::F32;
  int64_t ld = 0;
  size_t es = 4;
  explicit Ref(const Tensor& t)
      : p(static_cast<char*>(t.data)), dt(t.dtype), ld(t.present() ? t.stride() : 0), es(dtype_size(t.dtype)) {}
  bool present() const { return p != nullptr; }
  bool f32() const { return dt == DType::F32; }
  char* at(int64_t row, int64_t col) const { return p + (size_t)(row * ld + col) * es; }
  // Elements [col, col+n) of `row` as fp32: the memory itself when F32, else converted into buf.
  float* load(int64_t row, int64_t col, int64_t n, float* buf) const {
    if (f32()) return reinterpret_cast<float*>(at(row, col));
    row_to_f32(buf, at(row, col), dt, (size_t)n);
    return buf;
  }
  // Where results for [col, col+n) go: the memory itself when F32, else buf (then store()).
  float* target(int64_t row, int64_t col, float* buf) const {
    return f32() ? reinterpret_cast<float*>(at(row, col)) : buf;
  }
  // Rounds buf into the storage (nothing to do for F32, whose target() was the memory).
  void store(int64_t row, int64_t col, int64_t n, const float* buf) const {
    if (!f32()) row_from_f32(at(row, col), dt, buf, (size_t)n);
  }
};

// A small per-channel operand (LayerNorm weight, bias) as one fp32 vector for the whole call.
std::vector<float> small_f32(const Tensor& t) {
  std::vector<float> v((size_t)t.numel());
  row_to_f32(v.data(), t.data, t.dtype, v.size());
  return v;
}

// f(offset, count, scratch) over [0, n) in blocks of kBlock, blocks split over the team; scratch: 3·kBlock floats
// of the calling thread.
template <class F>
void for_blocks(int64_t n, F&& f) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel if ((size_t)n >= kParallelMin)
  {
    alignas(64) float scratch[3 * kBlock];
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; b++) f(b * kBlock, std::min(kBlock, n - b * kBlock), scratch);
  }
}

// f(row, scratch) over rows [0, N), split over the team; scratch: `per_thread` floats of the calling thread.
template <class F>
void for_rows(int64_t N, int64_t C, size_t per_thread, F&& f) {
#pragma omp parallel if ((size_t)(N * C) >= kParallelMin)
  {
    std::vector<float> scratch(per_thread);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) f(n, scratch.data());
  }
}

}  // namespace

// ---- embedding ----------------------------------------------------------------------------------------------------

void embedding_forward_lowp(const Tensor& out, const int32_t* ids, const Tensor& table, int64_t row_offset,
                            bool accumulate) {
  const Ref o(out), tb(table);
  const int64_t N = out.rows(), C = out.dim(-1), rows = table.dim(0);
  for_rows(N, C, (size_t)(2 * C), [&](int64_t n, float* s) {
    const int64_t r = (int64_t)ids[n] - row_offset;
    const bool inside = r >= 0 && r < rows;
    if (!inside && !accumulate) {
      std::memset(o.at(n, 0), 0, (size_t)C * o.es);
      return;
    }
    if (!inside) return;
    const float* e = tb.load(r, 0, C, s);
    float* y = accumulate ? o.load(n, 0, C, s + C) : o.target(n, 0, s + C);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) y[c] = accumulate ? y[c] + e[c] : e[c];
    o.store(n, 0, C, y);
  });
}

// Scatter-add as the fp32 kernel: threads own channel blocks and walk n ascending (deterministic on any team).
void embedding_backward_lowp(const Tensor& dtable, const Tensor& dout, const int32_t* ids, int64_t row_offset) {
  const Ref dt(dtable), d(dout);
  const int64_t N = dout.rows(), C = dout.dim(-1), rows = dtable.dim(0);
  const int64_t block = 64, nblocks = (C + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)(N * C) >= kParallelMin)
  for (int64_t k = 0; k < nblocks; k++) {
    const int64_t c0 = k * block, w = std::min(block, C - c0);
    float gs[64], ws[64];
    for (int64_t n = 0; n < N; n++) {
      const int64_t r = (int64_t)ids[n] - row_offset;
      if (r < 0 || r >= rows) continue;
      const float* g = d.load(n, c0, w, gs);
      float* acc = dt.load(r, c0, w, ws);
#pragma omp simd
      for (int64_t c = 0; c < w; c++) acc[c] += g[c];
      dt.store(r, c0, w, acc);
    }
  }
}

// ---- layernorm ----------------------------------------------------------------------------------------------------

void layernorm_forward_lowp(const Tensor& out, float* mean, float* rstd, const Tensor& inp, const Tensor& weight,
                            const Tensor& bias, float eps) {
  const Ref o(out), x(inp);
  const int64_t N = inp.rows(), C = inp.dim(-1);
  const std::vector<float> w = small_f32(weight), b = small_f32(bias);
  for_rows(N, C, (size_t)(2 * C), [&](int64_t n, float* s) {
    float* y = o.target(n, 0, s + C);
    layernorm_forward_row(y, mean + n, rstd + n, x.load(n, 0, C, s), w.data(), b.data(), (int)C, eps);
    o.store(n, 0, C, y);
  });
}

// The fp32 kernel's math per row (ops.h); dweight and dbias summed per thread in fp32, then added in thread order.
void layernorm_backward_lowp(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                             const Tensor& inp, const Tensor& weight, const float* mean, const float* rstd) {
  const Ref dx(dinp), d(dout), x(inp), dw(dweight), db(dbias);
  const int64_t N = inp.rows(), C = inp.dim(-1);
  const std::vector<float> w = small_f32(weight);
  const int threads = (size_t)(N * C) >= kParallelMin ? omp_get_max_threads() : 1;
  std::vector<float> partial((size_t)threads * 2 * C, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> scratch((size_t)(3 * C));
    float* dwp = partial.data() + (size_t)omp_get_thread_num() * 2 * C;
    float* dbp = dwp + C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* xs = x.load(n, 0, C, scratch.data());
      const float* g = d.load(n, 0, C, scratch.data() + C);
      float* dxs = dx.load(n, 0, C, scratch.data() + 2 * C);
      const float m = mean[n], r = rstd[n];
      float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int64_t c = 0; c < C; c++) {
        const float gw = g[c] * w[(size_t)c];
        g_mean += gw;
        gx_mean += gw * (xs[c] - m) * r;
      }
      g_mean /= (float)C;
      gx_mean /= (float)C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) {
        const float xhat = (xs[c] - m) * r;
        dbp[c] += g[c];
        dwp[c] += g[c] * xhat;
        dxs[c] += r * (g[c] * w[(size_t)c] - g_mean - xhat * gx_mean);
      }
      dx.store(n, 0, C, dxs);
    }
  }
  std::vector<float> sw((size_t)C), sb((size_t)C);
  float* a = dw.load(0, 0, C, sw.data());
  float* bb = db.load(0, 0, C, sb.data());
  for (int t = 0; t < threads; t++)
    for (int64_t c = 0; c < C; c++) {
      a[c] += partial[((size_t)t * 2) * C + c];
      bb[c] += partial[((size_t)t * 2 + 1) * C + c];
    }
  dw.store(0, 0, C, a);
  db.store(0, 0, C, bb);
}

// ---- bias ---------------------------------------------------------------------------------------------------------

void bias_add_forward_lowp(const Tensor& x, const Tensor& bias) {
  const Ref y(x);
  const int64_t N = x.rows(), C = x.dim(-1);
  const std::vector<float> b = small_f32(bias);
  for_rows(N, C, (size_t)C, [&](int64_t n, float* s) {
    float* v = y.load(n, 0, C, s);
#pragma omp simd
    for (int64_t c = 0; c < C; c++) v[c] += b[(size_t)c];
    y.store(n, 0, C, v);
  });
}

// acc[o] += Σ_n x[n,o]: threads own column blocks and walk all rows in order (deterministic), summing in fp32.
void column_sums_lowp(const Tensor& acc, const Tensor& x) {
  const Ref a(acc), d(x);
  const int64_t N = x.rows(), OC = x.dim(-1);
  constexpr int64_t block = 256;
  const int64_t nblocks = (OC + block - 1) / block;
#pragma omp parallel for schedule(static) if ((size_t)(N * OC) >= kParallelMin)
  for (int64_t k = 0; k < nblocks; k++) {
    const int64_t o0 = k * block, w = std::min(block, OC - o0);
    float sum[block] = {}, buf[block];
    for (int64_t n = 0; n < N; n++) {
      const float* v = d.load(n, o0, w, buf);
#pragma omp simd
      for (int64_t o = 0; o < w; o++) sum[o] += v[o];
    }
    float* out = a.load(0, o0, w, buf);
    for (int64_t o = 0; o < w; o++) out[o] += sum[o];
    a.store(0, o0, w, out);
  }
}

// ---- pointwise: add, GELU, dropout --------------------------------------------------------------------------------

void add_forward_lowp(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Ref o(out), x(a), y(b);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    const float* xa = x.load(0, off, n, s);
    const float* yb = y.load(0, off, n, s + kBlock);
    float* r = o.target(0, off, s + 2 * kBlock);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) r[i] = xa[i] + yb[i];
    o.store(0, off, n, r);
  });
}

void accumulate_lowp(const Tensor& dst, const Tensor& src) {
  const Ref o(dst), x(src);
  for_blocks(src.numel(), [&](int64_t off, int64_t n, float* s) {
    const float* g = x.load(0, off, n, s);
    float* r = o.load(0, off, n, s + kBlock);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) r[i] += g[i];
    o.store(0, off, n, r);
  });
}

void gelu_forward_lowp(const Tensor& out, const Tensor& inp, GeluKind kind) {
  const Ref o(out), x(inp);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = o.target(0, off, s + kBlock);
    gelu_forward(r, x.load(0, off, n, s), (size_t)n, kind);  // a block is below the kernel's parallel threshold
    o.store(0, off, n, r);
  });
}

void gelu_backward_lowp(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  const Ref dx(dinp), x(inp), d(dout);
  for_blocks(dinp.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = dx.load(0, off, n, s + 2 * kBlock);
    gelu_backward(r, x.load(0, off, n, s), d.load(0, off, n, s + kBlock), (size_t)n, kind);
    dx.store(0, off, n, r);
  });
}

// Blocks start at multiples of kBlock (a multiple of 4), so each Philox block of 4 elements lies in one block.
void dropout_forward_lowp(const Tensor& out, const Tensor& inp, const DropoutKey& key) {
  const Ref o(out), x(inp);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = o.target(0, off, s + kBlock);
    dropout_apply(r, x.load(0, off, n, s), (size_t)n, key, (uint64_t)off, false);
    o.store(0, off, n, r);
  });
}

void dropout_backward_lowp(const Tensor& dinp, const Tensor& dout, const DropoutKey& key) {
  const Ref dx(dinp), d(dout);
  for_blocks(dinp.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = dx.load(0, off, n, s + kBlock);
    dropout_apply(r, d.load(0, off, n, s), (size_t)n, key, (uint64_t)off, true);
    dx.store(0, off, n, r);
  });
}

// ---- copy ---------------------------------------------------------------------------------------------------------

void copy_lowp(const Tensor& dst, const Tensor& src) {
  const Ref o(dst), x(src);
  const int64_t rows = src.rows(), cols = src.dim(-1);
  if (o.dt == x.dt) {  // same storage: bytes
    for (int64_t r = 0; r < rows; r++) std::memcpy(o.at(r, 0), x.at(r, 0), (size_t)cols * o.es);
    return;
  }
  if (dst.contiguous() && src.contiguous()) {  // e.g. the fp32 main weights into their bf16 working copy
    for_blocks(rows * cols, [&](int64_t off, int64_t n, float* s) {
      const float* v = x.load(0, off, n, s);
      if (o.f32()) std::memcpy(o.at(0, off), v, (size_t)n * sizeof(float));
      else o.store(0, off, n, v);
    });
    return;
  }
  for_rows(rows, cols, (size_t)cols, [&](int64_t r, float* s) {
    const float* v = x.load(r, 0, cols, s);
    if (o.f32()) std::memcpy(o.at(r, 0), v, (size_t)cols * sizeof(float));
    else o.store(r, 0, cols, v);
  });
}

// ---- cross-entropy on bf16 / f16 logits (statistics in fp32) ------------------------------------------------------
// bf16 logits are read as they are: widening a bf16 to fp32 is a shift, done in registers inside each loop, so the
// three passes over the [N, V] logits (100 MB for config A's 1024 × 50304) read 2 bytes per element and write
// nothing else, where converting a row into fp32 scratch first wrote and re-read 4 more bytes per element. f16
// (whose conversion is not a shift) keeps the scratch row.

namespace {

// One bf16 row's maximum and Σexp(l − m) with its target logit, shared by the two-pass and one-pass calls (their
// results agree bit for bit).
inline float bf16_row_max(const uint16_t* r, int64_t V) {
  float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
  for (int64_t v = 0; v < V; v++) {
    const float x = bf16_to_f32(r[v]);
    maxv = x > maxv ? x : maxv;
  }
  return maxv;
}

inline void bf16_row_sumexp(float* sumexp, float* target_logit, const uint16_t* r, float maxv, int32_t target,
                            int64_t col_offset, int64_t V) {
  *sumexp = lane_sum((int)V, [&](int v) { return fast_exp(bf16_to_f32(r[v]) - maxv); });
  const int64_t t = (int64_t)target - col_offset;
  *target_logit = t >= 0 && t < V ? bf16_to_f32(r[t]) : 0.0f;
}

}  // namespace

void crossentropy_row_max_lowp(float* row_max, const Tensor& logits) {
  const Ref l(logits);
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (l.dt == DType::BF16) {
#pragma omp parallel for schedule(static) if ((size_t)(N * V) >= kParallelMin)
    for (int64_t n = 0; n < N; n++) row_max[n] = bf16_row_max(reinterpret_cast<const uint16_t*>(l.at(n, 0)), V);
    return;
  }
  for_rows(N, V, (size_t)V, [&](int64_t n, float* s) { crossentropy_row_max(row_max + n, l.load(n, 0, V, s), 1, (int)V); });
}

void crossentropy_sumexp_lowp(float* sumexp, float* target_logit, const Tensor& logits, const float* m,
                              const int32_t* targets, int64_t col_offset) {
  const Ref l(logits);
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (l.dt == DType::BF16) {
#pragma omp parallel for schedule(static) if ((size_t)(N * V) >= kParallelMin)
    for (int64_t n = 0; n < N; n++)
      bf16_row_sumexp(sumexp + n, target_logit + n, reinterpret_cast<const uint16_t*>(l.at(n, 0)), m[n], targets[n],
                      col_offset, V);
    return;
  }
  for_rows(N, V, (size_t)V, [&](int64_t n, float* s) {
    crossentropy_sumexp(sumexp + n, target_logit + n, l.load(n, 0, V, s), m + n, targets + n, col_offset, 1, (int)V);
  });
}

// Row by row, the row still in cache for its Σexp; f16 rows are converted into scratch once for both.
void crossentropy_stats_lowp(float* row_max, float* sumexp, float* target_logit, const Tensor& logits,
                             const int32_t* targets, int64_t col_offset) {
  const Ref l(logits);
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (l.dt == DType::BF16) {
#pragma omp parallel for schedule(static) if ((size_t)(N * V) >= kParallelMin)
    for (int64_t n = 0; n < N; n++) {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(l.at(n, 0));
      row_max[n] = bf16_row_max(r, V);
      bf16_row_sumexp(sumexp + n, target_logit + n, r, row_max[n], targets[n], col_offset, V);
    }
    return;
  }
  for_rows(N, V, (size_t)V, [&](int64_t n, float* s) {
    const float* r = l.load(n, 0, V, s);
    crossentropy_row_max(row_max + n, r, 1, (int)V);
    crossentropy_sumexp(sumexp + n, target_logit + n, r, row_max + n, targets + n, col_offset, 1, (int)V);
  });
}

void crossentropy_backward_lowp(const Tensor& dlogits, const Tensor& logits, const float* lse, const int32_t* targets,
                                const float* dloss, int64_t col_offset) {
  const Ref dl(dlogits), l(logits);
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (l.dt == DType::BF16 && dl.dt == DType::BF16) {
#pragma omp parallel for schedule(static) if ((size_t)(N * V) >= kParallelMin)
    for (int64_t n = 0; n < N; n++) {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(l.at(n, 0));
      uint16_t* d = reinterpret_cast<uint16_t*>(dl.at(n, 0));  // may be r itself (in place)
      const float mx = lse[n], w = dloss[n];
      const int64_t t = (int64_t)targets[n] - col_offset;
      const bool has_target = t >= 0 && t < V;
      const float target = has_target ? bf16_to_f32(r[t]) : 0.0f;  // read before an in-place write replaces it
#pragma omp simd
      for (int64_t v = 0; v < V; v++) d[v] = f32_to_bf16(w * fast_exp(bf16_to_f32(r[v]) - mx));
      if (has_target) d[t] = f32_to_bf16(w * fast_exp(target - mx) - w);
    }
    return;
  }
  for_rows(N, V, (size_t)(2 * V), [&](int64_t n, float* s) {
    float* g = dl.target(n, 0, s + V);
    crossentropy_backward(g, l.load(n, 0, V, s), lse + n, targets + n, dloss + n, col_offset, 1, (int)V);
    dl.store(n, 0, V, g);
  });
}

}  // namespace lmforge::kernels::cpu
