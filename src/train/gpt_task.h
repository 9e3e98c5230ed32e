// defines: lmforge::train::GptModel (model::GPT as a train::Model), GptTask (next-token prediction over Megatron's
//          GPT samples as a train::Task)
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/gpt.h"
#include "datasets/gpt_dataset.h"
#include "train/model.h"
#include "train/pipeline_stage.h"

namespace lmforge::train {

// GPT-2 on this rank's tensor-parallel group (nullptr: the whole model). One loss, "lm loss": the mean
// cross-entropy over every position of the micro-batch (Megatron's GPT with its default all-ones loss mask).
// With a pipeline `stage` it holds that stage's layers only and runs under a PipelineSchedule.
class GptModel final : public Model, public PipelineStage {
 public:
  GptModel(const model::GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
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
  std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step) override;
  const float* stage_output() const override { return gpt_.stage_output(); }
  void backward_stage(const float* output_grad, float loss_scale) override {
    gpt_.backward_stage(output_grad, loss_scale);
  }
  const float* input_grad() const override { return gpt_.input_grad(); }
  std::vector<std::string> shared_tensors() const override;

 private:
  model::GPT gpt_;
};

// Megatron's GPT data: each sample is seq_length + 1 tokens of the (blended) dataset in GPTDataset's order; the
// inputs are its first seq_length tokens, the targets the last seq_length.
class GptTask final : public Task {
 public:
  GptTask(std::unique_ptr<datasets::GptSampleSource> source, int seq_length);
  std::string name() const override { return "gpt"; }
  std::vector<std::string> loss_names() const override { return {"lm loss"}; }
  bool has_split(SplitKind split) const override;
  int64_t split_size(SplitKind split) const override;
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;
  std::string summary() const override { return source_->summary(); }
  std::string sample_json(SplitKind split, int64_t index) override;

 private:
  std::unique_ptr<datasets::GptSampleSource> source_;
  int seq_length_;
  std::vector<int32_t> sample_;
};

}  // namespace lmforge::train
