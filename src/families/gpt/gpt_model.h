// defines: lmforge::train::GPTModel (model::GPT as a train::Model and a pipeline stage)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "train/model.h"
#include "train/pipeline_stage.h"

namespace lmforge::train {

// GPT-2 on this rank's tensor-parallel group (nullptr: the whole model). One loss, "lm loss": the mean
// cross-entropy over every position of the micro-batch (Megatron's GPT with its default all-ones loss mask).
// With a pipeline `stage` it holds that stage's layers only and runs under a PipelineSchedule.
class GPTModel final : public Model, public PipelineStage {
 public:
  GPTModel(const model::GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
           model::Stage stage = {});
  model::GPT& gpt() { return gpt_; }

  const param::ParamTable& table() const override { return gpt_.table(); }
  param::ParamTable whole_table() const override { return model::GPT::parameter_table(gpt_.config()); }
  void init_weights(uint64_t seed) override { gpt_.init_weights(seed); }
  kernels::Tensor params() override {
    return flat_device_view(gpt_.params(), gpt_.num_parameters(), gpt_.backend().device());
  }
  kernels::Tensor grads() override {
    return flat_device_view(gpt_.grads(), gpt_.num_parameters(), gpt_.backend().device());
  }
  void zero_grad() override { gpt_.zero_grad(); }
  void set_gradients_ready_hook(std::function<void(size_t from)> hook) override {
    gpt_.set_gradients_ready_hook(std::move(hook));
  }
  std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) override;
  void backward(float loss_scale) override { gpt_.backward(loss_scale); }
  std::string config_json() const override;
  void check_checkpoint_config(const std::string& json, const std::string& source) const override;
  std::vector<std::string> vocabulary_tensors() const override { return {"transformer.wte.weight"}; }
  bool set_compute_dtype(kernels::DType dtype) override {
    gpt_.set_compute_dtype(dtype);
    return true;
  }
  void params_updated() override { gpt_.params_updated(); }
  std::string describe() const override;
  double training_flops(int B, int T) const override { return gpt_.training_flops(B, T); }

  // PipelineStage: the residual stream [B·T, hidden] passes between stages.
  bool first_stage() const override { return gpt_.stage().pre_process; }
  bool last_stage() const override { return gpt_.stage().post_process; }
  size_t activation_elements(const Batch& batch) const override {
    return (size_t)batch.B * batch.T * gpt_.config().hidden;
  }
  std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                    size_t slot) override;
  kernels::Tensor stage_output() const override { return gpt_.stage_output(); }
  void backward_stage(const float* output_grad, float loss_scale, size_t slot) override {
    gpt_.backward_stage(output_grad, loss_scale, slot);
  }
  kernels::Tensor input_grad() const override { return gpt_.input_grad(); }
  std::vector<std::string> shared_tensors() const override;

 private:
  model::GPT gpt_;
};

}  // namespace lmforge::train
