// defines: Lamb — phase 1: moments and the partial sums of p² and u²; phase 2: the trust-ratio-scaled update; both
//          at once for a slice of whole tensors (the per-element arithmetic: the multi-tensor kernel ops
//          kernels::lamb_moments_multi, lamb_apply_multi and lamb_step_multi)
#include "optim/lamb.h"

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

std::vector<kernels::LambTensor> Lamb::tensors(double weight_decay) const {
  std::vector<kernels::LambTensor> t;
  t.reserve(params_.size());
  for (const ParamSpan& ps : params_) {
    const bool decayed = ps.weight_decay && weight_decay != 0.0;
    t.push_back({ps.weight_decay ? static_cast<float>(weight_decay) : 0.0f, config_.use_nvlamb || decayed});
  }
  return t;
}

void Lamb::begin_step(double, double weight_decay, std::span<double> sums) {
  if (sums.size() != 2 * params_.size())
    throw std::logic_error("lamb: begin_step needs 2 sums per parameter tensor");
  ++step_;
  // Every item in one multi-tensor op; each tensor's sums are its items' in item order (a fixed order, so the
  // result does not depend on the thread count), on the host for the caller to add the other pieces.
  const std::vector<kernels::LambTensor> info = tensors(weight_decay);
  std::vector<kernels::LambSums> whole(params_.size());
  kernels::lamb_moments_multi(runs(), scalars(), info.data(), info.size(), whole.data());
  for (size_t i = 0; i < whole.size(); ++i) {
    sums[2 * i] = whole[i].p_sq;
    sums[2 * i + 1] = whole[i].u_sq;
  }
}

void Lamb::finish_step(double lr, double weight_decay, std::span<const double> sums) {
  if (sums.size() != 2 * params_.size())
    throw std::logic_error("lamb: finish_step needs 2 sums per parameter tensor");
  // The step size per tensor: lr·‖p‖/‖u‖ (rounded to float once), or lr when the ratio does not apply.
  const std::vector<kernels::LambTensor> info = tensors(weight_decay);
  std::vector<float> rate(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    rate[i] = kernels::lamb_trust_rate(lr, sums[2 * i], sums[2 * i + 1], info[i].trust);
  kernels::lamb_apply_multi(runs(), scalars(), info.data(), info.size(), rate.data());
}

// The slice holds its tensors whole: both phases with the rates formed where the sums are (on a GPU nothing comes
// back to the host), the same bits as begin_step() and finish_step().
void Lamb::whole_step(double lr, double weight_decay) {
  ++step_;
  const std::vector<kernels::LambTensor> info = tensors(weight_decay);
  kernels::lamb_step_multi(runs(), scalars(), info.data(), info.size(), lr);
}

}  // namespace lmforge::optim
