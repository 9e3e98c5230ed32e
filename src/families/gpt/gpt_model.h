// defines: lmforge::train::GPTModel (model::GPT as a train::Model and a pipeline stage)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "families/family_model.h"

namespace lmforge::train {

// GPT-2 on this rank's tensor-parallel group (nullptr: the whole model). One loss, "lm loss": the mean
// cross-entropy over every position of the micro-batch (Megatron's GPT with its default all-ones loss mask).
// With a pipeline `stage` it holds that stage's layers only and runs under a PipelineSchedule.
class GPTModel final : public FamilyModel<model::GPT> {
 public:
  GPTModel(const model::GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
           model::Stage stage = {});
  model::GPT& gpt() { return model_; }

  std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) override;
  std::string config_json() const override;
  void check_checkpoint_config(const std::string& json, const std::string& source) const override;
  std::vector<std::string> vocabulary_tensors() const override { return {"transformer.wte.weight"}; }
  std::string describe() const override;
  double training_flops(int B, int T) const override { return model_.training_flops(B, T); }

  // PipelineStage: the residual stream [B·T, hidden] passes between stages.
  size_t activation_elements(const Batch& batch) const override {
    return (size_t)batch.B * batch.T * model_.config().hidden;
  }
  std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                    size_t slot) override;
  std::vector<std::string> shared_tensors() const override;
};

}  // namespace lmforge::train
