// defines: deepspeed_lr_at(), validate_deepspeed_lr() — DeepSpeed's warm-up schedulers, term for term
#include "optim/deepspeed_lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "util/error.h"

namespace lmforge::optim {
namespace {

int64_t warmup_steps(const DeepSpeedLr& s) { return std::max<int64_t>(2, s.warmup_num_steps); }

// DeepSpeed's warm-up fraction at iteration i < W (self.inverse_log_warm_up * log(i + 1), or i / W).
double warmup_gamma(const DeepSpeedLr& s, int64_t i) {
  const int64_t W = warmup_steps(s);
  if (s.warmup_type == "linear") return (double)i / (double)W;
  return (1.0 / std::log((double)W)) * std::log((double)(i + 1));
}

}  // namespace

double deepspeed_lr_at(const DeepSpeedLr& s, int64_t i) {
  const int64_t W = warmup_steps(s);
  if (s.type == "WarmupCosineLR") {
    if (i < 0) return 0.0;  // get_lr() before the first step: [0.0]
    double ratio;
    if (i < W) {
      ratio = s.warmup_min_ratio + warmup_gamma(s, i) * (1.0 - s.warmup_min_ratio);
    } else {
      const double real_last_step = (double)(i - W + 1), real_total_steps = (double)(s.total_num_steps - W);
      const double cosine = (1.0 + std::cos(std::numbers::pi * real_last_step / real_total_steps)) / 2.0;
      ratio = std::max(0.0, s.cos_min_ratio + (1.0 - s.cos_min_ratio) * cosine);
    }
    return s.optimizer_lr * ratio;
  }
  if (i < 0) return s.warmup_min_lr;  // get_lr() before the first step: the min_lrs
  double gamma = 1.0;
  if (i < W) {
    gamma = warmup_gamma(s, i);
  } else if (s.type == "WarmupDecayLR") {
    gamma = std::max(0.0, (double)(s.total_num_steps - i) / std::max(1.0, (double)(s.total_num_steps - W)));
  }
  return s.warmup_min_lr + (s.warmup_max_lr - s.warmup_min_lr) * gamma;
}

void validate_deepspeed_lr(const DeepSpeedLr& s) {
  if (s.type != "WarmupLR" && s.type != "WarmupDecayLR" && s.type != "WarmupCosineLR")
    throw Error("scheduler type '" + s.type + "': lmforge implements DeepSpeed's WarmupLR, WarmupDecayLR and "
                "WarmupCosineLR (LRRangeTest and OneCycle are not implemented)");
  if (s.warmup_type != "log" && s.warmup_type != "linear")
    throw Error("scheduler params.warmup_type '" + s.warmup_type + "': log or linear");
  if (s.warmup_num_steps < 0) throw Error("scheduler params.warmup_num_steps must be >= 0");
  if (s.type != "WarmupLR" && s.total_num_steps <= 0)
    throw Error("scheduler " + s.type + " needs params.total_num_steps > 0");
  if (s.type == "WarmupCosineLR" && s.total_num_steps <= warmup_steps(s))
    throw Error("scheduler WarmupCosineLR: params.total_num_steps " + std::to_string(s.total_num_steps) +
                " must exceed the warm-up steps " + std::to_string(warmup_steps(s)) +
                " (DeepSpeed divides by their difference)");
  if (!(s.warmup_min_lr >= 0.0) || !(s.warmup_max_lr >= 0.0)) throw Error("scheduler learning rates must be >= 0");
}

}  // namespace lmforge::optim
