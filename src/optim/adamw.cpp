// defines: AdamW (torch.optim.AdamW in fp32, over a sliceable flat index space)
#include "optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace lmforge::optim {

namespace {

// The per-element update with torch's operation order (see adamw.h). torch's vectorized add_ with alpha is a
// fused multiply-add, addcmul_ is self + (value·t1)·t2 and addcdiv_ is self + (value·t1)/t2; matching that
// keeps us within an ulp or two of torch per step instead of drifting.
struct Scalars {
  float decay;          // 1 − lr·wd
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float neg_step_size;  // −lr/(1−β1ᵗ)
};

Scalars make_scalars(double lr, double weight_decay, const AdamWConfig& c, int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(c.beta2, static_cast<double>(step));
  return Scalars{static_cast<float>(1.0 - lr * weight_decay),
                 static_cast<float>(c.beta1),
                 static_cast<float>(1.0 - c.beta1),
                 static_cast<float>(c.beta2),
                 static_cast<float>(1.0 - c.beta2),
                 static_cast<float>(std::sqrt(bias_correction2)),
                 static_cast<float>(c.eps),
                 static_cast<float>(-(lr / bias_correction1))};
}

inline void update_range(float* __restrict p, const float* __restrict g, float* __restrict m,
                         float* __restrict v, size_t n, const Scalars& s) {
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

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, size_t n, double lr, double weight_decay,
                  const AdamWConfig& config, int64_t step) {
  const Scalars s = make_scalars(lr, weight_decay, config, step);
  // Blocks of 64 KiB per thread keep the split even without per-element scheduling cost.
  constexpr size_t kBlock = 16384;
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t lo = static_cast<size_t>(b) * kBlock;
    const size_t len = std::min(kBlock, n - lo);
    update_range(param + lo, grad + lo, m + lo, v + lo, len, s);
  }
}

AdamW::AdamW(std::vector<ParamSpan> params, AdamWConfig config, size_t shard_begin, size_t shard_end)
    : Optimizer("adam", std::move(params), {"exp_avg", "exp_avg_sq"}, shard_begin, shard_end), config_(config) {
  if (!(config_.beta1 >= 0.0 && config_.beta1 < 1.0) || !(config_.beta2 >= 0.0 && config_.beta2 < 1.0))
    throw Error("adam: betas must lie in [0, 1), got " + std::to_string(config_.beta1) + ", " +
                std::to_string(config_.beta2));
  if (!(config_.eps >= 0.0)) throw Error("adam: eps must be >= 0, got " + std::to_string(config_.eps));
}

void AdamW::begin_step(double lr, double weight_decay, std::span<double>) {
  ++step_;
  const Scalars with_decay = make_scalars(lr, weight_decay, config_, step_);
  const Scalars without_decay = make_scalars(lr, 0.0, config_, step_);
  float* m = state_data(0);
  float* v = state_data(1);
  const std::vector<Item>& work = items();
  const int64_t count = static_cast<int64_t>(work.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = work[static_cast<size_t>(k)];
    const ParamSpan& p = params_[it.param];
    update_range(p.param + it.local, p.grad + it.local, m + it.state, v + it.state, it.len,
                 p.weight_decay ? with_decay : without_decay);
  }
}

std::map<std::string, std::string> AdamW::hyperparameters() const {
  return {{"beta1", number_text(config_.beta1)}, {"beta2", number_text(config_.beta2)},
          {"eps", number_text(config_.eps)}};
}

}  // namespace lmforge::optim
