// defines: model_shape, check_memory, make_model, make_task
#include "train/model_factory.h"

#include <unistd.h>

#include <cstdio>

#include "datasets/gpt_dataset.h"
#include "model/gpt.h"
#include "train/bert_task.h"
#include "train/gpt_task.h"
#include "util/error.h"

namespace lmforge::train {
namespace {

model::GPTConfig gpt_config(const TrainOptions& o, int64_t vocab_size) {
  model::GPTConfig c;
  c.num_layers = o.num_layers;
  c.hidden = o.hidden_size;
  c.heads = o.num_attention_heads;
  c.seq_length = o.seq_length;
  c.max_positions = o.max_position_embeddings;
  c.vocab_size = (int)vocab_size;
  c.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
  c.init_std = (float)o.init_method_std;
  c.hidden_dropout = (float)o.hidden_dropout;
  c.attention_dropout = (float)o.attention_dropout;
  c.validate();
  return c;
}

[[noreturn]] void unknown_model(const std::string& type) {
  throw Error("unknown model type '" + type + "' (lmforge train gpt|bert|t5)");
}

// Megatron builds BERT and T5 samples from one sentence-level dataset (its BertDataset/T5Dataset raise
// NotImplementedError for a blend).
std::string single_prefix(const TrainOptions& o) {
  if (o.data_path.size() != 1)
    throw Error("--data-path: " + o.model_type + " trains on one sentence-level dataset prefix; Megatron does not "
                "blend BERT or T5 datasets (merge the datasets with `lmforge merge` instead)");
  return o.data_path[0];
}

// The masking needs the WordPiece vocabulary as Megatron's BertWordPiece tokenizers present it ("##" pieces,
// [CLS]/[SEP]/[MASK]/[PAD], the ids a random replacement draws from).
datasets::MaskedLmVocab masked_lm_vocab(const TrainOptions& o) {
  if (o.tokenizer.type != "BertWordPieceLowerCase" && o.tokenizer.type != "BertWordPieceCase")
    throw Error("--tokenizer-type " + o.tokenizer.type + ": " + o.model_type +
                " data is masked over a WordPiece vocabulary; use BertWordPieceLowerCase or BertWordPieceCase with "
                "--vocab-file vocab.txt (Megatron's BERT and T5 tokenizers)");
  return datasets::load_bert_vocab(o.tokenizer.vocab_file, o.tokenizer.vocab_extra_ids);
}

}  // namespace

ModelShape model_shape(const TrainOptions& o, int64_t vocab_size) {
  ModelShape s;
  if (o.model_type == "gpt") {
    const model::GPTConfig c = gpt_config(o, vocab_size);
    s.whole_parameters = (int64_t)model::GPT::parameter_table(c).whole_numel();
    s.padded_vocab = c.padded_vocab_size();
    s.layers = c.num_layers;
    s.heads = c.heads;
    s.positions = c.seq_length;
    return s;
  }
  if (o.model_type == "bert" || o.model_type == "t5") {
    // Transformer layers (q, k, v, output: 4·H²; MLP 2·H·F) and the tables (padded vocabulary, positions).
    const int64_t H = o.hidden_size, F = o.ffn_hidden_size > 0 ? o.ffn_hidden_size : 4 * H;
    const int64_t d = o.make_vocab_size_divisible_by;
    s.padded_vocab = (vocab_size + d - 1) / d * d;
    const int64_t decoder = o.model_type == "t5" ? (o.decoder_num_layers > 0 ? o.decoder_num_layers : o.num_layers) : 0;
    s.layers = o.num_layers + 2 * decoder;  // a decoder layer attends twice (itself, the encoder)
    s.whole_parameters = (o.num_layers + decoder) * (4 * H * H + 2 * H * F) + decoder * 4 * H * H +
                         (s.padded_vocab + o.max_position_embeddings + 2) * H;
    s.heads = o.num_attention_heads;
    s.positions = o.seq_length;
    return s;
  }
  unknown_model(o.model_type);
}

void check_memory(const ModelShape& s, const TrainOptions& o) {
  const double T = (double)s.positions, B = o.micro_batch_size, TP = o.tensor_model_parallel_size;
  const double state_arrays = o.optimizer.kind == "sgd" ? (o.optimizer.sgd_momentum != 0.0 ? 1 : 0) : 2;
  const double weights = 4.0 * (double)s.whole_parameters / TP * (2.0 + state_arrays);
  const double activations =
      4.0 * ((double)s.layers * B * ((double)s.heads / TP) * T * T + B * T * (double)s.padded_vocab / TP);
  const double available = (double)::sysconf(_SC_PHYS_PAGES) * (double)::sysconf(_SC_PAGESIZE);
  if (available > 0 && weights + activations > available) {
    char msg[600];
    std::snprintf(msg, sizeof msg,
                  "this run needs at least %.1f GB per rank (parameters, gradients and optimizer state %.1f GB; "
                  "attention probabilities and logits of one micro-batch %.1f GB) and the machine has %.1f GB: "
                  "lower --seq-length, --micro-batch-size or the model size, or raise --tensor-model-parallel-size",
                  (weights + activations) / 1e9, weights / 1e9, activations / 1e9, available / 1e9);
    throw Error(msg);
  }
}

std::unique_ptr<Model> make_model(const TrainOptions& o, int64_t vocab_size, dist::Communicator* tensor_parallel) {
  if (o.model_type == "gpt") return std::make_unique<GptModel>(gpt_config(o, vocab_size), tensor_parallel);
  unknown_model(o.model_type);
}

std::unique_ptr<Task> make_task(const TrainOptions& o, const text::Tokenizer& /*tokenizer*/,
                                const std::array<int64_t, 3>& samples_per_split) {
  if (o.model_type == "gpt") {
    datasets::GptDatasetConfig dc;
    dc.split = o.split;
    dc.seed = o.seed;
    dc.seq_length = o.seq_length;
    dc.cache_path = o.data_cache_path;
    return std::make_unique<GptTask>(std::make_unique<datasets::GptSampleSource>(o.data_path, dc, samples_per_split),
                                     o.seq_length);
  }
  if (o.model_type == "bert") {
    datasets::BertDatasetConfig dc;
    dc.prefix = single_prefix(o);
    dc.split = o.split;
    dc.seq_length = o.seq_length;
    dc.mask_prob = o.mask_prob;
    dc.short_seq_prob = o.short_seq_prob;
    dc.seed = (int32_t)o.seed;
    dc.binary_head = o.bert_binary_head;
    dc.cache_dir = o.data_cache_path;
    dc.vocab = masked_lm_vocab(o);
    return std::make_unique<BertTask>(datasets::build_bert_datasets(dc, samples_per_split), o.bert_binary_head);
  }
  unknown_model(o.model_type);
}

}  // namespace lmforge::train
