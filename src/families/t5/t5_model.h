// defines: lmforge::train::T5Model (model::T5 as a train::Model)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "families/t5/t5_hf_config.h"
#include "model/t5.h"
#include "families/family_model.h"

namespace lmforge::train {

// T5 on this rank's tensor-parallel group (nullptr: the whole model). Batch fields read (host, row-major):
//   tokens [B,T]            the encoder's input (Megatron's text_enc), T = the encoder length
//   padding [B,T]           the encoder's padding, 1 real / 0 pad (empty: none)
//   Td, decoder_tokens [B,Td]  the decoder's input (text_dec)
//   decoder_padding [B,Td]  1 real / 0 pad (empty: none)
//   targets [B,Td]          "labels": −1 where nothing is predicted
//   loss_mask [B,Td]        "loss_mask" (required)
// One loss, "lm loss".
// With a pipeline `stage` it holds that stage's layers only and runs under a PipelineSchedule.
class T5Model final : public FamilyModel<model::T5> {
 public:
  T5Model(const model::T5Config& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
          model::Stage stage = {});
  model::T5& t5() { return model_; }
  std::vector<std::string> loss_names() const { return {"lm loss"}; }

  std::vector<double> forward(const Batch& batch, const layers::ForwardStep& step) override;
  std::string config_json() const override { return t5_config_json(model_.config()); }
  void check_checkpoint_config(const std::string& json, const std::string& source) const override;
  std::vector<std::string> vocabulary_tensors() const override {
    return {"language_model.embedding.word_embeddings.weight", "lm_head.bias"};
  }
  std::string describe() const override;
  // T is the encoder length; the decoder's is the config's decoder_seq_length.
  double training_flops(int B, int T) const override {
    return model_.training_flops(B, T, model_.config().decoder_seq_length);
  }

  // PipelineStage (see model::T5 and model::Stage): stage 0 reads the tokens, the last computes the loss.
  size_t activation_elements(const Batch& batch) const override { return output_elements(batch); }
  size_t input_elements(const Batch& batch) const override {
    return model_.stage_input_elements(batch.B, batch.T, batch.Td);
  }
  size_t output_elements(const Batch& batch) const override {
    return model_.stage_output_elements(batch.B, batch.T, batch.Td);
  }
  std::vector<double> forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                    size_t slot) override;
  // The word table (stage 0, the split stage, the last) and the position table (stage 0, the split stage).
  std::vector<std::string> shared_tensors() const override;

 private:
  model::T5Inputs inputs(const Batch& batch) const;
};

}  // namespace lmforge::train
