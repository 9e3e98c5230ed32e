// defines: lmforge::train::StepPlan, MicroBatchSchedule (how one optimizer step's micro-batches run on a rank),
//          SequentialSchedule (Megatron's forward_backward_no_pipelining)
#pragma once
#include <cstdint>
#include <vector>

#include "train/model.h"
#include "train/parallel.h"

namespace lmforge::train {

// What a step needs to know to run its micro-batches.
struct StepPlan {
  int64_t iteration = 0;         // 0-based: the step about to run
  int64_t first_sample = 0;      // the global batch's first sample (consumed samples so far)
  int64_t global_micro_batches = 0;
  int micro_batch = 0;
  uint64_t seed = 0;             // dropout
  bool training = true;          // false: evaluation (no dropout, no backward)
  SplitKind split = SplitKind::TRAIN;
  float loss_scale = 1.0f;       // each backward runs on loss_scale · the micro-batch loss (fp16 loss scaling)
};

// The order of forward and backward passes within a step is its own piece so that a pipeline schedule (1F1B) can
// replace the plain one without touching the trainer.
class MicroBatchSchedule {
 public:
  virtual ~MicroBatchSchedule() = default;
  // Runs this rank's share of the global batch and returns, per loss, the SUM of the micro-batch means over this
  // rank's micro-batches (the caller sums over ranks and divides by the global count).
  virtual std::vector<double> run(const StepPlan& plan, Model& model, Task& task, DataParallel& dp) = 0;
};

// Megatron's forward_backward_no_pipelining: each local micro-batch forward then backward, gradients accumulating;
// the last backward arms the data-parallel reduction so its buckets start while earlier layers are differentiated.
// Local micro-batch k of data-parallel rank r is the global micro-batch k·D + r (the union over ranks is exactly the
// single-process batch), and its dropout masks are keyed by that global index.
class SequentialSchedule final : public MicroBatchSchedule {
 public:
  std::vector<double> run(const StepPlan& plan, Model& model, Task& task, DataParallel& dp) override;

 private:
  Batch batch_;
};

}  // namespace lmforge::train
