// defines: what the family entries share: recompute_of() (--recompute-* into layers::Recompute),
//          fill_transformer_config() (the shared TransformerConfig fields from the options), layer_stage() and
//          layer_stage_text() (one stack cut into consecutive pipeline stages), validate_single_stack(),
//          validate_masked_lm(), validate_mask_budget(), single_prefix(), masked_lm_vocab(), masked_lm_dataset_config() (Megatron's masked-LM
//          data flags), read_text(), gelu_kind(), shape_of()
#pragma once
#include <cstdint>
#include <string>

#include "datasets/masked_lm.h"
#include "kernels/ops.h"
#include "layers/recompute.h"
#include "model/language_model.h"
#include "model/transformer_config.h"
#include "train/model_shape.h"
#include "train/train_options.h"

namespace lmforge::families {

// --recompute-* / --checkpoint-activations as validate_train_options resolved them (no method without full).
layers::Recompute recompute_of(const train::TrainOptions& options);

// The TransformerConfig fields every family fills alike from the options into `config`: hidden, heads, max
// positions, the vocabulary (the tokenizer's `vocab_size`, padded by the model), init std, dropouts and
// recomputation. The family sets the rest (layers, lengths, ffn, LayerNorm eps, GELUs).
void fill_transformer_config(const train::TrainOptions& options, int64_t vocab_size, model::TransformerConfig& config);

// A decoder-only or encoder-only stack cut into consecutive layers (parallel::stage_layer_counts): the layers of
// pipeline stage `rank`; the first stage holds the embedding, the last the head. One stage: the whole model.
model::Stage layer_stage(const train::TrainOptions& options, int rank);
// The layers of each stage as the log shows them: "2 2".
std::string layer_stage_text(const train::TrainOptions& options);
// The pipeline rules of such a stack: no split rank (an encoder-decoder's), the layers split over the stages.
void validate_single_stack(const train::TrainOptions& options);

// The flag rules of Megatron's masked-LM data (BERT, T5): --ffn-hidden-size, --mask-prob, --short-seq-prob, and the
// seed range its samples map needs.
void validate_masked_lm(const train::TrainOptions& options);
// --mask-prob against the longest sample (Megatron's target length: BERT --seq-length - 3, T5's encoder - 2): a
// probability whose budget min(mask-prob x target, ...) is below one token masks nothing, so no sample has a label
// and the lm loss is 0/0. Error naming the flag, the budget and the smallest probability that masks a token.
void validate_mask_budget(const train::TrainOptions& options, int64_t longest_target);
// The one sentence-level dataset prefix of --data-path: Megatron's BertDataset/T5Dataset raise NotImplementedError
// for a blend, so several are an Error.
std::string single_prefix(const train::TrainOptions& options);
// The masking vocabulary (WordPiece "##" pieces, [CLS]/[SEP]/[MASK]/[PAD], the ids a random replacement draws from)
// of the --vocab-file; Error unless the tokenizer is one of Megatron's BertWordPiece tokenizers.
datasets::MaskedLmVocab masked_lm_vocab(const train::TrainOptions& options);
// The settings BertDatasetConfig and T5DatasetConfig share (Megatron's masked-LM data flags).
template <typename DatasetConfig>
DatasetConfig masked_lm_dataset_config(const train::TrainOptions& o) {
  DatasetConfig dc;
  dc.prefix = single_prefix(o);
  dc.split = o.split;
  dc.mask_prob = o.mask_prob;
  dc.short_seq_prob = o.short_seq_prob;
  dc.seed = (int32_t)o.seed;
  dc.cache_dir = o.data_cache_path;
  dc.vocab = masked_lm_vocab(o);
  return dc;
}

// The whole file at `path`; Error naming it when it cannot be read.
std::string read_text(const std::string& path);

// The exact (erf) GELU or its tanh form.
inline kernels::GeluKind gelu_kind(bool erf) { return erf ? kernels::GeluKind::ERF : kernels::GeluKind::TANH; }

// A ModelShape from a config (Net::parameter_table gives the whole model's parameters).
template <typename Net, typename Config>
train::ModelShape shape_of(const Config& c, int64_t attention_layers, int64_t positions) {
  return {(int64_t)Net::parameter_table(c).whole_numel(), (int64_t)c.padded_vocab_size(), attention_layers,
          (int64_t)c.heads, positions};
}

}  // namespace lmforge::families
