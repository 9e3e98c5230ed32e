// defines: LossScaler, round_to_f16_storage()
#include "optim/grad_scaler.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::optim {

LossScaler::LossScaler(const LossScaleOptions& o) {
  active_ = o.enabled;
  if (!active_) return;
  dynamic_ = o.loss_scale <= 0.0;
  scale_ = dynamic_ ? o.initial_loss_scale : o.loss_scale;
  min_scale_ = o.min_loss_scale;
  window_ = o.loss_scale_window;
  hysteresis_ = hysteresis_tracker_ = o.hysteresis;
}

void LossScaler::update(bool found_inf) {
  if (!active_) return;
  consecutive_skips_ = found_inf ? consecutive_skips_ + 1 : 0;
  overflow_at_minimum_ = false;
  if (!dynamic_) return;
  if (found_inf) {
    growth_tracker_ = 0;
    hysteresis_tracker_--;
    if (hysteresis_tracker_ <= 0) {
      overflow_at_minimum_ = scale_ <= min_scale_;
      scale_ = std::max(scale_ * 0.5, min_scale_);
    }
    return;
  }
  growth_tracker_++;
  if (growth_tracker_ == window_) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = hysteresis_;
    scale_ *= 2.0;
  }
}

std::string LossScaler::stalled() const {
  char text[512];
  if (!dynamic_ && consecutive_skips_ >= kMaxConsecutiveSkips) {
    std::snprintf(text, sizeof text,
                  "%d iterations in a row were skipped: the gradients overflow at the static loss scale %g every "
                  "time (--loss-scale), so the weights no longer change; lower --loss-scale, or drop it for dynamic "
                  "loss scaling (a run stops after %d consecutive skipped iterations with a static scale)",
                  consecutive_skips_, scale_, kMaxConsecutiveSkips);
    return text;
  }
  if (dynamic_ && overflow_at_minimum_) {
    std::snprintf(text, sizeof text,
                  "the gradients overflowed with the dynamic loss scale at its minimum %g (--min-loss-scale), which "
                  "cannot be lowered further (%d iterations in a row skipped; DeepSpeed stops here too): training "
                  "has diverged; lower --lr, or lower --min-loss-scale",
                  scale_, consecutive_skips_);
    return text;
  }
  return "";
}

std::string LossScaler::save() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g %d %d", scale_, growth_tracker_, hysteresis_tracker_);
  return buf;
}

void LossScaler::load(const std::string& text) {
  std::istringstream in(text);
  double scale = 0;
  int growth = 0, hysteresis = 0;
  if (!(in >> scale >> growth >> hysteresis) || !(scale > 0.0))
    throw Error("grad scaler state \"" + text + "\" is not \"scale growth_tracker hysteresis_tracker\"");
  if (!active_) return;
  if (!dynamic_) return;  // a static --loss-scale wins, as Megatron's ConstantGradScaler ignores the saved state
  scale_ = scale;
  growth_tracker_ = growth;
  hysteresis_tracker_ = hysteresis;
}

void round_to_f16_storage(const kernels::Tensor& g) {
  if (g.numel() > 0) kernels::round_to_f16_storage(g);
}

}  // namespace lmforge::optim
