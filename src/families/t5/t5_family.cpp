// defines: t5_family() — `lmforge train t5` (Megatron's pretrain_t5.py): T5Config from the options, Megatron's
//          encoder/decoder pipeline split, T5Model, T5Task over Megatron's T5Dataset, the registry entry
#include <algorithm>
#include <memory>

#include "datasets/hdf5_bert_shards.h"
#include "datasets/t5_dataset.h"
#include "families/family_common.h"
#include "families/model_family.h"
#include "families/t5/t5_model.h"
#include "families/t5/t5_task.h"
#include "model/t5.h"
#include "parallel/process_groups.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::families {
namespace {
using parallel::EncoderDecoderStages;
using parallel::encoder_decoder_stages;

model::T5Config t5_config(const train::TrainOptions& o, int64_t vocab_size) {
  model::T5Config c;
  fill_transformer_config(o, vocab_size, c);
  c.encoder_num_layers = o.num_layers;
  c.decoder_num_layers = o.decoder_num_layers;
  c.ffn_hidden = o.ffn_hidden_size;
  c.encoder_seq_length = o.seq_length;
  c.decoder_seq_length = o.decoder_seq_length;
  c.gelu = gelu_kind(o.no_bias_gelu_fusion && !o.openai_gelu);
  if (o.layernorm_epsilon > 0.0) c.layernorm_eps = (float)o.layernorm_epsilon;
  c.validate();
  return c;
}

EncoderDecoderStages t5_stages(const train::TrainOptions& o) {
  return encoder_decoder_stages(o.num_layers, o.decoder_num_layers > 0 ? o.decoder_num_layers : o.num_layers,
                                o.pipeline_model_parallel_size, o.pipeline_model_parallel_split_rank);
}

// Megatron's T5 stages: before the split rank S the encoder's layers, from it the decoder's (numbered after the
// encoder's, model::Stage); what each stage holds besides follows from its layers (model::T5).
model::Stage t5_stage(const train::TrainOptions& o, int rank) {
  model::Stage stage;
  const int P = o.pipeline_model_parallel_size;
  if (P == 1) return stage;
  const EncoderDecoderStages split = t5_stages(o);
  stage.first_layer = split.first_layer(rank) + (rank >= split.split_rank ? o.num_layers : 0);
  stage.num_layers = split.layers[(size_t)rank];
  stage.pre_process = rank == 0;
  stage.post_process = rank == P - 1;
  return stage;
}

class T5Family final : public ModelFamily {
 public:
  const char* name() const override { return "t5"; }
  const char* default_tokenizer_type() const override { return "BertWordPieceLowerCase"; }  // pretrain_t5.py
  std::string help() const override {
    return
      "Pretrain Megatron's T5 on a sentence-level Megatron dataset with Megatron's pretrain_t5.py flags: "
      "whole-word span corruption with sentinel tokens, samples bit-identical to Megatron's T5Dataset.\n\n"
      "Model: Megatron's encoder-decoder (not Hugging Face's T5): one word + learned position embedding shared "
      "by encoder and decoder, pre-LN layers with biases (LayerNorm eps 1e-5, tanh GELU), decoder layers with "
      "causal self-attention and cross-attention, final LayerNorms, LM head tied to the word embedding with a "
      "bias; lm loss over the decoder's loss mask.\n"
      "Tokenizer: --tokenizer-type BertWordPieceLowerCase --vocab-file vocab.txt --vocab-extra-ids 100 (the "
      "sentinels <extra_id_i> follow [BOS] and [EOS]: 30524 + i for bert-base-uncased). Checkpoints: "
      "safetensors under Megatron's legacy T5 names with a config.json of Megatron's argument names.";
  }
  unsigned flag_groups() const override {
    return (unsigned)FlagGroup::ENCODER_DECODER | (unsigned)FlagGroup::MASKED_LM;
  }
  std::string masking_help() const override { return "10 words with geometric(0.2) lengths (spans)"; }
  void validate(train::TrainOptions& o) const override {
    validate_masked_lm(o);
    validate_mask_budget(o, (int64_t)o.seq_length - 2);  // Megatron's T5Dataset: the encoder's target length
    for (const std::string& prefix : o.data_path) datasets::check_megatron_prefix("t5", prefix);
    need_positive_decoder_length(o);
    if (o.decoder_num_layers < 0) throw Error("--decoder-num-layers must be positive");
    if (o.decoder_seq_length > o.max_position_embeddings)
      throw Error("--decoder-seq-length " + int_text(o.decoder_seq_length) + " exceeds --max-position-embeddings " +
                  int_text(o.max_position_embeddings) + " (encoder and decoder share one position table)");
    if (o.decoder_first_pipeline_num_layers >= 0 || o.decoder_last_pipeline_num_layers >= 0)
      throw Error("--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers: train t5 splits its "
                  "encoder and decoder evenly over the stages before and after --pipeline-model-parallel-split-rank");
    t5_stages(o);  // throws naming the flags when the stacks do not split over the stages
  }
  train::ModelShape shape(const train::TrainOptions& o, int64_t vocab_size) const override {
    const model::T5Config c = t5_config(o, vocab_size);
    // A decoder layer attends twice (itself and the encoder).
    return shape_of<model::T5>(c, c.encoder_num_layers + 2 * c.decoder_layers(),
                               std::max(c.encoder_seq_length, c.decoder_seq_length));
  }
  std::string pipeline_stage_layers(const train::TrainOptions& o) const override {
    const EncoderDecoderStages split = t5_stages(o);
    std::string out = "encoder";
    for (int s = 0; s < o.pipeline_model_parallel_size; s++) {
      out += s == split.split_rank ? " | decoder " : " ";
      out += std::to_string(split.layers[(size_t)s]);
    }
    return out;
  }
  std::unique_ptr<train::Model> make_model(const train::TrainOptions& o, int64_t vocab_size, kernels::Backend& backend,
                                           dist::Communicator* tensor_parallel, int pipeline_rank) const override {
    return std::make_unique<train::T5Model>(t5_config(o, vocab_size), backend, tensor_parallel,
                                            t5_stage(o, pipeline_rank));
  }
  std::unique_ptr<train::Task> make_task(const train::TrainOptions& o, const text::Tokenizer&,
                                         const std::array<int64_t, 3>& samples_per_split) const override {
    auto dc = masked_lm_dataset_config<datasets::T5DatasetConfig>(o);
    dc.encoder_seq_length = o.seq_length;
    dc.decoder_seq_length = o.decoder_seq_length;
    return std::make_unique<train::T5Task>(datasets::build_t5_datasets(dc, samples_per_split));
  }
  // t5_config_json: there is no Hugging Face class for Megatron's T5, so the type is lmforge's.
  std::vector<std::string> checkpoint_model_types() const override { return {"lmforge-megatron-t5"}; }
  Generation generation() const override { return Generation::SPAN_FILLING; }

 private:
  static void need_positive_decoder_length(const train::TrainOptions& o) {
    if (o.decoder_seq_length < 1)
      throw Error("--decoder-seq-length must be a positive integer (got " + int_text(o.decoder_seq_length) + ")");
  }
};

}  // namespace

const ModelFamily& t5_family() {
  static const T5Family family;
  return family;
}

}  // namespace lmforge::families
