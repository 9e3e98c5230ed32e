// defines: lmforge::optim::LrScheduleArgs, SchedulerState, OptimizerParamScheduler (Megatron's LR and weight-decay
//   schedule, plus NVIDIA DLE BERT's PolyWarmUpScheduler as the decay style "nvidia-poly-warmup" and fairseq's
//   PolynomialDecayLRSchedule as "fairseq-polynomial-decay")
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "optim/deepspeed_lr.h"

namespace lmforge::optim {

// Megatron-LM's flags for the schedule, with Megatron's defaults. Give exactly one of train_iters or
// train_samples; the other flags follow Megatron's rules (iteration-based runs use the *_iters flags,
// sample-based runs the *_samples flags; --lr-warmup-fraction excludes the other warm-up flags).
struct LrScheduleArgs {
  double lr = 0.0;                       // --lr (the peak, max_lr)
  double min_lr = 0.0;                   // --min-lr
  double lr_warmup_init = 0.0;           // --lr-warmup-init (warm-up starts here)
  std::string lr_decay_style = "linear"; // --lr-decay-style constant|linear|cosine|inverse-square-root|
                                         //   nvidia-poly-warmup, or fairseq-polynomial-decay (reached through
                                         //   fairseq's --lr-scheduler polynomial_decay; see lr_at())
  double lr_decay_power = 1.0;           // fairseq's --power (fairseq-polynomial-decay only)
  std::optional<int64_t> train_iters;    // --train-iters
  std::optional<int64_t> train_samples;  // --train-samples
  int64_t global_batch_size = 1;         // --global-batch-size
  std::optional<int64_t> lr_decay_iters;    // --lr-decay-iters (default: train_iters)
  std::optional<int64_t> lr_decay_samples;  // --lr-decay-samples (default: train_samples)
  std::optional<double> lr_warmup_fraction; // --lr-warmup-fraction (of the decay steps)
  int64_t lr_warmup_iters = 0;              // --lr-warmup-iters
  int64_t lr_warmup_samples = 0;            // --lr-warmup-samples
  double weight_decay = 0.01;                       // --weight-decay
  std::optional<double> start_weight_decay;         // --start-weight-decay (default: weight_decay)
  std::optional<double> end_weight_decay;           // --end-weight-decay (default: weight_decay)
  std::string weight_decay_incr_style = "constant"; // --weight-decay-incr-style constant|linear|cosine
  std::optional<DeepSpeedLr> deepspeed_lr;          // a DeepSpeed config's `scheduler` block: its learning rate
                                                    // replaces Megatron's (the weight decay stays Megatron's)
};

// What a checkpoint keeps: Megatron's OptimizerParamScheduler.state_dict() fields.
struct SchedulerState {
  double max_lr = 0.0;
  double min_lr = 0.0;
  double lr_warmup_steps = 0.0;  // a fraction of the decay steps need not be whole
  int64_t lr_decay_steps = 0;
  std::string lr_decay_style;
  int64_t num_steps = 0;
  double start_wd = 0.0;
  double end_wd = 0.0;
  int64_t wd_incr_steps = 0;
  std::string wd_incr_style;
};

// Megatron's OptimizerParamScheduler, counting steps in samples: num_steps grows by the global batch size
// per iteration. How the trainer calls it (this reproduces Megatron, where the scheduler is stepped after
// the optimizer, so optimizer step k uses lr at num_steps = (k−1)·global_batch_size and with warm-up the
// very first update has lr = lr_warmup_init, i.e. 0 by default):
//
//   OptimizerParamScheduler sched(args);            // num_steps 0 (or load_state() when resuming)
//   for each iteration:
//     forward/backward, clip_grad_norm(...)
//     adamw.step(sched.lr(), sched.weight_decay());
//     sched.step(args.global_batch_size);          // Megatron: num_microbatches·micro_batch·data_parallel
//     log sched.lr()                                // Megatron logs the lr the *next* iteration will use
class OptimizerParamScheduler {
 public:
  // Resolves warm-up/decay/increment steps from the flags as Megatron's get_optimizer_param_scheduler
  // does; throws Error for invalid or conflicting flags (naming them).
  explicit OptimizerParamScheduler(const LrScheduleArgs& args);
  // Direct form with steps already in samples (Megatron's constructor). samples_per_step: what step() adds per
  // optimizer step (the global batch size); only nvidia-poly-warmup reads it.
  OptimizerParamScheduler(double init_lr, double max_lr, double min_lr, double lr_warmup_steps,
                          int64_t lr_decay_steps, const std::string& lr_decay_style, double start_wd, double end_wd,
                          int64_t wd_incr_steps, const std::string& wd_incr_style, int64_t samples_per_step = 1,
                          double power = 1.0);

  double lr() const { return lr_at(num_steps_); }
  double weight_decay() const { return wd_at(num_steps_); }
  // Megatron's get_lr with num_steps in place of self.num_steps; for nvidia-poly-warmup, NVIDIA DLE BERT's
  // PolyWarmUpScheduler (schedulers.py, degree 0.5), which its run_pretraining.py steps just before each optimizer
  // step with k = the number of the step about to be taken (1 for the first) and T = total steps:
  //   x = k/T;  lr = max_lr·x/w if x < w (w = the warm-up fraction), else max_lr·(1 − x)^0.5
  // In samples, as this class counts: k/T = (num_steps + samples_per_step)/lr_decay_steps and
  // w = lr_warmup_steps/lr_decay_steps (--lr-warmup-fraction, or --lr-warmup-iters/-samples over the decay). The
  // warm-up ends at max_lr·x/w ≤ max_lr and the decay starts at max_lr·(1 − w)^0.5: a drop (15% for NVIDIA's
  // w = 0.2843) kept on purpose. The last step (k = T) has lr 0, and so does any step past T (NVIDIA's formula
  // has no value there). Warm-up starts at 0 and the decay ends at 0: --lr-warmup-init and --min-lr must be 0.
  // For fairseq-polynomial-decay, fairseq's PolynomialDecayLRSchedule.step_update(u), which fairseq's trainer calls
  // with u = 0 when it builds the optimizer and with u = the new update count after each update, so update u + 1
  // runs with lr(u); here u = num_steps / samples_per_step, W = warm-up updates, T = total updates (--lr-decay-iters
  // or fairseq's --total-num-update), end = min_lr (fairseq's --end-learning-rate), p = the power:
  //   u ≤ W (W > 0): lr = (u/W)·max_lr          (so the first update has lr 0, as in fairseq)
  //   u ≥ T:         lr = end
  //   else:          lr = (max_lr − end)·(1 − (u − W)/(T − W))^p + end
  // Ratios are formed from sample counts (u·B over W·B: the same exact ratio, so the same double as fairseq's).
  double lr_at(int64_t num_steps) const;
  double wd_at(int64_t num_steps) const;  // Megatron's get_wd
  void step(int64_t increment) { num_steps_ += increment; }
  int64_t num_steps() const { return num_steps_; }

  SchedulerState state() const;
  // Restores num_steps from a checkpoint. Like Megatron: by default (neither flag) every schedule value in
  // the checkpoint must equal this scheduler's (else Error naming the value); use_checkpoint takes the
  // checkpoint's values (--use-checkpoint-opt_param-scheduler); override keeps ours
  // (--override-opt_param-scheduler).
  enum class LoadMode { kCheck, kUseCheckpoint, kOverride };
  void load_state(const SchedulerState& state, LoadMode mode = LoadMode::kCheck);

 private:
  void validate() const;

  double init_lr_ = 0.0, max_lr_ = 0.0, min_lr_ = 0.0;
  double lr_warmup_steps_ = 0.0;
  int64_t lr_decay_steps_ = 0;
  std::string lr_decay_style_;
  double start_wd_ = 0.0, end_wd_ = 0.0;
  int64_t wd_incr_steps_ = 0;
  std::string wd_incr_style_;
  int64_t samples_per_step_ = 1;
  double power_ = 1.0;
  int64_t num_steps_ = 0;
  std::optional<DeepSpeedLr> deepspeed_lr_;  // set: lr_at() is DeepSpeed's scheduler at iteration num_steps/batch
};

}  // namespace lmforge::optim
