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

// AdamW over a slice of the flat index space (see Optimizer). State: "exp_avg" (m) and "exp_avg_sq" (v). The
// update is element-wise, so the whole step happens in begin_step().
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamSpan> params, AdamWConfig config, size_t shard_begin = 0, size_t shard_end = kAll);

  std::string_view name() const override { return "adamw"; }
  std::map<std::string, std::string> hyperparameters() const override;
  // Advances the step counter and updates this optimizer's slice (OpenMP-parallel over blocks).
  void begin_step(double lr, double weight_decay, std::span<double> sums) override;
  void finish_step(double, double, std::span<const double>) override {}
  const AdamWConfig& config() const { return config_; }

  // Host copies (checks, tests; the state itself is device memory: state(), state_of()): m and v over the slice,
  // and of parameter i within the slice (torch's exp_avg / exp_avg_sq).
  std::vector<float> exp_avg() const { return state_values(0); }
  std::vector<float> exp_avg_sq() const { return state_values(1); }
  std::vector<float> exp_avg_of(size_t i) const { return state_values_of(0, i); }
  std::vector<float> exp_avg_sq_of(size_t i) const { return state_values_of(1, i); }

 private:
  AdamWConfig config_;
};

}  // namespace lmforge::optim
