// defines: SequentialSchedule
#include "parallel/microbatch_schedule.h"

namespace lmforge::parallel {

std::vector<double> SequentialSchedule::run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) {
  const int64_t local = local_micro_batches(plan.global_micro_batches, buckets);
  std::vector<double> sums;
  for (int64_t k = 0; k < local; k++) {
    passes.load(0, global_micro_batch(k, buckets));
    const std::vector<double> losses = passes.forward(0);
    if (sums.empty()) sums.assign(losses.size(), 0.0);
    for (size_t i = 0; i < losses.size(); i++) sums[i] += losses[i];
    if (!plan.training) continue;
    // The last backward starts the reduction (ZeRO-2: every backward, each ending with its reduction done).
    if (k + 1 == local || buckets.gradients_sharded()) buckets.arm_overlap();
    passes.backward(plan.loss_scale);  // accumulates d(micro-batch mean)/dθ; the 1/M comes with the reduction
    if (buckets.gradients_sharded()) buckets.finish_micro_batch();
  }
  return sums;
}

}  // namespace lmforge::parallel
