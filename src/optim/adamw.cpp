// defines: AdamW (torch.optim.AdamW in fp32, over a sliceable flat index space; the per-element update is the
//          kernel op kernels::adamw_update)
#include "optim/adamw.h"

#include <cmath>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::optim {

namespace {

// The scalars of one step, formed in double and rounded to float once, as torch does when it passes Python floats
// to its fp32 kernels (the per-element arithmetic: kernels/ops.h, adamw_update).
kernels::AdamWScalars make_scalars(double lr, double weight_decay, const AdamWConfig& c, int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(c.beta2, static_cast<double>(step));
  return kernels::AdamWScalars{static_cast<float>(1.0 - lr * weight_decay),
                               static_cast<float>(c.beta1),
                               static_cast<float>(1.0 - c.beta1),
                               static_cast<float>(c.beta2),
                               static_cast<float>(1.0 - c.beta2),
                               static_cast<float>(std::sqrt(bias_correction2)),
                               static_cast<float>(c.eps),
                               static_cast<float>(-(lr / bias_correction1))};
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, size_t n, double lr, double weight_decay,
                  const AdamWConfig& config, int64_t step) {
  const auto view = [n](const float* p) { return kernels::make_view(const_cast<float*>(p), {static_cast<int64_t>(n)}); };
  kernels::adamw_update(view(param), view(grad), view(m), view(v), make_scalars(lr, weight_decay, config, step));
}

AdamW::AdamW(std::vector<ParamSpan> params, AdamWConfig config, size_t shard_begin, size_t shard_end)
    : Optimizer("adam", std::move(params), {"exp_avg", "exp_avg_sq"}, shard_begin, shard_end), config_(config) {
  if (!(config_.beta1 >= 0.0 && config_.beta1 < 1.0) || !(config_.beta2 >= 0.0 && config_.beta2 < 1.0))
    throw Error("adam: betas must lie in [0, 1), got " + std::to_string(config_.beta1) + ", " +
                std::to_string(config_.beta2));
  if (!(config_.eps >= 0.0)) throw Error("adam: eps must be >= 0, got " + std::to_string(config_.eps));
  write_working_copy_in_runs();
}

void AdamW::begin_step(double lr, double weight_decay, std::span<double>) {
  ++step_;
  const kernels::AdamWScalars with_decay = make_scalars(lr, weight_decay, config_, step_);
  const kernels::AdamWScalars without_decay = make_scalars(lr, 0.0, config_, step_);
  // Every item in one multi-tensor op; an item's group is its parameter, whose scalars carry its decay.
  std::vector<kernels::AdamWScalars> groups;
  groups.reserve(params_.size());
  for (const ParamSpan& p : params_) groups.push_back(p.weight_decay ? with_decay : without_decay);
  kernels::adamw_update_multi(runs(), groups.data(), groups.size());
}

std::map<std::string, std::string> AdamW::hyperparameters() const {
  return {{"beta1", number_text(config_.beta1)}, {"beta2", number_text(config_.beta2)},
          {"eps", number_text(config_.eps)}};
}

}  // namespace lmforge::optim
