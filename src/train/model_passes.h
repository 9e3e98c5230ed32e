// defines: lmforge::train::ModelPasses (a train::Model and its Task as the passes a parallel/ schedule drives: one
//          step's micro-batches read from the task's split and run through the model or its pipeline stage)
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"
#include "train/model.h"
#include "train/pipeline_stage.h"

namespace lmforge::train {

// Micro-batch g of a step is samples [first_sample + g·micro_batch, + micro_batch) of the step's split, and its
// dropout masks are keyed by (seed, iteration, g): any data-parallel or pipeline layout and any resume point read
// the same samples and drop the same elements. The stage methods need the model to be a PipelineStage (`stage`).
class ModelPasses final : public parallel::StagePasses {
 public:
  // `stage`: the model as a pipeline stage (nullptr when it is not cut into stages). All must outlive this.
  ModelPasses(Model& model, PipelineStage* stage, Task& task, int micro_batch, uint64_t seed);

  // The step the next passes belong to (evaluation steps too): its split and first sample, iteration and mode.
  void begin_step(SplitKind split, int64_t first_sample, int64_t iteration, bool training);

  size_t num_losses() const override { return loss_count_; }
  void load(size_t slot, int64_t g) override;
  std::vector<double> forward(size_t slot) override;
  void backward(float loss_scale) override;

  bool first_stage() const override { return pipeline_stage().first_stage(); }
  bool last_stage() const override { return pipeline_stage().last_stage(); }
  size_t input_elements(size_t slot) const override;
  size_t output_elements(size_t slot) const override;
  std::vector<double> forward_stage(size_t slot, const float* input) override;
  kernels::Tensor stage_output() const override { return pipeline_stage().stage_output(); }
  void backward_stage(size_t slot, const float* output_grad, float loss_scale) override;
  kernels::Tensor input_grad() const override { return pipeline_stage().input_grad(); }
  std::vector<std::string> shared_tensors() const override { return pipeline_stage().shared_tensors(); }
  const param::ParamTable& table() const override { return model_.table(); }
  param::ParamTable whole_table() const override { return model_.whole_table(); }
  kernels::Tensor grads() override { return model_.grads(); }

 private:
  struct Slot {
    int64_t g = 0;  // the global micro-batch it holds
    Batch batch;
  };
  PipelineStage& pipeline_stage() const;
  layers::ForwardStep step_of(const Slot& slot) const;

  Model& model_;
  PipelineStage* stage_;
  Task& task_;
  int micro_batch_;
  uint64_t seed_;
  size_t loss_count_;
  SplitKind split_ = SplitKind::TRAIN;
  int64_t first_sample_ = 0, iteration_ = 0;
  bool training_ = true;
  std::deque<Slot> slots_;  // a deque: a slot stays where it is while later ones are added
};

}  // namespace lmforge::train
