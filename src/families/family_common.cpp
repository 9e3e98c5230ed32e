// defines: recompute_of, fill_transformer_config, layer_stage, layer_stage_text, validate_single_stack,
//          validate_masked_lm, validate_mask_budget, single_prefix, masked_lm_vocab, read_text
#include "families/family_common.h"

#include <cstdio>
#include <vector>

#include "parallel/process_groups.h"
#include "util/error.h"
#include "util/file_text.h"
#include "util/strings.h"

namespace lmforge::families {
using parallel::stage_layer_counts;

layers::Recompute recompute_of(const train::TrainOptions& o) {
  layers::Recompute r;
  r.granularity = o.recompute_granularity;
  if (!o.recompute_method.empty()) r.method = o.recompute_method;
  r.num_layers = o.recompute_num_layers;
  return r;
}

void fill_transformer_config(const train::TrainOptions& o, int64_t vocab_size, model::TransformerConfig& c) {
  c.hidden = o.hidden_size;
  c.heads = o.num_attention_heads;
  c.max_positions = o.max_position_embeddings;
  c.vocab_size = (int)vocab_size;
  c.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
  c.init_std = (float)o.init_method_std;
  c.hidden_dropout = (float)o.hidden_dropout;
  c.attention_dropout = (float)o.attention_dropout;
  c.recompute = recompute_of(o);
}

model::Stage layer_stage(const train::TrainOptions& o, int rank) {
  model::Stage stage;
  const int P = o.pipeline_model_parallel_size;
  if (P == 1) return stage;
  const std::vector<int> counts =
      stage_layer_counts(o.num_layers, P, o.decoder_first_pipeline_num_layers, o.decoder_last_pipeline_num_layers);
  for (int s = 0; s < rank; s++) stage.first_layer += counts[(size_t)s];
  stage.num_layers = counts[(size_t)rank];
  stage.pre_process = rank == 0;
  stage.post_process = rank == P - 1;
  return stage;
}

std::string layer_stage_text(const train::TrainOptions& o) {
  std::string out;
  for (int n : stage_layer_counts(o.num_layers, o.pipeline_model_parallel_size, o.decoder_first_pipeline_num_layers,
                                  o.decoder_last_pipeline_num_layers)) {
    if (!out.empty()) out += " ";
    out += std::to_string(n);
  }
  return out;
}

void validate_single_stack(const train::TrainOptions& o) {
  if (o.pipeline_model_parallel_split_rank >= 0)
    throw Error("--pipeline-model-parallel-split-rank applies to train t5 (an encoder-decoder model) only");
  stage_layer_counts(o.num_layers, o.pipeline_model_parallel_size, o.decoder_first_pipeline_num_layers,
                     o.decoder_last_pipeline_num_layers);  // throws naming the flags when the layers do not split
}

void validate_masked_lm(const train::TrainOptions& o) {
  if (o.ffn_hidden_size < 0) throw Error("--ffn-hidden-size must be positive");
  if (!(o.mask_prob >= 0.0 && o.mask_prob <= 1.0)) throw Error("--mask-prob must be in [0, 1]");
  if (!(o.short_seq_prob >= 0.0 && o.short_seq_prob <= 1.0)) throw Error("--short-seq-prob must be in [0, 1]");
  if (o.seed == 0 || o.seed > 2147483647u)
    throw Error("--seed " + std::to_string(o.seed) + ": Megatron's BERT/T5 samples map needs 0 < seed < 2^31");
}

void validate_mask_budget(const train::TrainOptions& o, int64_t longest_target) {
  if (longest_target < 1 || o.mask_prob * (double)longest_target >= 1.0) return;
  char text[512];
  std::snprintf(text, sizeof text,
                "--mask-prob %g masks no token: the masking budget, min(mask-prob x target length, max(1, "
                "round(mask-prob x tokens))) as Megatron computes it, is %.3g tokens even for the longest sample "
                "(%lld tokens at --seq-length %d), so no sample would have a label and the lm loss would have no "
                "value; give at least %.3g (BERT's usual 0.15)",
                o.mask_prob, o.mask_prob * (double)longest_target, (long long)longest_target, o.seq_length,
                1.0 / (double)longest_target);
  throw Error(text);
}

std::string single_prefix(const train::TrainOptions& o) {
  if (o.data_path.size() != 1)
    throw Error("--data-path: " + o.model_type + " trains on one sentence-level dataset prefix; Megatron does not "
                "blend BERT or T5 datasets (merge the datasets with `lmforge merge` instead)");
  return o.data_path[0];
}

datasets::MaskedLmVocab masked_lm_vocab(const train::TrainOptions& o) {
  if (o.tokenizer.type != "BertWordPieceLowerCase" && o.tokenizer.type != "BertWordPieceCase")
    throw Error("--tokenizer-type " + o.tokenizer.type + ": " + o.model_type +
                " data is masked over a WordPiece vocabulary; use BertWordPieceLowerCase or BertWordPieceCase with "
                "--vocab-file vocab.txt (Megatron's BERT and T5 tokenizers)");
  return datasets::load_bert_vocab(o.tokenizer.vocab_file, o.tokenizer.vocab_extra_ids);
}

std::string read_text(const std::string& path) { return read_text_file(path, "the model config file"); }

}  // namespace lmforge::families
