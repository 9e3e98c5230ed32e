// defines: lmforge::optim::LossScaleOptions, LossScaler (Megatron's ConstantGradScaler / DynamicGradScaler),
//          round_to_f16_storage() (the fp16 storage of gradients before they are unscaled)
#pragma once
#include <cstddef>
#include <string>

#include "kernels/tensor.h"

namespace lmforge::optim {

// The scaler's settings under Megatron's flag names (megatron/training/arguments.py, _add_mixed_precision_args);
// train/mixed_precision.h fills them from --fp16 and the loss-scaling flags.
struct LossScaleOptions {
  bool enabled = false;                      // --fp16, or --bf16 with a static --loss-scale (fp32 and bf16
                                             // without it run with scale 1 and never skip)
  double loss_scale = 0.0;                   // --loss-scale: a static scale (0: dynamic)
  double initial_loss_scale = 4294967296.0;  // --initial-loss-scale (2^32)
  double min_loss_scale = 1.0;               // --min-loss-scale
  int loss_scale_window = 1000;              // --loss-scale-window: clean iterations before the scale doubles
  int hysteresis = 2;                        // --hysteresis: overflows tolerated before the scale halves
};

// Megatron's grad scalers (megatron/core/optimizer/grad_scaler.py). The loss is multiplied by scale() before the
// backward pass; the gradients are divided by it before the optimizer; update(found_inf) after every step:
//   static (--loss-scale S):  scale S always.
//   dynamic: on an overflow the growth tracker resets and the hysteresis tracker counts down; when it reaches 0
//            the scale halves (not below --min-loss-scale). After --loss-scale-window clean iterations in a row
//            the scale doubles and the hysteresis tracker is refilled.
//
// A run that cannot make progress is stopped rather than left to skip every remaining iteration (stalled()):
//   static: after kMaxConsecutiveSkips overflowing iterations in a row (the scale never changes, so neither will
//           the outcome);
//   dynamic: at an overflow that would halve the scale when it is at --min-loss-scale already (DeepSpeed's
//            DynamicLossScaler raises there too: "Current loss scale already at minimum").
class LossScaler {
 public:
  static constexpr int kMaxConsecutiveSkips = 100;

  explicit LossScaler(const LossScaleOptions& o);
  // --fp16, or a static --loss-scale with --bf16 (Megatron's ConstantGradScaler); otherwise scale 1, never skipping.
  bool active() const { return active_; }
  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  void update(bool found_inf);
  // After update(): why training cannot go on at this scale ("" while it can), naming the flags to change.
  std::string stalled() const;
  // "scale growth_tracker hysteresis_tracker" (%.17g), restored exactly by load(); Error for a malformed text.
  std::string save() const;
  void load(const std::string& text);

 private:
  bool active_ = false, dynamic_ = false;
  double scale_ = 1.0, min_scale_ = 1.0;
  int window_ = 1000, hysteresis_ = 2;
  int growth_tracker_ = 0, hysteresis_tracker_ = 2;
  int consecutive_skips_ = 0;       // overflowing iterations in a row
  bool overflow_at_minimum_ = false;  // the last update() wanted to halve a scale already at its minimum
};

// g ← fp32(fp16(g)) in place: the fp16 storage of the gradients before they are unscaled (overflow → inf, tiny
// values → subnormals or 0), as Megatron's fp16 model gradients hold them.
// The kernel op kernels::round_to_f16_storage over a flat f32 device view.
void round_to_f16_storage(const kernels::Tensor& g);

}  // namespace lmforge::optim
