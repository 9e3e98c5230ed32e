// defines: lmforge::train::FamilyModel<M> (what every family's train::Model adapter forwards alike to its
//          model::LanguageModel: parameters, gradients, precision, backward, and the pipeline-stage plumbing)
#pragma once
#include <functional>
#include <utility>

#include "kernels/backend.h"
#include "train/model.h"
#include "train/pipeline_stage.h"

namespace lmforge::train {

// A model family's adapter (GPTModel, BertModel, T5Model) derives from FamilyModel<its model::LanguageModel> and
// writes only what differs between families: how a Batch becomes the model's inputs (forward, forward_stage), the
// checkpoint's config (config_json, check_checkpoint_config), the tensor names (vocabulary_tensors,
// shared_tensors), the description, the FLOP count and the stage activation size. Everything below is the same
// call on every family's model, so it is written once.
template <typename M>
class FamilyModel : public Model, public PipelineStage {
 public:
  const param::ParamTable& table() const override { return model_.table(); }
  param::ParamTable whole_table() const override { return M::parameter_table(model_.config()); }
  void init_weights(uint64_t seed) override { model_.init_weights(seed); }
  // The flat parameter and gradient buffers as device tensors: optimizers, ZeRO and checkpoints move them only
  // through the model's backend.
  kernels::Tensor params() override {
    return flat_device_view(model_.params(), model_.num_parameters(), model_.backend().device());
  }
  kernels::Tensor grads() override {
    return flat_device_view(model_.grads(), model_.num_parameters(), model_.backend().device());
  }
  void zero_grad() override { model_.zero_grad(); }
  void set_gradients_ready_hook(std::function<void(size_t from)> hook) override {
    model_.set_gradients_ready_hook(std::move(hook));
  }
  void backward(float loss_scale) override { model_.backward(loss_scale); }
  bool set_compute_dtype(kernels::DType dtype) override {
    model_.set_compute_dtype(dtype);
    return true;
  }
  void params_updated() override { model_.params_updated(); }
  kernels::Tensor working_params() const override { return model_.working_copy(); }

  // PipelineStage: Megatron's pre_process (reads the tokens) and post_process (computes the losses) stages.
  bool first_stage() const override { return model_.stage().pre_process; }
  bool last_stage() const override { return model_.stage().post_process; }
  kernels::Tensor stage_output() const override { return model_.stage_output(); }
  void backward_stage(const float* output_grad, float loss_scale, size_t slot) override {
    model_.backward_stage(output_grad, loss_scale, slot);
  }
  kernels::Tensor input_grad() const override { return model_.input_grad(); }

 protected:
  template <typename... Args>
  explicit FamilyModel(Args&&... model_args) : model_(std::forward<Args>(model_args)...) {}

  M model_;
};

}  // namespace lmforge::train
