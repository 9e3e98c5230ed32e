// defines: the CPU optimizer and gradient ops over flat f32 buffers (AdamW, LAMB's two phases, SGD, scale,
//          sum of squares, non-finite count, f16 storage rounding), their multi-tensor forms (loops over those
//          kernels: the same bits) and their registration. Compiled with
//          -fno-math-errno -ffp-contract=off as src/optim (src/kernels/CMakeLists: no contraction, so fused
//          multiply-adds sit exactly where the std::fma calls are; sqrt without an errno path vectorises).
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// Elements per work item of the element-wise updates (64 KiB of floats): threads take whole items.
constexpr size_t kOptimBlock = 16384;
// Below this many elements the gradient passes (scale, Σx²) run on the calling thread, as src/optim's did.
constexpr int64_t kGradParallelMin = 65536;

// ---- AdamW --------------------------------------------------------------------------------------------------------

// The per-element update with torch's operation order (ops.h). torch's vectorized add_ with alpha is a fused
// multiply-add, addcmul_ is self + (value·t1)·t2 and addcdiv_ is self + (value·t1)/t2; matching that keeps us
// within an ulp or two of torch per step instead of drifting.
inline void adamw_range(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                        size_t n, const AdamWScalars& s) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float pi = p[i] * s.decay;
    const float mi = std::fma(gi, s.one_minus_beta1, m[i] * s.beta1);
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    const float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + s.neg_step_size * mi / denom;
  }
}

// One block of the update, then (when given) its bf16 working copy and that copy's fp32 mirror from the new values
// while they are still in cache (ops.h, MultiTensorItem::working).
inline void adamw_block(float* p, const float* g, float* m, float* v, size_t n, const AdamWScalars& s,
                        uint16_t* working, float* mirror) {
  adamw_range(p, g, m, v, n, s);
  if (working != nullptr) round_to_bf16_with_mirror(working, mirror, p, (int64_t)n);
}

void adamw_update_into(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                       const AdamWScalars& s, const Tensor& working) {
  float* p = param.f32();
  const float* g = grad.f32();
  float* mm = m.f32();
  float* vv = v.f32();
  uint16_t* w = working.present() ? working.bf16("working copy") : nullptr;
  float* mirror = working.present() ? const_cast<float*>(working.widened) : nullptr;
  const size_t n = (size_t)param.numel();
  if (n <= kOptimBlock) return adamw_block(p, g, mm, vv, n, s, w, mirror);  // no team for one item (src/optim's blocks)
  const int64_t blocks = (int64_t)((n + kOptimBlock - 1) / kOptimBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t lo = (size_t)b * kOptimBlock;
    adamw_block(p + lo, g + lo, mm + lo, vv + lo, std::min(kOptimBlock, n - lo), s, w != nullptr ? w + lo : nullptr,
                mirror != nullptr ? mirror + lo : nullptr);
  }
}

void adamw_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                      const AdamWScalars& s) {
  adamw_update_into(param, grad, m, v, s, Tensor{});
}

// ---- LAMB ---------------------------------------------------------------------------------------------------------

// u for one element from the already-updated moments; both phases call it, so both see identical bits.
inline float lamb_direction(float m, float v, float p, float wd, const LambScalars& s) {
  const float denom = std::sqrt(v / s.bias_correction2) + s.eps;
  return (m / s.bias_correction1) / denom + wd * p;
}

LambSums lamb_moments_cpu(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const LambScalars& s, float wd) {
  const float* p = param.f32();
  const float* g = grad.f32();
  float* mk = m.f32();
  float* vk = v.f32();
  const size_t n = (size_t)param.numel();
  double pp = 0.0, uu = 0.0;
#pragma omp simd reduction(+ : pp, uu)
  for (size_t j = 0; j < n; ++j) {
    const float mj = s.beta1 * mk[j] + s.beta3 * g[j];
    const float vj = s.beta2 * vk[j] + s.one_minus_beta2 * g[j] * g[j];
    mk[j] = mj;
    vk[j] = vj;
    const float u = lamb_direction(mj, vj, p[j], wd, s);
    pp += static_cast<double>(p[j]) * p[j];
    uu += static_cast<double>(u) * u;
  }
  return {pp, uu};
}

void lamb_apply_cpu(const Tensor& param, const Tensor& m, const Tensor& v, const LambScalars& s, float wd,
                    float rate) {
  float* p = param.f32();
  const float* mk = m.f32();
  const float* vk = v.f32();
  const size_t n = (size_t)param.numel();
#pragma omp simd
  for (size_t j = 0; j < n; ++j) p[j] = p[j] - rate * lamb_direction(mk[j], vk[j], p[j], wd, s);
}

// ---- SGD ----------------------------------------------------------------------------------------------------------

void sgd_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdScalars& s) {
  float* __restrict p = param.f32();
  const float* __restrict g = grad.f32();
  const bool momentum = momentum_buffer.present();
  float* __restrict b = momentum ? momentum_buffer.f32() : nullptr;
  const size_t n = (size_t)param.numel();
  const bool decay = s.decay, first = s.first;
  const float wd = s.weight_decay, mu = s.momentum, neg_lr = s.neg_lr;
#pragma omp simd
  for (size_t j = 0; j < n; ++j) {
    const float d = decay ? std::fma(p[j], wd, g[j]) : g[j];
    float step = d;
    if (momentum) {
      step = first ? d : b[j] * mu + d;
      b[j] = step;
    }
    p[j] = std::fma(step, neg_lr, p[j]);
  }
}

// ---- gradient passes ----------------------------------------------------------------------------------------------

void scale_cpu(const Tensor& x, float factor) {
  float* g = x.f32();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static) if (n > kGradParallelMin)
  for (int64_t i = 0; i < n; ++i) g[i] *= factor;
}

double sum_squares_cpu(const Tensor& x, SumOrder order, double start) {
  const float* g = x.f32();
  const int64_t n = x.numel();
  if (order == SumOrder::SEQUENTIAL) {
    double s = start;
    for (int64_t i = 0; i < n; ++i) s += (double)g[i] * (double)g[i];
    return s;
  }
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static) if (n > kGradParallelMin)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return start + sum;
}

int64_t count_nonfinite_cpu(const Tensor& x) {
  const float* g = x.f32();
  const int64_t n = x.numel();
  int64_t count = 0;
#pragma omp parallel for simd reduction(+ : count) schedule(static) if (n > kGradParallelMin)
  for (int64_t i = 0; i < n; ++i) count += std::isfinite(g[i]) ? 0 : 1;
  return count;
}

// Through the f16 conversions of the copy op (kernels/cpu/lowp.cpp), a block at a time.
void round_to_f16_storage_cpu(const Tensor& x) {
  float* g = x.f32();
  for_blocks(x.numel(), [&](int64_t off, int64_t n, float* s) {
    uint16_t* half = reinterpret_cast<uint16_t*>(s);
    row_from_f32(half, DType::F16, g + off, (size_t)n);
    row_to_f32(g + off, half, DType::F16, (size_t)n);
  });
}

// ---- multi-tensor forms ---------------------------------------------------------------------------------------
// Each run through the single-tensor kernel above. The element-wise steps take the runs in parallel (src/optim's
// loop over its blocks: a run of at most kOptimBlock elements runs on its thread); the sums keep each run's own
// value and add them in list order, so nothing depends on the thread count beyond what the single kernels do.

template <class Fn>
void each_run(MultiTensorList runs, Fn&& fn) {
  const int64_t count = (int64_t)runs.count;
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const MultiTensorItem& r = runs.items[k];
    if (r.param.numel() > 0) fn(r, (size_t)k);
  }
}

void adamw_update_multi_cpu(MultiTensorList runs, const AdamWScalars* groups, size_t) {
  each_run(runs, [&](const MultiTensorItem& r, size_t) {
    adamw_update_into(r.param, r.grad, r.m, r.v, groups[r.group], r.working);
  });
}

void sgd_update_multi_cpu(MultiTensorList runs, const SgdScalars* groups, size_t) {
  each_run(runs, [&](const MultiTensorItem& r, size_t) { sgd_update_cpu(r.param, r.grad, r.m, groups[r.group]); });
}

void lamb_moments_multi_cpu(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t count,
                            LambSums* sums) {
  std::vector<LambSums> per_run(runs.count, LambSums{0.0, 0.0});
  each_run(runs, [&](const MultiTensorItem& r, size_t k) {
    per_run[k] = lamb_moments_cpu(r.param, r.grad, r.m, r.v, s, tensors[r.group].wd);
  });
  for (size_t t = 0; t < count; ++t) sums[t] = LambSums{0.0, 0.0};
  for (size_t k = 0; k < runs.count; ++k) {
    if (runs.items[k].param.numel() == 0) continue;
    LambSums& to = sums[runs.items[k].group];
    to.p_sq += per_run[k].p_sq;
    to.u_sq += per_run[k].u_sq;
  }
}

void lamb_apply_multi_cpu(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t,
                          const float* rates) {
  each_run(runs, [&](const MultiTensorItem& r, size_t) {
    lamb_apply_cpu(r.param, r.m, r.v, s, tensors[r.group].wd, rates[r.group]);
  });
}

void lamb_step_multi_cpu(MultiTensorList runs, const LambScalars& s, const LambTensor* tensors, size_t count,
                         double lr) {
  std::vector<LambSums> sums(count);
  lamb_moments_multi_cpu(runs, s, tensors, count, sums.data());
  std::vector<float> rates(count);
  for (size_t t = 0; t < count; ++t) rates[t] = lamb_trust_rate(lr, sums[t].p_sq, sums[t].u_sq, tensors[t].trust);
  lamb_apply_multi_cpu(runs, s, tensors, count, rates.data());
}

// The views one after another (each scale and Σx² uses the OpenMP team itself above kGradParallelMin elements).
void scale_multi_cpu(TensorList xs, float factor) {
  for (size_t k = 0; k < xs.count; ++k)
    if (xs.items[k].numel() > 0) scale_cpu(xs.items[k], factor);
}

void sum_squares_multi_cpu(TensorList xs, double* out) {
  for (size_t k = 0; k < xs.count; ++k)
    out[k] = xs.items[k].numel() > 0 ? sum_squares_cpu(xs.items[k], SumOrder::PARALLEL, 0.0) : 0.0;
}

}  // namespace

void register_optim(KernelTable& t) {
  t.add<Kernel::ADAMW_UPDATE>(Device::CPU, DType::F32, adamw_update_cpu);
  t.add<Kernel::LAMB_MOMENTS>(Device::CPU, DType::F32, lamb_moments_cpu);
  t.add<Kernel::LAMB_APPLY>(Device::CPU, DType::F32, lamb_apply_cpu);
  t.add<Kernel::SGD_UPDATE>(Device::CPU, DType::F32, sgd_update_cpu);
  t.add<Kernel::SCALE>(Device::CPU, DType::F32, scale_cpu);
  t.add<Kernel::SUM_SQUARES>(Device::CPU, DType::F32, sum_squares_cpu);
  t.add<Kernel::COUNT_NONFINITE>(Device::CPU, DType::F32, count_nonfinite_cpu);
  t.add<Kernel::ROUND_TO_F16_STORAGE>(Device::CPU, DType::F32, round_to_f16_storage_cpu);
  t.add<Kernel::ADAMW_UPDATE_MULTI>(Device::CPU, DType::F32, adamw_update_multi_cpu);
  t.add<Kernel::SGD_UPDATE_MULTI>(Device::CPU, DType::F32, sgd_update_multi_cpu);
  t.add<Kernel::LAMB_MOMENTS_MULTI>(Device::CPU, DType::F32, lamb_moments_multi_cpu);
  t.add<Kernel::LAMB_APPLY_MULTI>(Device::CPU, DType::F32, lamb_apply_multi_cpu);
  t.add<Kernel::LAMB_STEP_MULTI>(Device::CPU, DType::F32, lamb_step_multi_cpu);
  t.add<Kernel::SCALE_MULTI>(Device::CPU, DType::F32, scale_multi_cpu);
  t.add<Kernel::SUM_SQUARES_MULTI>(Device::CPU, DType::F32, sum_squares_multi_cpu);
}

}  // namespace lmforge::kernels::cpu
