// defines: lmforge::optim::DeepSpeedLr, deepspeed_lr_at(): DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR
//          (deepspeed/runtime/lr_schedules.py) for a `scheduler` block of a DeepSpeed JSON config
#pragma once
#include <cstdint>
#include <string>

namespace lmforge::optim {

// A DeepSpeed `scheduler` block: "type" and its "params", with DeepSpeed's defaults.
struct DeepSpeedLr {
  std::string type;                 // WarmupLR, WarmupDecayLR or WarmupCosineLR
  double warmup_min_lr = 0.0;       // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 0.001;     // WarmupLR, WarmupDecayLR (the peak)
  int64_t warmup_num_steps = 1000;  // all three (DeepSpeed uses max(2, this))
  std::string warmup_type = "log";  // log or linear
  int64_t total_num_steps = 0;      // WarmupDecayLR, WarmupCosineLR
  double warmup_min_ratio = 0.0;    // WarmupCosineLR: the warm-up starts at this fraction of the optimizer's lr
  double cos_min_ratio = 0.0001;    // WarmupCosineLR: the cosine ends at this fraction
  double optimizer_lr = 0.0;        // WarmupCosineLR: the optimizer's own lr (org_lr), which it scales
};

// The learning rate DeepSpeed's scheduler holds after last_batch_iteration (its step counter; DeepSpeed steps the
// scheduler after every optimizer step, so optimizer step k, counted from 0, runs with last_batch_iteration = k-1).
// With W = max(2, warmup_num_steps) and i = last_batch_iteration:
//   gamma(i) = log(i+1)/log(W) (log) or i/W (linear) while i < W
//   WarmupLR:       min_lr + (max_lr - min_lr)·(gamma(i) while warming up, else 1)
//   WarmupDecayLR:  the same, after warm-up max(0, (T - i)/max(1, T - W)) in place of 1   (T = total_num_steps)
//   WarmupCosineLR: lr·r with r = min_ratio + (1 - min_ratio)·gamma(i) while warming up, else
//                   max(0, c + (1 - c)·(1 + cos(pi·(i - W + 1)/(T - W)))/2)           (c = cos_min_ratio)
// Before the first step (i = -1) WarmupLR and WarmupDecayLR hold warmup_min_lr, WarmupCosineLR 0.
double deepspeed_lr_at(const DeepSpeedLr& s, int64_t last_batch_iteration);

// Throws lmforge::Error naming the parameter (unknown type or warmup_type, negative steps, T <= W for cosine).
void validate_deepspeed_lr(const DeepSpeedLr& s);

}  // namespace lmforge::optim
