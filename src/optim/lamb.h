// defines: lmforge::optim::LambConfig, Lamb — layer-wise adaptive moments (LAMB) as in NVIDIA apex's FusedLAMB
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "optim/clip_grad.h"
#include "optim/optimizer.h"

namespace lmforge::optim {

struct LambConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;             // apex FusedLAMB's default
  bool bias_correction = true;
  bool grad_averaging = true;    // m uses (1−β1)·g; false: m uses g
  bool use_nvlamb = false;       // true: apply the trust ratio to tensors without weight decay as well
};

// LAMB (You et al. 2019) with apex FusedLAMB's AdamW-mode arithmetic, per parameter tensor:
//   m ← β1·m + β3·g,  v ← β2·v + (1−β2)·g²          (β3 = 1−β1 with grad averaging, else 1)
//   u ← (m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + eps) + wd·p     (bias correction optional)
//   p ← p − lr·(‖p‖/‖u‖)·u                            (trust ratio 1 when ‖p‖ or ‖u‖ is 0, or when wd = 0
//                                                      for the tensor and use_nvlamb is off)
// Unlike apex, global-norm clipping is not built in: call clip_grad_norm() first, as for AdamW (apex divides
// by norm/max_norm without the 1e-6). A shard must start and end on tensor boundaries, since the trust
// ratio needs whole-tensor norms. State layout and checkpoint accessors are as for AdamW.
class Lamb : public Optimizer {
 public:
  static constexpr size_t kAll = static_cast<size_t>(-1);

  Lamb(std::vector<ParamSpan> params, LambConfig config, size_t shard_begin = 0, size_t shard_end = kAll);

  void step(double lr, double weight_decay) override;

  std::string_view name() const override { return "lamb"; }
  const std::vector<ParamSpan>& params() const override { return params_; }
  bool holds_all() const override { return first_ == 0 && last_ == params_.size(); }
  std::map<std::string, std::string> hyperparameters() const override;
  const LambConfig& config() const { return config_; }
  size_t numel() const { return numel_; }
  int64_t steps() const override { return step_; }
  void set_steps(int64_t step) override { step_ = step; }
  std::span<float> exp_avg() { return m_; }
  std::span<float> exp_avg_sq() { return v_; }
  std::span<float> exp_avg_of(size_t i) override;
  std::span<float> exp_avg_sq_of(size_t i) override;

 private:
  std::vector<ParamSpan> params_;
  LambConfig config_;
  std::vector<size_t> offsets_;
  size_t numel_ = 0;
  size_t first_ = 0, last_ = 0;  // the tensors [first_, last_) this shard holds
  size_t shard_begin_ = 0;
  int64_t step_ = 0;
  std::vector<float> m_, v_;
};

}  // namespace lmforge::optim
