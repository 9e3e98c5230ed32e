// defines: split_kind_name, SequentialSchedule
#include "train/schedule.h"

namespace lmforge::train {

const char* split_kind_name(SplitKind split) {
  switch (split) {
    case SplitKind::TRAIN: return "train";
    case SplitKind::VALID: return "validation";
    case SplitKind::TEST: return "test";
  }
  return "?";
}

const char* split_short_name(SplitKind split) {
  switch (split) {
    case SplitKind::TRAIN: return "train";
    case SplitKind::VALID: return "valid";
    case SplitKind::TEST: return "test";
  }
  return "?";
}

std::vector<double> SequentialSchedule::run(const StepPlan& plan, Model& model, Task& task, DataParallel& dp) {
  const int64_t local = dp.local_micro_batches(plan.global_micro_batches);
  std::vector<double> sums;
  for (int64_t k = 0; k < local; k++) {
    task.fill(plan.split, dp.micro_batch_first_sample(plan.first_sample, k, plan.micro_batch), plan.micro_batch,
              batch_);
    layers::ForwardStep step;
    step.training = plan.training;
    step.seed = plan.seed;
    step.iteration = (uint64_t)plan.iteration;
    step.micro_batch = (uint64_t)(k * dp.size() + dp.rank());
    const std::vector<double> losses = model.forward(batch_, step);
    if (sums.empty()) sums.assign(losses.size(), 0.0);
    for (size_t i = 0; i < losses.size(); i++) sums[i] += losses[i];
    if (!plan.training) continue;
    // The last backward starts the reduction (ZeRO-2: every backward, each ending with its reduction done).
    if (k + 1 == local || dp.gradients_sharded()) dp.arm_overlap();
    model.backward(plan.loss_scale);  // accumulates d(micro-batch mean)/dθ; the 1/M comes with the reduction
    if (dp.gradients_sharded()) dp.finish_micro_batch();
  }
  return sums;
}

}  // namespace lmforge::train
