// defines: the CPU fp32 pieces of the (vocabulary-parallel) softmax cross-entropy
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace lmforge::kernels::cpu {

void crossentropy_row_max(float* row_max, const float* logits, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
    for (int v = 0; v < V; v++) maxv = l[v] > maxv ? l[v] : maxv;
    row_max[n] = maxv;
  }
}

void crossentropy_sumexp(float* sumexp, float* target_logit, const float* logits, const float* m,
                         const int32_t* targets, int64_t col_offset, int N, int V) {
#pragma omp parallel for schedule(static) if ((size_t)N * V >= kParallelMin)
  for (int n = 0; n < N; n++) {
    const float* l = logits + (size_t)n * V;
    const float maxv = m[n];
    sumexp[n] = lane_sum(V, [&](int v) { return fast_exp(l[v] - maxv); });
    const int64_t t = (int64_t)targets[n] - col_offset;
    target_logit[n] = t >= 0 && t < V ? l[t] : 0.0f;
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
