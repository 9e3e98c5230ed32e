// defines: lmforge::train::BertModel (model::Bert as a train::Model), bert_loss_names()
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "families/bert/bert_hf_config.h"
#include "model/bert.h"
#include "families/family_model.h"

namespace lmforge::train {

// The names the losses are logged under, as Megatron's pretrain_bert.py: {"lm loss", "sop loss"}, or {"lm loss"}
// without the binary head.
std::vector<std::string> bert_loss_names(const model::BertConfig& config);

// BERT on this rank's tensor-parallel group (nullptr: the whole model). Batch fields read (host, [B,T] row-major):
//   tokens       Megatron's "text"
//   targets      "labels": the masked-LM target ids, −1 where nothing is predicted
//   loss_mask    "loss_mask" (required)
//   token_types  "types" (empty: all 0; unused by the Megatron flavour without the binary head)
//   padding      "padding_mask": 1 real, 0 padding (empty: none)
//   labels [B]   "is_random": the sentence-order label (binary head only)
// forward() returns {lm, sop} (bert_loss_names order), each the micro-batch's value as Megatron computes it.
// With a pipeline `stage` it holds that stage's layers only and runs under a PipelineSchedule.
class BertModel final : public FamilyModel<model::Bert> {
 public:
  BertModel(const model::BertConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
            model::Stage stage = {});
  model::Bert& bert() { return model_; }
  std::vector<std::string> loss_names() const { return bert_loss_names(model_.config()); }

  std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) override;
  std::string config_json() const override { return bert_config_json(model_.config()); }
  void check_checkpoint_config(const std::string& json, const std::string& source) const override;
  std::vector<std::string> vocabulary_tensors() const override {
    return {"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"};
  }
  std::string describe() const override;
  double training_flops(int B, int T) const override { return model_.training_flops(B, T); }

  // PipelineStage: the residual stream [B·T, hidden] passes between stages.
  size_t activation_elements(const Batch& batch) const override {
    return (size_t)batch.B * batch.T * model_.config().hidden;
  }
  std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                    size_t slot) override;
  // The tied word table when the first and the last stage differ.
  std::vector<std::string> shared_tensors() const override;

 private:
  model::BertInputs inputs(const Batch& batch) const;
};

}  // namespace lmforge::train
