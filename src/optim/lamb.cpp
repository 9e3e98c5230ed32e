// defines: Lamb — phase 1: moments and the partial sums of p² and u²; phase 2: the trust-ratio-scaled update (the
//          per-element arithmetic of both: the kernel ops kernels::lamb_moments and kernels::lamb_apply)
#include "optim/lamb.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::optim {

Lamb::Lamb(std::vector<ParamSpan> params, LambConfig config, size_t shard_begin, size_t shard_end)
    : Optimizer("lamb", std::move(params), {"exp_avg", "exp_avg_sq"}, shard_begin, shard_end), config_(config) {
  if (!(config_.beta1 >= 0.0 && config_.beta1 < 1.0) || !(config_.beta2 >= 0.0 && config_.beta2 < 1.0))
    throw Error("lamb: betas must lie in [0, 1), got " + std::to_string(config_.beta1) + ", " +
                std::to_string(config_.beta2));
  if (!(config_.eps >= 0.0)) throw Error("lamb: eps must be >= 0, got " + std::to_string(config_.eps));
}

std::map<std::string, std::string> Lamb::hyperparameters() const {
  return {{"beta1", number_text(config_.beta1)},
          {"beta2", number_text(config_.beta2)},
          {"eps", number_text(config_.eps)},
          {"bias_correction", config_.bias_correction ? "true" : "false"},
          {"grad_averaging", config_.grad_averaging ? "true" : "false"},
          {"use_nvlamb", config_.use_nvlamb ? "true" : "false"}};
}

// apex hands beta1/beta2 to its kernel as float, so β3 = 1 − β1 and 1 − β2 are float subtractions of the rounded
// betas (1 − 0.999f = 0.99998713e-3, 1.3e-5 below 1e-3) and the bias corrections are 1 − std::pow(float β, int t),
// evaluated in double and stored as float. The same constants here keep m and v equal to apex's, not 1e-5 apart.
kernels::LambScalars Lamb::scalars() const {
  const double t = static_cast<double>(step_);
  const float beta1 = static_cast<float>(config_.beta1), beta2 = static_cast<float>(config_.beta2);
  return kernels::LambScalars{beta1,
                              config_.grad_averaging ? 1.0f - beta1 : 1.0f,
                              beta2,
                              1.0f - beta2,
                              static_cast<float>(config_.bias_correction ? 1.0 - std::pow(double(beta1), t) : 1.0),
                              static_cast<float>(config_.bias_correction ? 1.0 - std::pow(double(beta2), t) : 1.0),
                              static_cast<float>(config_.eps)};
}

void Lamb::begin_step(double, double weight_decay, std::span<double> sums) {
  if (sums.size() != 2 * params_.size())
    throw std::logic_error("lamb: begin_step needs 2 sums per parameter tensor");
  ++step_;
  const kernels::LambScalars s = scalars();
  const std::vector<Item>& work = items();
  const int64_t count = static_cast<int64_t>(work.size());
  std::vector<double> p_sq(work.size()), u_sq(work.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = work[static_cast<size_t>(k)];
    const ParamSpan& ps = params_[it.param];
    const float wd = ps.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    const kernels::LambSums item =
        kernels::lamb_moments(item_param(it), item_grad(it), item_state(0, it), item_state(1, it), s, wd);
    p_sq[static_cast<size_t>(k)] = item.p_sq;
    u_sq[static_cast<size_t>(k)] = item.u_sq;
  }
  // Per tensor in a fixed (block) order, so the result does not depend on the thread count.
  std::fill(sums.begin(), sums.end(), 0.0);
  for (size_t k = 0; k < work.size(); ++k) {
    sums[2 * work[k].param] += p_sq[k];
    sums[2 * work[k].param + 1] += u_sq[k];
  }
}

void Lamb::finish_step(double lr, double weight_decay, std::span<const double> sums) {
  if (sums.size() != 2 * params_.size())
    throw std::logic_error("lamb: finish_step needs 2 sums per parameter tensor");
  const kernels::LambScalars s = scalars();
  // The step size per tensor: lr·‖p‖/‖u‖ (rounded to float once), or lr when the ratio does not apply.
  std::vector<float> rate(params_.size(), static_cast<float>(lr));
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool decayed = params_[i].weight_decay && weight_decay != 0.0;
    const double p_norm = std::sqrt(sums[2 * i]), u_norm = std::sqrt(sums[2 * i + 1]);
    if ((config_.use_nvlamb || decayed) && p_norm != 0.0 && u_norm != 0.0)
      rate[i] = static_cast<float>(lr * (p_norm / u_norm));
  }
  const std::vector<Item>& work = items();
  const int64_t count = static_cast<int64_t>(work.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t k = 0; k < count; ++k) {
    const Item& it = work[static_cast<size_t>(k)];
    const ParamSpan& ps = params_[it.param];
    const float wd = ps.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    kernels::lamb_apply(item_param(it), item_state(0, it), item_state(1, it), s,
                        wd, rate[it.param]);
  }
}

}  // namespace lmforge::optim
