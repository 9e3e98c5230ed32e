// defines: bert_family() — `lmforge train bert` (Megatron's pretrain_bert.py): BertConfig from the options and
//          --bert-config-file, BertModel, BertTask over Megatron's BertDataset or Hdf5BertTask over NVIDIA's shards,
//          the registry entry
#include <algorithm>
#include <cstdio>
#include <memory>

#include "datasets/bert_dataset.h"
#include "datasets/hdf5_bert_shards.h"
#include "families/bert/bert_hf_config.h"
#include "families/bert/bert_model.h"
#include "families/bert/bert_task.h"
#include "families/bert/hdf5_bert_task.h"
#include "families/family_common.h"
#include "families/model_family.h"
#include "model/bert.h"
#include "util/error.h"

namespace lmforge::families {
namespace {

// --bert-config-file's vocab_size, as NVIDIA's run_pretraining.py uses it: the word table (and the tied MLM head) has
// vocab_size rows rounded up to a multiple of 8 (an lmforge config.json: its own unpadded size and divisor), whatever
// --make-vocab-size-divisible-by says. The tokenizer's ids must fit in them.
void use_config_vocabulary(const train::TrainOptions& o, int64_t tokenizer_vocab, int file_vocab, int divisible_by,
                           model::BertConfig& c) {
  c.vocab_size = std::max<int>(file_vocab, (int)tokenizer_vocab);
  c.make_vocab_size_divisible_by = divisible_by;
  const int64_t rows = ((int64_t)file_vocab + divisible_by - 1) / divisible_by * divisible_by;
  if (c.padded_vocab_size() != rows)
    throw Error(o.bert_config_file + ": \"vocab_size\": " + std::to_string(file_vocab) + " gives the model " +
                std::to_string(rows) + " word rows (padded to a multiple of " + std::to_string(divisible_by) +
                "), fewer than the tokenizer's " + std::to_string(tokenizer_vocab) + " ids (" + o.tokenizer.type +
                " from " + o.tokenizer.vocab_file + "); give the vocab_size of the vocabulary the data was made with");
}

model::BertConfig bert_config(const train::TrainOptions& o, int64_t vocab_size) {
  model::BertConfig c;
  if (!o.bert_config_file.empty())
    c = train::bert_config_from_json(read_text(o.bert_config_file), o.bert_config_file);
  const int file_vocab = c.vocab_size;
  // A plain Google/NVIDIA config reads back with divisor 1 (no lmforge_* fields): NVIDIA pads it to 8.
  const int file_divisible_by = c.make_vocab_size_divisible_by == 1 ? 8 : c.make_vocab_size_divisible_by;
  // The tokenizer's vocabulary (with Megatron's [BOS]/[EOS]: random replacements may draw them), padded.
  fill_transformer_config(o, vocab_size, c);
  if (!o.bert_config_file.empty()) use_config_vocabulary(o, vocab_size, file_vocab, file_divisible_by, c);
  c.num_layers = o.num_layers;
  c.ffn_hidden = o.ffn_hidden_size;
  c.seq_length = o.seq_length;
  c.binary_head = o.bert_binary_head;
  if (o.bert_config_file.empty()) {
    c.post_layernorm = o.bert_post_layernorm;
    // Megatron: fused bias-GELU (tanh) in the MLP, F.gelu (erf) in the head; the original BERT (HF/DLE "gelu"):
    // erf in both.
    c.mlp_gelu = gelu_kind(o.bert_post_layernorm || o.no_bias_gelu_fusion);
    c.head_gelu = kernels::GeluKind::ERF;
    c.layernorm_eps = o.bert_post_layernorm ? 1e-12f : 1e-5f;
  } else {
    c.post_layernorm = true;
    if (o.no_bias_gelu_fusion) c.mlp_gelu = kernels::GeluKind::ERF;
  }
  if (o.openai_gelu) c.mlp_gelu = c.head_gelu = kernels::GeluKind::TANH;
  if (o.layernorm_epsilon > 0.0) c.layernorm_eps = (float)o.layernorm_epsilon;
  c.validate();
  return c;
}

// `train bert --data-path DIR|GLOB|FILE.hdf5`: NVIDIA's pre-masked shards (run_pretraining.py's route). The flags
// that shape Megatron's samples have nothing to act on: a value other than the default is an error, not ignored.
std::unique_ptr<train::Task> make_hdf5_bert_task(const train::TrainOptions& o, const text::Tokenizer& tokenizer,
                                                 const std::array<int64_t, 3>& samples_per_split) {
  const std::string& spec = o.data_path[0];
  std::string split = o.split;
  split.erase(std::remove(split.begin(), split.end(), ' '), split.end());
  if (split != "969,30,1")
    throw Error("--split " + o.split + ": " + spec + " holds NVIDIA HDF5 shards, which are split by file name "
                "(*training* for training, *test*/*valid*/*eval* for validation); drop --split");
  const train::TrainOptions defaults;
  if (o.mask_prob != defaults.mask_prob || o.short_seq_prob != defaults.short_seq_prob)
    throw Error("--mask-prob / --short-seq-prob: " + spec + " holds NVIDIA HDF5 shards, masked and cut when they "
                "were made (create_pretraining_data.py --masked_lm_prob, --short_seq_prob); drop these flags");
  if (!o.data_cache_path.empty())
    throw Error("--data-cache-path: " + spec + " holds NVIDIA HDF5 shards, whose sample order is computed, not "
                "cached; drop the flag");
  train::Hdf5BertTaskConfig c;
  c.spec = spec;
  c.seed = o.seed;
  c.seq_length = o.seq_length;
  c.binary_head = o.bert_binary_head;
  c.vocab_size = (int64_t)tokenizer.vocab_size();
  c.tokenizer_note = tokenizer.type_name() + " from " + o.tokenizer.vocab_file;
  c.type_vocab_size = bert_config(o, c.vocab_size).type_vocab_size;
  c.type_vocab_source = o.bert_config_file.empty() ? std::string("Megatron's BERT")
                                                   : o.bert_config_file + "'s \"type_vocab_size\"";
  c.samples_per_split = samples_per_split;
  return std::make_unique<train::Hdf5BertTask>(c);
}

class BertFamily final : public ModelFamily {
 public:
  const char* name() const override { return "bert"; }
  const char* default_tokenizer_type() const override { return "BertWordPieceLowerCase"; }  // pretrain_bert.py
  std::string help() const override {
    return
      "Pretrain BERT on a sentence-level Megatron dataset (lmforge prep --split-sentences, or Megatron's "
      "*_text_sentence), with Megatron's pretrain_bert.py flags: masked-LM (whole-word n-grams, 80/10/10) plus "
      "sentence-order prediction, samples bit-identical to Megatron's BertDataset (samples map cached under "
      "Megatron's file name beside the data or in --data-cache-path).\n\n"
      "Model: Megatron's BERT (pre-LayerNorm, LayerNorm eps 1e-5, tanh GELU in the MLP and erf GELU in the LM "
      "head, token types, final LayerNorm, tied MLM head with bias, pooler + binary head), or with "
      "--bert-post-layernorm / --bert-config-file the original BERT (Google/NVIDIA/Hugging Face "
      "BertForPreTraining). Losses per micro-batch as Megatron: lm loss = mean cross-entropy over the masked "
      "positions, sop loss = mean over rows; the objective is their sum, averaged over micro-batches.\n"
      "Tokenizer: --tokenizer-type BertWordPieceLowerCase|BertWordPieceCase --vocab-file vocab.txt (Megatron "
      "appends [BOS] and [EOS]: bert-base-uncased has 30524 ids). Checkpoints: Hugging Face "
      "MegatronBertForPreTraining names (original flavour: BertForPreTraining) with a config.json.\n"
      "NVIDIA's HDF5 shards: a --data-path that is a directory, a quoted glob, or a .hdf5/.h5 file trains on "
      "NVIDIA DeepLearningExamples' pre-masked shards as its run_pretraining.py does (static masks, labels from "
      "masked_lm_positions/masked_lm_ids): files named *training* are the train split, *test*/*valid*/*eval* "
      "the validation split (none: no evaluation), no test split. The second loss is then NVIDIA's next-sentence "
      "prediction, logged as \"nsp loss\" (Megatron's data: sentence order, \"sop loss\"). --seq-length must "
      "equal the shards' length; --split, --mask-prob, --short-seq-prob and --data-cache-path do not apply and "
      "are refused. Order: every epoch visits the shards in a permutation and each shard's rows in a "
      "permutation, both drawn from --seed (splitmix64), so sample i is the same on any rank layout and after a "
      "resume (NVIDIA's own order is not reproduced). Token ids are checked against the vocabulary as samples are "
      "read, naming the shard and row.";
  }
  unsigned flag_groups() const override { return (unsigned)FlagGroup::MASKED_LM | (unsigned)FlagGroup::BERT; }
  std::string masking_help() const override { return "3 words, 80/10/10 [MASK]/keep/random"; }
  void validate(train::TrainOptions& o) const override {
    validate_masked_lm(o);
    // Megatron's BertDataset ([CLS] A [SEP] B [SEP]); NVIDIA's shards were masked when they were made.
    if (!(o.data_path.size() == 1 && datasets::is_hdf5_bert_data_path(o.data_path[0])))
      validate_mask_budget(o, (int64_t)o.seq_length - 3);
    validate_single_stack(o);
  }
  // --bert-config-file: the model sizes of a Google/NVIDIA bert_config.json (or an lmforge/HF BERT config.json) into
  // the options (num_layers, hidden_size, num_attention_heads, ffn_hidden_size, max_position_embeddings, dropouts,
  // init_method_std); a flag given with another value is an Error naming both.
  std::string apply_config_file(train::TrainOptions& o) const override {
    if (o.bert_config_file.empty()) return "";
    const model::BertConfig c = train::bert_config_from_json(read_text(o.bert_config_file), o.bert_config_file);
    const struct {
      const char* flag;
      int* field;
      int value;
    } sizes[] = {
        {"--num-layers", &o.num_layers, c.num_layers},
        {"--hidden-size", &o.hidden_size, c.hidden},
        {"--num-attention-heads", &o.num_attention_heads, c.heads},
        {"--ffn-hidden-size", &o.ffn_hidden_size, c.ffn()},
        {"--max-position-embeddings", &o.max_position_embeddings, c.max_positions},
    };
    for (const auto& f : sizes) {
      if (*f.field != 0 && *f.field != f.value)
        throw Error(std::string(f.flag) + " " + std::to_string(*f.field) + " contradicts " + o.bert_config_file +
                    " (" + std::to_string(f.value) + "); give one or the other");
      *f.field = f.value;
    }
    o.hidden_dropout = c.hidden_dropout;
    o.attention_dropout = c.attention_dropout;
    o.init_method_std = c.init_std;
    char note[1000];
    const int divisible_by = c.make_vocab_size_divisible_by == 1 ? 8 : c.make_vocab_size_divisible_by;
    std::snprintf(note, sizeof note,
                  "--bert-config-file %s: original (post-LN) BERT, %d layers, hidden %d, %d heads, ffn %d, max positions "
                  "%d, type vocabulary %d, GELU %s, LayerNorm eps %g, dropout hidden %g attention %g, init std %g; "
                  "vocab_size %d: %d word rows (padded to a multiple of %d%s; --make-vocab-size-divisible-by does not "
                  "apply)\n",
                  o.bert_config_file.c_str(), c.num_layers, c.hidden, c.heads, c.ffn(), c.max_positions,
                  c.type_vocab_size, c.mlp_gelu == kernels::GeluKind::ERF ? "erf" : "tanh", c.layernorm_eps,
                  c.hidden_dropout, c.attention_dropout, c.init_std, c.vocab_size,
                  (c.vocab_size + divisible_by - 1) / divisible_by * divisible_by, divisible_by,
                  c.make_vocab_size_divisible_by == 1 ? " as NVIDIA's run_pretraining.py pads it" : ", as the file says");
    return note;
  }
  bool checks_token_ids(const std::string& prefix) const override {
    return !datasets::is_hdf5_bert_data_path(prefix);
  }
  train::ModelShape shape(const train::TrainOptions& o, int64_t vocab_size) const override {
    const model::BertConfig c = bert_config(o, vocab_size);
    return shape_of<model::Bert>(c, c.num_layers, c.seq_length);
  }
  std::string pipeline_stage_layers(const train::TrainOptions& o) const override { return layer_stage_text(o); }
  std::unique_ptr<train::Model> make_model(const train::TrainOptions& o, int64_t vocab_size, kernels::Backend& backend,
                                           dist::Communicator* tensor_parallel, int pipeline_rank) const override {
    return std::make_unique<train::BertModel>(bert_config(o, vocab_size), backend, tensor_parallel,
                                              layer_stage(o, pipeline_rank));
  }
  std::unique_ptr<train::Task> make_task(const train::TrainOptions& o, const text::Tokenizer& tokenizer,
                                         const std::array<int64_t, 3>& samples_per_split) const override {
    if (o.data_path.size() == 1 && datasets::is_hdf5_bert_data_path(o.data_path[0]))
      return make_hdf5_bert_task(o, tokenizer, samples_per_split);
    if (std::all_of(o.data_path.begin(), o.data_path.end(), datasets::is_hdf5_bert_data_path))
      throw Error("--data-path: " + std::to_string(o.data_path.size()) + " HDF5 paths (" + o.data_path[0] +
                  " ...): give one directory, file or glob pattern; quote a pattern so that the shell does not "
                  "expand it ('dir/*training*.hdf5')");
    // With the binary head every sample is two segments, token types 0 and 1: a model with one type cannot read
    // them (named now, not as an out-of-range row in the forward pass).
    if (const int types = bert_config(o, (int64_t)tokenizer.vocab_size()).type_vocab_size; o.bert_binary_head && types < 2)
      throw Error(o.bert_config_file + ": \"type_vocab_size\": " + std::to_string(types) + ", but the samples of " +
                  o.data_path[0] + " are sentence pairs with token types 0 and 1 (the binary head's segments); set "
                  "\"type_vocab_size\": 2, or train on single segments with --bert-no-binary-head");
    auto dc = masked_lm_dataset_config<datasets::BertDatasetConfig>(o);
    dc.seq_length = o.seq_length;
    dc.binary_head = o.bert_binary_head;
    return std::make_unique<train::BertTask>(datasets::build_bert_datasets(dc, samples_per_split),
                                             o.bert_binary_head);
  }
  // bert_config_json: MegatronBertForPreTraining's or BertForPreTraining's type.
  std::vector<std::string> checkpoint_model_types() const override { return {"megatron-bert", "bert"}; }
};

}  // namespace

const ModelFamily& bert_family() {
  static const BertFamily family;
  return family;
}

}  // namespace lmforge::families
