// defines: OptimizerParamScheduler — Megatron-LM's get_lr/get_wd, step counting in samples, flag resolution
#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <sstream>

#include "util/error.h"

namespace lmforge::optim {

namespace {

std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

bool known_decay_style(const std::string& s) {
  if (s.rfind("deepspeed-", 0) == 0) return true;  // a DeepSpeed scheduler (deepspeed_lr.h) set the rate
  return s == "constant" || s == "linear" || s == "cosine" || s == "inverse-square-root" || s == "nvidia-poly-warmup" ||
         s == "fairseq-polynomial-decay";
}
bool known_incr_style(const std::string& s) { return s == "constant" || s == "linear" || s == "cosine"; }

}  // namespace

OptimizerParamScheduler::OptimizerParamScheduler(double init_lr, double max_lr, double min_lr, double lr_warmup_steps,
                                                 int64_t lr_decay_steps, const std::string& lr_decay_style,
                                                 double start_wd, double end_wd, int64_t wd_incr_steps,
                                                 const std::string& wd_incr_style, int64_t samples_per_step,
                                                 double power)
    : init_lr_(init_lr),
      max_lr_(max_lr),
      min_lr_(min_lr),
      lr_warmup_steps_(lr_warmup_steps),
      lr_decay_steps_(lr_decay_steps),
      lr_decay_style_(lr_decay_style),
      start_wd_(start_wd),
      end_wd_(end_wd),
      wd_incr_steps_(wd_incr_steps),
      wd_incr_style_(wd_incr_style),
      samples_per_step_(samples_per_step),
      power_(power) {
  validate();
}

// Megatron's get_optimizer_param_scheduler plus the checks its arguments.py makes on these flags.
OptimizerParamScheduler::OptimizerParamScheduler(const LrScheduleArgs& a) {
  if (a.global_batch_size <= 0) throw Error("--global-batch-size must be positive");
  if (a.lr_warmup_iters < 0 || a.lr_warmup_samples < 0) throw Error("warm-up iterations/samples must be >= 0");
  if (a.lr_warmup_fraction && (*a.lr_warmup_fraction < 0.0 || *a.lr_warmup_fraction > 1.0))
    throw Error("--lr-warmup-fraction must lie in [0, 1], got " + num(*a.lr_warmup_fraction));
  const bool by_iters = a.train_iters && *a.train_iters > 0;
  const bool by_samples = a.train_samples && *a.train_samples > 0;
  if (by_iters == by_samples) throw Error("give exactly one of --train-iters and --train-samples (positive)");
  int64_t decay_steps = 0, incr_steps = 0;
  double warmup_steps = 0.0;
  if (by_iters) {
    if (a.lr_decay_samples) throw Error("--lr-decay-samples needs sample-based training (--train-samples)");
    if (a.lr_warmup_samples != 0) throw Error("--lr-warmup-samples needs sample-based training (--train-samples)");
    if (a.lr_warmup_fraction && a.lr_warmup_iters != 0)
      throw Error("give only one of --lr-warmup-fraction and --lr-warmup-iters");
    const int64_t decay_iters = a.lr_decay_iters.value_or(*a.train_iters);
    decay_steps = decay_iters * a.global_batch_size;
    incr_steps = *a.train_iters * a.global_batch_size;
    warmup_steps = a.lr_warmup_fraction ? *a.lr_warmup_fraction * static_cast<double>(decay_steps)
                                        : static_cast<double>(a.lr_warmup_iters * a.global_batch_size);
  } else {
    if (a.lr_decay_iters) throw Error("--lr-decay-iters needs iteration-based training (--train-iters)");
    if (a.lr_warmup_iters != 0) throw Error("--lr-warmup-iters needs iteration-based training (--train-iters)");
    if (a.lr_warmup_fraction && a.lr_warmup_samples != 0)
      throw Error("give only one of --lr-warmup-fraction and --lr-warmup-samples");
    decay_steps = a.lr_decay_samples.value_or(*a.train_samples);
    incr_steps = *a.train_samples;
    warmup_steps = a.lr_warmup_fraction ? *a.lr_warmup_fraction * static_cast<double>(decay_steps)
                                        : static_cast<double>(a.lr_warmup_samples);
  }
  init_lr_ = a.lr_warmup_init;
  max_lr_ = a.lr;
  min_lr_ = a.min_lr;
  lr_warmup_steps_ = warmup_steps;
  lr_decay_steps_ = decay_steps;
  lr_decay_style_ = a.lr_decay_style;
  start_wd_ = a.start_weight_decay.value_or(a.weight_decay);
  end_wd_ = a.end_weight_decay.value_or(a.weight_decay);
  wd_incr_steps_ = incr_steps;
  wd_incr_style_ = a.weight_decay_incr_style;
  samples_per_step_ = a.global_batch_size;
  power_ = a.lr_decay_power;
  if (a.deepspeed_lr) {
    validate_deepspeed_lr(*a.deepspeed_lr);
    deepspeed_lr_ = a.deepspeed_lr;
    lr_decay_style_ = "deepspeed-" + a.deepspeed_lr->type;  // what a checkpoint records and compares
  }
  validate();
}

void OptimizerParamScheduler::validate() const {
  if (!known_decay_style(lr_decay_style_))
    throw Error("--lr-decay-style: unknown style '" + lr_decay_style_ +
                "' (constant, linear, cosine, inverse-square-root, nvidia-poly-warmup or fairseq-polynomial-decay)");
  if (lr_decay_style_ == "fairseq-polynomial-decay") {
    if (init_lr_ != 0.0)
      throw Error("fairseq's polynomial_decay warms up from 0 (its first update has lr 0); --lr-warmup-init " +
                  num(init_lr_) + " does not apply (leave it at 0)");
    if (!(power_ > 0.0)) throw Error("--power must be positive, got " + num(power_));
    if (samples_per_step_ <= 0) throw Error("fairseq-polynomial-decay: samples per step must be positive");
  } else if (power_ != 1.0) {
    throw Error("--power " + num(power_) + " applies to fairseq's --lr-scheduler polynomial_decay only");
  }
  if (lr_decay_style_ == "nvidia-poly-warmup") {
    if (min_lr_ != 0.0)
      throw Error("--lr-decay-style nvidia-poly-warmup decays to 0 as NVIDIA's PolyWarmUpScheduler does; --min-lr " +
                  num(min_lr_) + " does not apply (leave it at 0)");
    if (init_lr_ != 0.0)
      throw Error("--lr-decay-style nvidia-poly-warmup warms up from 0 as NVIDIA's PolyWarmUpScheduler does; "
                  "--lr-warmup-init " + num(init_lr_) + " does not apply (leave it at 0)");
    if (samples_per_step_ <= 0) throw Error("nvidia-poly-warmup: samples per step must be positive");
  }
  if (!known_incr_style(wd_incr_style_))
    throw Error("--weight-decay-incr-style: unknown style '" + wd_incr_style_ + "' (constant, linear or cosine)");
  if (!(min_lr_ >= 0.0)) throw Error("--min-lr must be >= 0, got " + num(min_lr_));
  if (!(max_lr_ >= min_lr_)) throw Error("--lr (" + num(max_lr_) + ") must be >= --min-lr (" + num(min_lr_) + ")");
  if (!(init_lr_ <= max_lr_))
    throw Error("--lr-warmup-init (" + num(init_lr_) + ") must be <= --lr (" + num(max_lr_) + ")");
  if (lr_decay_steps_ <= 0) throw Error("the LR decay length must be positive (--lr-decay-iters/-samples)");
  if (!(lr_warmup_steps_ < static_cast<double>(lr_decay_steps_)))
    throw Error("the LR warm-up (" + num(lr_warmup_steps_) + " samples) must be shorter than the decay (" +
                std::to_string(lr_decay_steps_) + " samples)");
  if (!(start_wd_ >= 0.0)) throw Error("--start-weight-decay must be >= 0, got " + num(start_wd_));
  if (!(end_wd_ >= start_wd_)) throw Error("--end-weight-decay must be >= --start-weight-decay");
  if (wd_incr_style_ == "constant" && start_wd_ != end_wd_)
    throw Error("--weight-decay-incr-style constant needs --start-weight-decay == --end-weight-decay");
  if (wd_incr_style_ != "constant" && wd_incr_steps_ <= 0) throw Error("weight-decay increment length must be > 0");
}

namespace {

// NVIDIA DLE's PolyWarmUpScheduler.get_lr (schedulers.py), term for term, with k/T and the warm-up fraction
// formed from sample counts (both exact integers, so x is the same double as k/T; see the header).
double nvidia_poly_warmup_lr(double max_lr, double warmup_steps, int64_t decay_steps, int64_t next_step_end) {
  if (next_step_end > decay_steps) return 0.0;  // past total_steps: (1 − x)^0.5 has no real value
  const double total = static_cast<double>(decay_steps);
  const double progress = static_cast<double>(next_step_end) / total;
  const double warmup = warmup_steps / total;
  if (progress < warmup) return max_lr * progress / warmup;
  return max_lr * std::pow(1.0 - progress, 0.5);
}

// fairseq's PolynomialDecayLRSchedule.step_update(num_updates), term for term (see the header); steps in samples.
double fairseq_polynomial_lr(double max_lr, double end_lr, double power, double warmup_steps, int64_t total_steps,
                             int64_t num_steps) {
  const double n = static_cast<double>(num_steps);
  if (warmup_steps > 0 && n <= warmup_steps) return (n / warmup_steps) * max_lr;  // warmup_factor · lr
  if (num_steps >= total_steps) return end_lr;
  const double lr_range = max_lr - end_lr;
  const double pct_remaining = 1 - (n - warmup_steps) / (static_cast<double>(total_steps) - warmup_steps);
  return lr_range * std::pow(pct_remaining, power) + end_lr;
}

}  // namespace

// Megatron's get_lr, term for term (the same double operations in the same order).
double OptimizerParamScheduler::lr_at(int64_t num_steps) const {
  // DeepSpeed steps its scheduler once per optimizer step: after n steps its last_batch_iteration is n - 1.
  if (deepspeed_lr_) return deepspeed_lr_at(*deepspeed_lr_, num_steps / samples_per_step_ - 1);
  if (lr_decay_style_ == "nvidia-poly-warmup")
    return nvidia_poly_warmup_lr(max_lr_, lr_warmup_steps_, lr_decay_steps_, num_steps + samples_per_step_);
  if (lr_decay_style_ == "fairseq-polynomial-decay")
    return fairseq_polynomial_lr(max_lr_, min_lr_, power_, lr_warmup_steps_, lr_decay_steps_, num_steps);
  const double steps = static_cast<double>(num_steps);
  // Linear warm-up from init_lr, including the step that reaches the peak.
  if (lr_warmup_steps_ > 0 && steps <= lr_warmup_steps_)
    return init_lr_ + (max_lr_ - init_lr_) * steps / lr_warmup_steps_;
  if (lr_decay_style_ == "constant") return max_lr_;
  if (num_steps > lr_decay_steps_) return min_lr_;
  if (lr_decay_style_ == "inverse-square-root") {
    const double warmup = std::max(lr_warmup_steps_, 1.0);
    const double n = std::max(steps, 1.0);
    const double lr = max_lr_ * std::pow(warmup, 0.5) / std::pow(n, 0.5);
    return std::max(min_lr_, lr);
  }
  const double decay_ratio = (steps - lr_warmup_steps_) / (static_cast<double>(lr_decay_steps_) - lr_warmup_steps_);
  const double delta_lr = max_lr_ - min_lr_;
  const double coeff = lr_decay_style_ == "linear" ? 1.0 - decay_ratio
                                                   : 0.5 * (std::cos(std::numbers::pi * decay_ratio) + 1.0);
  return min_lr_ + coeff * delta_lr;
}

double OptimizerParamScheduler::wd_at(int64_t num_steps) const {
  if (num_steps > wd_incr_steps_) return end_wd_;
  if (wd_incr_style_ == "constant") return end_wd_;
  const double incr_ratio = static_cast<double>(num_steps) / static_cast<double>(wd_incr_steps_);
  const double delta_wd = end_wd_ - start_wd_;
  const double coeff =
      wd_incr_style_ == "linear" ? incr_ratio : 0.5 * (std::cos(std::numbers::pi * (1 - incr_ratio)) + 1.0);
  return start_wd_ + coeff * delta_wd;
}

SchedulerState OptimizerParamScheduler::state() const {
  return SchedulerState{max_lr_,   min_lr_, lr_warmup_steps_, lr_decay_steps_, lr_decay_style_, num_steps_,
                        start_wd_, end_wd_, wd_incr_steps_,   wd_incr_style_};
}

void OptimizerParamScheduler::load_state(const SchedulerState& s, LoadMode mode) {
  if (mode == LoadMode::kCheck) {
    auto check = [](bool same, const std::string& what, const std::string& ours, const std::string& theirs) {
      if (!same)
        throw Error("checkpoint's " + what + " (" + theirs + ") differs from this run's (" + ours +
                    "); pass --override-opt_param-scheduler to continue with this run's schedule, or "
                    "--use-checkpoint-opt_param-scheduler to continue with the checkpoint's");
    };
    check(s.max_lr == max_lr_, "learning rate", num(max_lr_), num(s.max_lr));
    check(s.min_lr == min_lr_, "minimum learning rate", num(min_lr_), num(s.min_lr));
    check(s.lr_warmup_steps == lr_warmup_steps_, "warm-up samples", num(lr_warmup_steps_), num(s.lr_warmup_steps));
    check(s.lr_decay_steps == lr_decay_steps_, "decay samples", std::to_string(lr_decay_steps_),
          std::to_string(s.lr_decay_steps));
    check(s.lr_decay_style == lr_decay_style_, "LR decay style", lr_decay_style_, s.lr_decay_style);
    check(s.start_wd == start_wd_, "start weight decay", num(start_wd_), num(s.start_wd));
    check(s.end_wd == end_wd_, "end weight decay", num(end_wd_), num(s.end_wd));
    check(s.wd_incr_steps == wd_incr_steps_, "weight-decay increment samples", std::to_string(wd_incr_steps_),
          std::to_string(s.wd_incr_steps));
    check(s.wd_incr_style == wd_incr_style_, "weight-decay increment style", wd_incr_style_, s.wd_incr_style);
  } else if (mode == LoadMode::kUseCheckpoint) {
    OptimizerParamScheduler restored(init_lr_, s.max_lr, s.min_lr, s.lr_warmup_steps, s.lr_decay_steps,
                                     s.lr_decay_style, s.start_wd, s.end_wd, s.wd_incr_steps, s.wd_incr_style,
                                     samples_per_step_, power_);
    if (s.lr_decay_style == lr_decay_style_) restored.deepspeed_lr_ = deepspeed_lr_;
    else if (s.lr_decay_style.rfind("deepspeed-", 0) == 0)
      throw Error("checkpoint's learning rate came from a DeepSpeed scheduler (" + s.lr_decay_style +
                  "); give the same DeepSpeed config to continue with it");
    *this = restored;
  }
  if (s.num_steps < 0) throw Error("checkpoint's scheduler step count is negative");
  num_steps_ = s.num_steps;
}

}  // namespace lmforge::optim
