// defines: lmforge::optim::LambConfig, Lamb — layer-wise adaptive moments (LAMB) as in NVIDIA apex's FusedLAMB
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "optim/clip_grad.h"
#include "optim/optimizer.h"

namespace lmforge::optim {

struct LambConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;             // apex FusedLAMB's default (the trainer passes --adam-eps)
  bool bias_correction = true;
  bool grad_averaging = true;    // m uses (1−β1)·g; false: m uses g
  bool use_nvlamb = false;       // true (--lamb-all-tensors): the trust ratio also for tensors without weight decay
};

// LAMB (You et al. 2019) with apex FusedLAMB's AdamW-mode arithmetic (fp32 per element), per parameter tensor:
//   m ← β1·m + β3·g,  v ← β2·v + (1−β2)·g²          (β3 = 1−β1 with grad averaging, else 1)
//   u ← (m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + eps) + wd·p     (bias correction optional; decoupled decay inside u)
//   p ← p − lr·(‖p‖/‖u‖)·u                            (‖p‖ before the update; trust ratio 1 when ‖p‖ or ‖u‖ is
//                                                      0, or when the tensor has no decay and use_nvlamb is off)
// t counts steps from 1 (apex counts per param group; here every tensor steps together, so it is the same).
// Unlike apex, global-norm clipping is not built in: call clip_grad_norm() first, as for AdamW (apex divides by
// norm/max_norm without the 1e-6).
//
// The norms are the WHOLE tensor's: begin_step() updates m and v and returns Σp² and Σu² over the owned elements
// of each tensor (accumulated in double), and finish_step() takes the sums over all pieces of the tensor, so a
// slice may cut a tensor anywhere (ZeRO-1 shards), and a tensor-parallel caller can add the pieces held by other
// ranks. u is recomputed in finish_step() from the stored moments with the same float operations, so both phases
// see identical bits. State: "exp_avg" (m), "exp_avg_sq" (v).
class Lamb : public Optimizer {
 public:
  Lamb(std::vector<ParamSpan> params, LambConfig config, size_t shard_begin = 0, size_t shard_end = kAll);

  std::string_view name() const override { return "lamb"; }
  std::map<std::string, std::string> hyperparameters() const override;
  bool needs_tensor_norms() const override { return true; }
  void begin_step(double lr, double weight_decay, std::span<double> sums) override;
  void finish_step(double lr, double weight_decay, std::span<const double> sums) override;
  const LambConfig& config() const { return config_; }

  // Host copies (checks, tests; the state itself is device memory: state(), state_of()): m and v over the slice,
  // and of parameter i within the slice (torch's exp_avg / exp_avg_sq).
  std::vector<float> exp_avg() const { return state_values(0); }
  std::vector<float> exp_avg_sq() const { return state_values(1); }
  std::vector<float> exp_avg_of(size_t i) const { return state_values_of(0, i); }
  std::vector<float> exp_avg_sq_of(size_t i) const { return state_values_of(1, i); }

 private:
  kernels::LambScalars scalars() const;  // for the current step_ (the per-element arithmetic: kernels/ops.h)
  // Per tensor: its decay and whether its trust ratio applies.
  std::vector<kernels::LambTensor> tensors(double weight_decay) const;
  void whole_step(double lr, double weight_decay) override;

  LambConfig config_;
};

}  // namespace lmforge::optim
