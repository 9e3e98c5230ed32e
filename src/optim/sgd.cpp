// defines: Sgd (torch.optim.SGD with momentum in fp32, over a sliceable flat index space; the per-element update is
//          the kernel op kernels::sgd_update)
#include "optim/sgd.h"

#include <cmath>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::optim {

namespace {
std::vector<std::string> sgd_state(const SgdConfig& c) {
  if (c.momentum == 0.0) return {};  // torch keeps no buffer without momentum
  return {"momentum_buffer"};
}
}  // namespace

Sgd::Sgd(std::vector<ParamSpan> params, SgdConfig config, size_t shard_begin, size_t shard_end)
    : Optimizer("sgd", std::move(params), sgd_state(config), shard_begin, shard_end), config_(config) {
  if (!(config_.momentum >= 0.0) || !std::isfinite(config_.momentum))
    throw Error("sgd: momentum must be >= 0, got " + std::to_string(config_.momentum));
}

std::map<std::string, std::string> Sgd::hyperparameters() const {
  return {{"momentum", number_text(config_.momentum)}, {"dampening", "0"}, {"nesterov", "false"}};
}

void Sgd::begin_step(double lr, double weight_decay, std::span<double>) {
  ++step_;
  const bool first = step_ == 1;  // torch creates the buffer as a copy of d on a parameter's first step
  const float mu = static_cast<float>(config_.momentum);
  const float neg_lr = static_cast<float>(-lr);
  // Every item in one multi-tensor op (the momentum buffer is each item's state 0, absent without momentum).
  std::vector<kernels::SgdScalars> groups;
  groups.reserve(params_.size());
  for (const ParamSpan& ps : params_) {
    // torch skips the decay term entirely when the group's weight decay is 0.
    const bool decay = ps.weight_decay && weight_decay != 0.0;
    groups.push_back(kernels::SgdScalars{decay, first, static_cast<float>(weight_decay), mu, neg_lr});
  }
  kernels::sgd_update_multi(runs(), groups.data(), groups.size());
}

}  // namespace lmforge::optim
