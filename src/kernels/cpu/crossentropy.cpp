// defines: the CPU fp32 pieces of the (vocabulary-parallel) softmax cross-entropy
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace lmforge::kernels::cpu {

namespace {

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

}  // namespace

void crossentropy_row_max(float* row_max, const float* logits, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) row_max[n] = row_max_of(logits + (size_t)n * V, V);
}

void crossentropy_sumexp(float* sumexp, float* target_logit, const float* logits, const float* m,
                         const int32_t* targets, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++)
    row_sumexp(sumexp + n, target_logit + n, logits + (size_t)n * V, m[n], targets[n], col_offset, V);
}

void crossentropy_stats(float* row_max, float* sumexp, float* target_logit, const float* logits,
                        const int32_t* targets, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    row_max[n] = row_max_of(l, V);
    row_sumexp(sumexp + n, target_logit + n, l, row_max[n], targets[n], col_offset, V);
  }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                           const float* dloss, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
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

}  // namespace lmforge::kernels::cpu
