// defines: lmforge::optim::SgdConfig, Sgd — stochastic gradient descent with momentum, torch.optim.SGD as Megatron
//          uses it (--optimizer sgd)
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "optim/optimizer.h"

namespace lmforge::optim {

struct SgdConfig {
  double momentum = 0.9;  // --sgd-momentum (Megatron's default); 0: plain SGD, no state
};

// torch.optim.SGD (PyTorch 1.13, single-tensor path; dampening 0, no Nesterov) in fp32, per element:
//   d ← g + wd·p                      (weight decay as Megatron passes it: L2 added to the gradient, coupled,
//                                      wd = 0 for tensors without decay)
//   b ← d at step 1, else μ·b + d     (the momentum buffer; skipped when μ = 0, then b = d)
//   p ← p − lr·b
// torch's add with alpha is a fused multiply-add (d = fma(p, wd, g), p = fma(b, −lr, p)); matching it keeps us
// within an ulp of torch. State: "momentum_buffer" (none when μ = 0). Element-wise: all in begin_step().
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamSpan> params, SgdConfig config, size_t shard_begin = 0, size_t shard_end = kAll);

  std::string_view name() const override { return "sgd"; }
  std::map<std::string, std::string> hyperparameters() const override;
  void begin_step(double lr, double weight_decay, std::span<double> sums) override;
  void finish_step(double, double, std::span<const double>) override {}
  const SgdConfig& config() const { return config_; }

 private:
  SgdConfig config_;
};

}  // namespace lmforge::optim
