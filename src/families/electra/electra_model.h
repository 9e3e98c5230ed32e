// defines: lmforge::train::ElectraModel (model::Electra as a train::Model: a micro-batch's examples, the masking and
//          sampling draws keyed by the run's seed and each row's global sample index, the two losses and the
//          discriminator's accuracy), electra_loss_names()
#pragma once
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/electra.h"
#include "train/model.h"

namespace lmforge::train {

// {"mlm loss", "disc loss", "disc accuracy"}: the generator's masked-LM loss, the discriminator's replaced-token
// BCE, and the share of real tokens (input_mask 1) whose replaced/original call (logit > 0) is right. The
// objective is mlm + disc_weight x disc (ElectraTask::objective_weights); the accuracy is logged, not trained on.
std::vector<std::string> electra_loss_names();

// ELECTRA on one rank (tensor-parallel size 1, no pipeline stages: model::Electra's first version). Batch fields
// read (host, [B,T] row-major): tokens = input_ids, padding = input_mask (required), token_types = segment_ids
// (empty: all 0), split and first_sample (row b is sample first_sample + b of the split).
// Draws: model::ElectraDrawKey{seed, k} with sample index first_sample + b, k = the iteration in training and
// 2^64 − 1 − split in evaluation (a fixed key per split: sample i of the validation split is masked the same way at
// every evaluation) — so any data-parallel layout, micro-batch split and resume point draws the same numbers.
class ElectraModel final : public Model {
 public:
  ElectraModel(const model::ElectraConfig& config, int seq_length, kernels::Backend& backend,
               dist::Communicator* tensor_parallel);
  model::Electra& electra() { return model_; }

  const param::ParamTable& table() const override { return model_.table(); }
  param::ParamTable whole_table() const override { return model::Electra::parameter_table(model_.config()); }
  void init_weights(uint64_t seed) override { model_.init_weights(seed); }
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
  std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) override;
  void backward(float loss_scale) override { model_.backward(loss_scale); }
  bool set_compute_dtype(kernels::DType dtype) override {
    model_.set_compute_dtype(dtype);
    return true;
  }
  void params_updated() override { model_.params_updated(); }
  kernels::Tensor working_params() const override { return model_.working_copy(); }
  std::string config_json() const override;
  void check_checkpoint_config(const std::string& json, const std::string& source) const override;
  std::vector<std::string> vocabulary_tensors() const override {
    return {"electra.embeddings.word_embeddings.weight", "generator.generator_lm_head.bias"};
  }
  std::string describe() const override;
  double training_flops(int B, int T) const override;
  // <checkpoint_dir>/hf/discriminator: ElectraForPreTraining (config.json, model.safetensors: the tensors without
  // the "generator." prefix); <checkpoint_dir>/hf/generator: ElectraForMaskedLM (the shared embeddings under
  // electra.embeddings.*, the generator's own tensors without the prefix; generator_lm_head.weight is tied to the
  // word embeddings and, as Hugging Face saves it, not stored). Written into hf.tmp, then renamed to hf.
  void write_hugging_face(const std::string& checkpoint_dir) override;

 private:
  model::Electra model_;
  int seq_length_;
};

}  // namespace lmforge::train
