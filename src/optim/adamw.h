// defines: lmforge::optim::AdamWConfig, AdamW, adamw_update()
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optim/clip_grad.h"  // the clipping that goes with it (callers include adamw.h for both)
#include "optim/optimizer.h"

namespace lmforge::optim {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// One AdamW step on n elements, exactly torch.optim.AdamW (PyTorch 1.13, single-tensor path) in fp32:
//   p  ← p·(1 − lr·wd)                              (decoupled decay first, on the old p)
//   m  ← β1·m + (1−β1)·g ;  v ← β2·v + (1−β2)·g²
//   p  ← p − (lr/(1−β1ᵗ)) · m / (√v/√(1−β2ᵗ) + eps)
// t is the step number, counted from 1. Scalars are formed in double and rounded to float once, as torch
// does when it passes Python floats to its fp32 kernels.
void adamw_update(float* param, const float* grad, float* m, float* v, size_t n, double lr, double weight_decay,
                  const AdamWConfig& config, int64_t step);

// AdamW over a list of parameter spans that together form one flat index space (the spans in order).
// The optimizer owns m and v for the slice [shard_begin, shard_end) of that space only, so a distributed
// (ZeRO-1) optimizer can give each rank its own slice; the default slice is everything.
class AdamW : public Optimizer {
 public:
  static constexpr size_t kAll = static_cast<size_t>(-1);

  AdamW(std::vector<ParamSpan> params, AdamWConfig config, size_t shard_begin = 0, size_t shard_end = kAll);

  // Advances the step counter and updates this optimizer's slice with the given lr and weight decay
  // (spans with weight_decay == false use 0). OpenMP-parallel over elements.
  void step(double lr, double weight_decay) override;

  std::string_view name() const override { return "adamw"; }
  const std::vector<ParamSpan>& params() const override { return params_; }
  bool holds_all() const override { return shard_begin_ == 0 && shard_end_ == numel_; }
  std::map<std::string, std::string> hyperparameters() const override;
  const AdamWConfig& config() const { return config_; }
  size_t numel() const { return numel_; }            // size of the whole flat index space
  size_t shard_begin() const { return shard_begin_; }
  size_t shard_end() const { return shard_end_; }
  size_t param_offset(size_t i) const { return offsets_[i]; }  // start of params()[i] in the flat space

  // State for checkpoints: steps taken so far, and m/v over [shard_begin, shard_end) (exp_avg and
  // exp_avg_sq in torch's names). Writable so a checkpoint can restore them.
  int64_t steps() const override { return step_; }
  void set_steps(int64_t step) override { step_ = step; }
  std::span<float> exp_avg() { return m_; }
  std::span<float> exp_avg_sq() { return v_; }
  std::span<const float> exp_avg() const { return m_; }
  std::span<const float> exp_avg_sq() const { return v_; }
  // m or v of parameter i restricted to this shard: empty when the parameter lies outside the shard.
  std::span<float> exp_avg_of(size_t i) override;
  std::span<float> exp_avg_sq_of(size_t i) override;

 private:
  std::span<float> state_of(std::vector<float>& state, size_t i);

  std::vector<ParamSpan> params_;
  AdamWConfig config_;
  std::vector<size_t> offsets_;  // params_.size() + 1 prefix sums
  size_t numel_ = 0;
  size_t shard_begin_ = 0;
  size_t shard_end_ = 0;
  int64_t step_ = 0;
  std::vector<float> m_;
  std::vector<float> v_;
};

}  // namespace lmforge::optim
