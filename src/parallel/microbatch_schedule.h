// defines: lmforge::parallel::MicroBatchPasses (what a schedule drives: the forward and backward passes over one
//          step's micro-batches), StepPlan, MicroBatchSchedule (how a step's micro-batches run on a rank),
//          SequentialSchedule (Megatron's forward_backward_no_pipelining)
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel/grad_buckets.h"

namespace lmforge::parallel {

// One step's passes as a schedule drives them (Megatron's forward_step_func). Micro-batch g is the g-th of the
// step's global batch: its samples and its dropout masks are functions of g alone, so any assignment of micro-batches
// to ranks computes the same values. The trainer implements this over its model and task (train/model_passes.h),
// so the schedules know neither models nor datasets.
class MicroBatchPasses {
 public:
  virtual ~MicroBatchPasses() = default;
  virtual size_t num_losses() const = 0;
  // Reads micro-batch g into `slot` (0, 1, ...: a schedule keeps one slot per micro-batch it holds in flight).
  virtual void load(size_t slot, int64_t g) = 0;
  // Whole model: the forward of the micro-batch in `slot`; its losses (each the micro-batch's mean).
  virtual std::vector<double> forward(size_t slot) = 0;
  // Accumulates loss_scale · d(Σ losses of the last forward)/dθ into the gradients.
  virtual void backward(float loss_scale) = 0;
};

// What a schedule needs to know of a step.
struct StepPlan {
  int64_t iteration = 0;  // 0-based: the step about to run
  int64_t global_micro_batches = 0;
  bool training = true;   // false: evaluation (no backward)
  float loss_scale = 1.0f;  // each backward runs on loss_scale · the micro-batch loss (fp16 loss scaling)
};

// The order of forward and backward passes within a step is its own piece so that a pipeline schedule (1F1B) can
// replace the plain one without touching the trainer.
class MicroBatchSchedule {
 public:
  virtual ~MicroBatchSchedule() = default;
  // Runs this rank's share of the global batch and returns, per loss, the SUM of the micro-batch means over this
  // rank's micro-batches (the caller sums over ranks and divides by the global count). `buckets` starts the
  // gradients' data-parallel reduction inside the last backward (ZeRO-2: every backward).
  virtual std::vector<double> run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) = 0;
};

// Megatron's MegatronPretrainingSampler order: local micro-batch k of data-parallel rank r (of D) is the global
// micro-batch k·D + r, so the union over ranks is exactly the single-process batch.
inline int64_t global_micro_batch(int64_t k, const GradBuckets& buckets) {
  return k * buckets.ranks() + buckets.rank();
}
// Micro-batches each data-parallel rank runs per global batch.
inline int64_t local_micro_batches(int64_t global_micro_batches, const GradBuckets& buckets) {
  return global_micro_batches / buckets.ranks();
}

// Megatron's forward_backward_no_pipelining: each local micro-batch forward then backward, gradients accumulating;
// the last backward arms the data-parallel reduction so its buckets start while earlier layers are differentiated.
class SequentialSchedule final : public MicroBatchSchedule {
 public:
  std::vector<double> run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) override;
};

}  // namespace lmforge::parallel
