// defines: Lamb — two passes per step: moments and the norms of p and u, then the trust-ratio-scaled update
#include "optim/lamb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.h"

namespace lmforge::optim {

namespace {

struct Scalars {
  float beta1, beta3, beta2, one_minus_beta2;
  float bias_correction1, bias_correction2;
  float eps;
};

// u for one element from the already-updated moments; both passes call it, so both see identical bits.
inline float lamb_direction(float m, float v, float p, float wd, const Scalars& s) {
  const float denom = std::sqrt(v / s.bias_correction2) + s.eps;
  return (m / s.bias_correction1) / denom + wd * p;
}

}  // namespace

Lamb::Lamb(std::vector<ParamSpan> params, LambConfig config, size_t shard_begin, size_t shard_end)
    : params_(std::move(params)), config_(config) {
  if (!(config_.beta1 >= 0.0 && config_.beta1 < 1.0) || !(config_.beta2 >= 0.0 && config_.beta2 < 1.0))
    throw Error("lamb: betas must lie in [0, 1)");
  offsets_.push_back(0);
  for (const ParamSpan& p : params_) {
    if (p.size > 0 && (p.param == nullptr || p.grad == nullptr))
      throw Error("lamb: parameter '" + p.name + "' has no parameter or gradient storage");
    numel_ += p.size;
    offsets_.push_back(numel_);
  }
  if (shard_end == kAll) shard_end = numel_;
  const auto first = std::find(offsets_.begin(), offsets_.end(), shard_begin);
  const auto last = std::find(offsets_.begin(), offsets_.end(), shard_end);
  if (shard_begin > shard_end || first == offsets_.end() || last == offsets_.end())
    throw Error("lamb: shard [" + std::to_string(shard_begin) + ", " + std::to_string(shard_end) +
                ") must start and end on parameter tensor boundaries");
  first_ = static_cast<size_t>(first - offsets_.begin());
  last_ = static_cast<size_t>(last - offsets_.begin());
  shard_begin_ = shard_begin;
  m_.assign(shard_end - shard_begin, 0.0f);
  v_.assign(shard_end - shard_begin, 0.0f);
}

std::map<std::string, std::string> Lamb::hyperparameters() const {
  auto text = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return std::string(buf);
  };
  return {{"beta1", text(config_.beta1)},
          {"beta2", text(config_.beta2)},
          {"eps", text(config_.eps)},
          {"bias_correction", config_.bias_correction ? "true" : "false"},
          {"grad_averaging", config_.grad_averaging ? "true" : "false"},
          {"use_nvlamb", config_.use_nvlamb ? "true" : "false"}};
}

std::span<float> Lamb::exp_avg_of(size_t i) {
  if (i < first_ || i >= last_) return {};
  return {m_.data() + (offsets_[i] - shard_begin_), params_[i].size};
}
std::span<float> Lamb::exp_avg_sq_of(size_t i) {
  if (i < first_ || i >= last_) return {};
  return {v_.data() + (offsets_[i] - shard_begin_), params_[i].size};
}

void Lamb::step(double lr, double weight_decay) {
  ++step_;
  const double t = static_cast<double>(step_);
  const Scalars s{static_cast<float>(config_.beta1),
                  static_cast<float>(config_.grad_averaging ? 1.0 - config_.beta1 : 1.0),
                  static_cast<float>(config_.beta2),
                  static_cast<float>(1.0 - config_.beta2),
                  static_cast<float>(config_.bias_correction ? 1.0 - std::pow(config_.beta1, t) : 1.0),
                  static_cast<float>(config_.bias_correction ? 1.0 - std::pow(config_.beta2, t) : 1.0),
                  static_cast<float>(config_.eps)};
  constexpr size_t kBlock = 16384;
  struct Item { size_t param, lo, len; };
  std::vector<Item> items;
  for (size_t i = first_; i < last_; ++i)
    for (size_t b = 0; b < params_[i].size; b += kBlock) items.push_back({i, b, std::min(kBlock, params_[i].size - b)});
  const int64_t count = static_cast<int64_t>(items.size());
  std::vector<double> p_sq(items.size()), u_sq(items.size());

  // Pass 1: moments, and per-block sums of p² and u² (summed per tensor below in a fixed order).
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = items[static_cast<size_t>(k)];
    const ParamSpan& ps = params_[it.param];
    const float wd = ps.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    const float* p = ps.param + it.lo;
    const float* g = ps.grad + it.lo;
    float* m = m_.data() + (offsets_[it.param] - shard_begin_) + it.lo;
    float* v = v_.data() + (offsets_[it.param] - shard_begin_) + it.lo;
    double pp = 0.0, uu = 0.0;
#pragma omp simd reduction(+ : pp, uu)
    for (size_t j = 0; j < it.len; ++j) {
      const float mj = s.beta1 * m[j] + s.beta3 * g[j];
      const float vj = s.beta2 * v[j] + s.one_minus_beta2 * g[j] * g[j];
      m[j] = mj;
      v[j] = vj;
      const float u = lamb_direction(mj, vj, p[j], wd, s);
      pp += static_cast<double>(p[j]) * p[j];
      uu += static_cast<double>(u) * u;
    }
    p_sq[static_cast<size_t>(k)] = pp;
    u_sq[static_cast<size_t>(k)] = uu;
  }
  std::vector<float> ratio(params_.size(), static_cast<float>(lr));
  {
    std::vector<double> pn(params_.size(), 0.0), un(params_.size(), 0.0);
    for (size_t k = 0; k < items.size(); ++k) {
      pn[items[k].param] += p_sq[k];
      un[items[k].param] += u_sq[k];
    }
    for (size_t i = first_; i < last_; ++i) {
      const bool decayed = params_[i].weight_decay && weight_decay != 0.0;
      const double p_norm = std::sqrt(pn[i]), u_norm = std::sqrt(un[i]);
      if ((config_.use_nvlamb || decayed) && p_norm != 0.0 && u_norm != 0.0)
        ratio[i] = static_cast<float>(lr * (p_norm / u_norm));
    }
  }
  // Pass 2: p ← p − ratio·u with u recomputed from the stored moments.
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = items[static_cast<size_t>(k)];
    const ParamSpan& ps = params_[it.param];
    const float wd = ps.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    const float r = ratio[it.param];
    float* p = ps.param + it.lo;
    const float* m = m_.data() + (offsets_[it.param] - shard_begin_) + it.lo;
    const float* v = v_.data() + (offsets_[it.param] - shard_begin_) + it.lo;
#pragma omp simd
    for (size_t j = 0; j < it.len; ++j) p[j] = p[j] - r * lamb_direction(m[j], v[j], p[j], wd, s);
  }
}

}  // namespace lmforge::optim
