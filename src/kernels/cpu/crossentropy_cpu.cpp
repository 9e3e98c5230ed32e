// defines: the CPU pieces of the (vocabulary-parallel) softmax cross-entropy in fp32 and on bf16 / f16 logits
//          (statistics in fp32), and their registration
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

// Rows are taken a few at a time (dynamic schedule) rather than in one half per thread: on a loaded machine a thread
// that loses its core then holds up only its current rows (gemm_f32.cpp says more). A row's result does not depend
// on which thread computes it.
constexpr int kRowsPerTake = 16;

// One row's maximum and Σexp(l − m) (with its target logit): the same code for the two-pass and one-pass calls,
// so their results agree bit for bit.
inline float row_max_of(const float* l, int V) {
  float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
  for (int v = 0; v < V; v++) maxv = l[v] > maxv ? l[v] : maxv;
  return maxv;
}

inline void row_sumexp(float* sumexp, float* target_logit, const float* l, float maxv, int32_t target,
                       int64_t col_offset, int V) {
  *sumexp = lane_sum(V, [&](int v) { return fast_exp(l[v] - maxv); });
  const int64_t t = (int64_t)target - col_offset;
  *target_logit = t >= 0 && t < V ? l[t] : 0.0f;
}

void crossentropy_row_max_rows(float* row_max, const float* logits, int N, int V) {
#pragma omp parallel for schedule(dynamic, kRowsPerTake) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) row_max[n] = row_max_of(logits + (size_t)n * V, V);
}

void crossentropy_sumexp_rows(float* sumexp, float* target_logit, const float* logits, const float* m,
                         const int32_t* targets, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(dynamic, kRowsPerTake) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++)
    row_sumexp(sumexp + n, target_logit + n, logits + (size_t)n * V, m[n], targets[n], col_offset, V);
}

void crossentropy_stats_rows(float* row_max, float* sumexp, float* target_logit, const float* logits,
                        const int32_t* targets, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(dynamic, kRowsPerTake) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    row_max[n] = row_max_of(l, V);
    row_sumexp(sumexp + n, target_logit + n, l, row_max[n], targets[n], col_offset, V);
  }
}

void crossentropy_backward_rows(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           const float* dloss, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(dynamic, kRowsPerTake) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    float* d = dlogits + (size_t)n * V;
    const float m = lse[n], w = dloss[n];
#pragma omp simd
    for (int v = 0; v < V; v++) d[v] = w * fast_exp(l[v] - m);
    const int64_t t = (int64_t)targets[n] - col_offset;
    if (t >= 0 && t < V) d[t] -= w;
  }
}


void crossentropy_row_max_f32(const Tensor& row_max, const Tensor& logits) {
  const AsF32 m(row_max, AsF32::OUT), l(logits, AsF32::IN);
  crossentropy_row_max_rows(m, l, (int)logits.rows(), (int)logits.dim(-1));
}

void crossentropy_sumexp_f32(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                             const Tensor& targets, int64_t col_offset) {
  const AsF32 se(sumexp, AsF32::OUT), tl(target_logit, AsF32::OUT), l(logits, AsF32::IN), mx(m, AsF32::IN);
  crossentropy_sumexp_rows(se, tl, l, mx, id_data(targets), col_offset, (int)logits.rows(), (int)logits.dim(-1));
}

// An f32 op has f32 statistics (ops.cpp's dtype rule).
void crossentropy_stats_f32(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit,
                            const Tensor& logits, const Tensor& targets, int64_t col_offset) {
  crossentropy_stats_rows(row_max.f32(), sumexp.f32(), target_logit.f32(), logits.f32(), id_data(targets), col_offset,
                          (int)logits.rows(), (int)logits.dim(-1));
}

void crossentropy_backward_f32(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                               const Tensor& dloss, int64_t col_offset) {
  const AsF32 l(logits, AsF32::IN), dl(dlogits, AsF32::OUT), ls(lse, AsF32::IN), dls(dloss, AsF32::IN);
  crossentropy_backward_rows(dl, l, ls, id_data(targets), dls, col_offset, (int)logits.rows(), (int)logits.dim(-1));
}

// ---- cross-entropy on bf16 / f16 logits (statistics in fp32) ------------------------------------------------------
// bf16 logits are read as they are: widening a bf16 to fp32 is a shift, done in registers inside each loop, so the
// three passes over the [N, V] logits (100 MB for config A's 1024 × 50304) read 2 bytes per element and write
// nothing else, where converting a row into fp32 scratch first wrote and re-read 4 more bytes per element. f16
// (whose conversion is not a shift) keeps the scratch row.

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

// Σexp(l − m) over a bf16 row: with AVX-512, each 16 logits are widened by intrinsics into one 16-float vector first, which the sum's loop then
// reads whole: with the widening inside the loop, GCC 12 (tuning for the build machine: Zen 3's cost model on this
// project's Zen 5 machines, Skylake-X's on Intel) split the exp into two 8-lane halves, and the statistics of bf16
// logits took 1.4x the time of fp32 ones. Same lanes, same order, same bits. (GCC 12 warns that the intrinsics'
// _mm512_undefined_epi32() operand "may be used uninitialized" once inlined into an OpenMP region: a false positive,
// PR 105593.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
inline void bf16_row_sumexp(float* sumexp, float* target_logit, const uint16_t* r, float maxv, int32_t target,
                            int64_t col_offset, int64_t V) {
#if defined(__AVX512F__)
  float lane[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= V; i += kSumLanes) {
    alignas(64) float x[kSumLanes];
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + i));
    _mm512_store_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
#pragma omp simd
    for (int j = 0; j < kSumLanes; j++) lane[j] += fast_exp(x[j] - maxv);
  }
  for (int j = 0; i + j < V; j++) lane[j] += fast_exp(bf16_to_f32(r[i + j]) - maxv);
  for (int width = kSumLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; j++) lane[j] += lane[j + width];
  *sumexp = lane[0];
#else
  *sumexp = lane_sum((int)V, [&](int v) { return fast_exp(bf16_to_f32(r[v]) - maxv); });
#endif
  const int64_t t = (int64_t)target - col_offset;
  *target_logit = t >= 0 && t < V ? bf16_to_f32(r[t]) : 0.0f;
}
#pragma GCC diagnostic pop

void crossentropy_row_max_lowp_rows(float* row_max, const Tensor& logits) {
  const Ref l(logits);
  const int64_t N = logits.rows(), V = logits.dim(-1);
  if (l.dt == DType::BF16) {
#pragma omp parallel for schedule(static) if ((size_t)(N * V) >= kParallelMin)
    for (int64_t n = 0; n < N; n++) row_max[n] = bf16_row_max(reinterpret_cast<const uint16_t*>(l.at(n, 0)), V);
    return;
  }
  for_rows(N, V, (size_t)V, [&](int64_t n, float* s) { crossentropy_row_max_rows(row_max + n, l.load(n, 0, V, s), 1, (int)V); });
}

void crossentropy_sumexp_lowp_rows(float* sumexp, float* target_logit, const Tensor& logits, const float* m,
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
    crossentropy_sumexp_rows(sumexp + n, target_logit + n, l.load(n, 0, V, s), m + n, targets + n, col_offset, 1, (int)V);
  });
}

// Row by row, the row still in cache for its Σexp; f16 rows are converted into scratch once for both.
void crossentropy_stats_lowp_rows(float* row_max, float* sumexp, float* target_logit, const Tensor& logits,
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
    crossentropy_row_max_rows(row_max + n, r, 1, (int)V);
    crossentropy_sumexp_rows(sumexp + n, target_logit + n, r, row_max + n, targets + n, col_offset, 1, (int)V);
  });
}

void crossentropy_backward_lowp_rows(const Tensor& dlogits, const Tensor& logits, const float* lse,
                                     const int32_t* targets, const float* dloss, int64_t col_offset) {
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
    crossentropy_backward_rows(g, l.load(n, 0, V, s), lse + n, targets + n, dloss + n, col_offset, 1, (int)V);
    dl.store(n, 0, V, g);
  });
}


// The low-precision entry points: fp32 statistics and contiguous logits take the paths above; other combinations
// (low-precision statistics) the fp32 code on converted operands, as ops.cpp's dispatch always did.
void crossentropy_row_max_lowp(const Tensor& row_max, const Tensor& logits) {
  if (row_max.dtype != DType::F32) return crossentropy_row_max_f32(row_max, logits);
  crossentropy_row_max_lowp_rows(row_max.f32(), logits);
}

void crossentropy_sumexp_lowp(const Tensor& sumexp, const Tensor& target_logit, const Tensor& logits, const Tensor& m,
                              const Tensor& targets, int64_t col_offset) {
  if (sumexp.dtype != DType::F32 || target_logit.dtype != DType::F32 || m.dtype != DType::F32 || !logits.contiguous())
    return crossentropy_sumexp_f32(sumexp, target_logit, logits, m, targets, col_offset);
  crossentropy_sumexp_lowp_rows(sumexp.f32(), target_logit.f32(), logits, m.f32(), id_data(targets), col_offset);
}

// Low-precision statistics: the two passes, each with its own conversions.
void crossentropy_stats_lowp(const Tensor& row_max, const Tensor& sumexp, const Tensor& target_logit,
                             const Tensor& logits, const Tensor& targets, int64_t col_offset) {
  if (row_max.dtype != DType::F32 || sumexp.dtype != DType::F32 || target_logit.dtype != DType::F32) {
    crossentropy_row_max_lowp(row_max, logits);
    return crossentropy_sumexp_lowp(sumexp, target_logit, logits, row_max, targets, col_offset);
  }
  crossentropy_stats_lowp_rows(row_max.f32(), sumexp.f32(), target_logit.f32(), logits, id_data(targets), col_offset);
}

void crossentropy_backward_lowp(const Tensor& dlogits, const Tensor& logits, const Tensor& lse, const Tensor& targets,
                                const Tensor& dloss, int64_t col_offset) {
  if (lse.dtype != DType::F32 || dloss.dtype != DType::F32 || !logits.contiguous() || !dlogits.contiguous())
    return crossentropy_backward_f32(dlogits, logits, lse, targets, dloss, col_offset);
  crossentropy_backward_lowp_rows(dlogits, logits, lse.f32(), id_data(targets), dloss.f32(), col_offset);
}

}  // namespace

void register_crossentropy(KernelTable& t) {
  t.add<Kernel::CROSSENTROPY_ROW_MAX>(Device::CPU, DType::F32, crossentropy_row_max_f32);
  t.add<Kernel::CROSSENTROPY_SUMEXP>(Device::CPU, DType::F32, crossentropy_sumexp_f32);
  t.add<Kernel::CROSSENTROPY_STATS>(Device::CPU, DType::F32, crossentropy_stats_f32);
  t.add<Kernel::CROSSENTROPY_BACKWARD>(Device::CPU, DType::F32, crossentropy_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::CROSSENTROPY_ROW_MAX>(Device::CPU, lowp, crossentropy_row_max_lowp);
    t.add<Kernel::CROSSENTROPY_SUMEXP>(Device::CPU, lowp, crossentropy_sumexp_lowp);
    t.add<Kernel::CROSSENTROPY_STATS>(Device::CPU, lowp, crossentropy_stats_lowp);
    t.add<Kernel::CROSSENTROPY_BACKWARD>(Device::CPU, lowp, crossentropy_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
