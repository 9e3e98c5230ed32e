// defines: lmforge::parallel::StagePasses (what the pipeline schedule drives: one stage's passes), PipelineSchedule
//          (Megatron's 1F1B schedule, forward_backward_pipelining_without_interleaving, over point-to-point messages
//          between the stages of one pipeline), PipelineTiming
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/tensor.h"
#include "param/parameter.h"
#include "parallel/microbatch_schedule.h"

namespace lmforge::parallel {

// One stage of a model cut into consecutive layers, behind the slots of MicroBatchPasses (the trainer implements it
// over train::PipelineStage, train/model_passes.h). Sizes are floats; gradients travel back in the sizes of the
// activations they belong to.
class StagePasses : public MicroBatchPasses {
 public:
  virtual bool first_stage() const = 0;  // reads the batch's tokens
  virtual bool last_stage() const = 0;   // computes the losses
  // Floats this stage receives from the previous stage and sends to the next for the micro-batch in `slot`.
  virtual size_t input_elements(size_t slot) const = 0;
  virtual size_t output_elements(size_t slot) const = 0;
  // Forward of the micro-batch in `slot` from `input` (ignored on the first stage): the last stage returns the
  // losses, the others an empty vector, their output at stage_output() until the next forward. The stage keeps
  // the micro-batch's activations in the slot until its backward (other slots' forwards may come between).
  virtual std::vector<double> forward_stage(size_t slot, const float* input) = 0;
  // The output, an fp32 device tensor of output_elements floats (staged through host memory by the backend's copy
  // for the transport).
  virtual kernels::Tensor stage_output() const = 0;
  // Backward of the micro-batch in `slot` (the last stage from its losses, the others from d(loss)/d(output));
  // accumulates loss_scale · d/dθ into grads(); afterwards input_grad() holds d(loss)/d(input) (not on the first
  // stage) until the next forward or backward.
  virtual void backward_stage(size_t slot, const float* output_grad, float loss_scale) = 0;
  virtual kernels::Tensor input_grad() const = 0;  // as stage_output, input_elements floats
  // Tensors this stage holds that another stage holds too (the tied word embedding), by name; the stage's table
  // and the whole model's (every stage lists the shared tensors in the whole model's order); the gradient buffer
  // (a flat f32 view of device memory).
  virtual std::vector<std::string> shared_tensors() const = 0;
  virtual const param::ParamTable& table() const = 0;
  virtual param::ParamTable whole_table() const = 0;
  virtual kernels::Tensor grads() = 0;
};

// What one stage did, summed over the training steps run so far (the bubble of bench/dist/RESULTS.md).
struct PipelineTiming {
  int64_t steps = 0;
  double wall_ms = 0.0;        // inside run() for training steps (idle: wall − busy)
  double busy_ms = 0.0;        // in forward_stage / backward_stage
  int64_t forwards = 0, backwards = 0;
  uint64_t sent_bytes = 0;     // activations and their gradients sent to the neighbouring stages
  size_t peak_in_flight = 0;   // most micro-batches forwarded and not yet backwarded (activation sets held)
};

// 1F1B on stage s of P (Megatron's schedules.py): with m micro-batches on this data-parallel rank,
//   warm-up:   min(P − s − 1, m) forwards,
//   steady:    m − warm-up rounds of one forward then one backward (of the oldest micro-batch in flight),
//   cool-down: the warm-up's backwards.
// So stage s holds at most P − s micro-batches in flight and the last stage runs each backward right after its
// forward. Activations go to stage s+1 and their gradients back to s−1 by non-blocking sends (the stage computes
// while they travel, as far as the transport progresses them) and blocking receives in schedule order; messages
// between two stages flow one kind per direction, in order, so no tags are needed.
//
// Activation memory: each micro-batch in flight keeps its activations in its slot of the stage (the stage's model
// holds one activation set per slot), so every micro-batch's forward runs once, as in Megatron; stage s holds at
// most P − s sets (with --recompute-granularity full each set is only its chunks' boundaries).
//
// Micro-batch k of data-parallel rank r is the global micro-batch k·D + r (as SequentialSchedule), on every stage.
// Each micro-batch in flight keeps its slot of the passes (its batch) until its backward.
// The returned loss sums are the last stage's, summed over the pipeline so every stage returns them. At the end of a
// training step the gradients of the tensors shared between stages (StagePasses::shared_tensors) are summed
// between the stages holding them, in stage order on every holder, so the copies stay bitwise equal.
class PipelineSchedule final : public MicroBatchSchedule {
 public:
  // `pipeline`: the ranks of this pipeline, ordered by stage (ProcessGroups::pipeline); both must outlive this.
  PipelineSchedule(dist::Communicator& pipeline, StagePasses& stage);
  // `passes` must be the stage given to the constructor.
  std::vector<double> run(const StepPlan& plan, MicroBatchPasses& passes, GradBuckets& buckets) override;
  const PipelineTiming& timing() const { return timing_; }

 private:
  struct InFlight {
    int64_t k = 0;             // local micro-batch
    size_t slot = 0;           // its batch and activations in the passes
  };
  struct Sending {
    int handle = -1;
    std::vector<float> data;
  };

  void forward(const StepPlan& plan, int64_t k, const GradBuckets& buckets, std::vector<double>& sums);
  void backward(const StepPlan& plan, GradBuckets& buckets, bool last);
  void send(const kernels::Tensor& data, size_t n, int dest);
  void reap_sends(bool wait);
  void sum_shared_gradients();
  // For each tensor this stage shares: its offset, size and the stages holding it (ascending), found once.
  struct Shared {
    size_t offset = 0, numel = 0;
    std::vector<int> holders;
  };
  void find_shared();

  dist::Communicator& pipe_;
  StagePasses& stage_;
  std::deque<InFlight> in_flight_;
  std::vector<size_t> spare_;           // slots free for the next forward (reused: their buffers are allocated)
  size_t slots_ = 0;                    // slots handed out
  std::vector<float> input_;            // the input received from the previous stage (the stage copies it)
  std::deque<Sending> sending_;
  std::vector<std::vector<float>> free_buffers_;
  std::vector<float> grad_;             // the gradient received from the next stage
  std::vector<Shared> shared_;
  bool shared_found_ = false;
  bool training_ = false;               // the step being run trains (timing counts training steps only)
  PipelineTiming timing_;
};

}  // namespace lmforge::parallel
