// defines: model_shape, check_memory, make_model, make_task
#include "train/model_factory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "datasets/gpt_dataset.h"
#include "model/gpt.h"
#include "train/bert_model.h"
#include "train/bert_task.h"
#include "train/hdf5_bert_task.h"
#include "train/t5_model.h"
#include "train/gpt_task.h"
#include "parallel/process_groups.h"
#include "util/error.h"

namespace lmforge::train {
using parallel::EncoderDecoderStages;
using parallel::encoder_decoder_stages;
using parallel::stage_layer_counts;  // (parallel/process_groups.h)

namespace {

// --recompute-* / --checkpoint-activations as train_options.cpp resolved them (no method without full).
layers::Recompute recompute_of(const TrainOptions& o) {
  layers::Recompute r;
  r.granularity = o.recompute_granularity;
  if (!o.recompute_method.empty()) r.method = o.recompute_method;
  r.num_layers = o.recompute_num_layers;
  return r;
}

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
  c.recompute = recompute_of(o);
  c.validate();
  return c;
}

kernels::GeluKind gelu_kind(bool erf) { return erf ? kernels::GeluKind::ERF : kernels::GeluKind::TANH; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the model config file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}


model::BertConfig bert_config(const TrainOptions& o, int64_t vocab_size) {
  model::BertConfig c;
  if (!o.bert_config_file.empty()) c = bert_config_from_json(read_text(o.bert_config_file), o.bert_config_file);
  c.num_layers = o.num_layers;
  c.hidden = o.hidden_size;
  c.heads = o.num_attention_heads;
  c.ffn_hidden = o.ffn_hidden_size;
  c.seq_length = o.seq_length;
  c.max_positions = o.max_position_embeddings;
  // The tokenizer's vocabulary (with Megatron's [BOS]/[EOS]: random replacements may draw them), padded.
  c.vocab_size = (int)vocab_size;
  c.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
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
  c.init_std = (float)o.init_method_std;
  c.hidden_dropout = (float)o.hidden_dropout;
  c.attention_dropout = (float)o.attention_dropout;
  c.recompute = recompute_of(o);
  c.validate();
  return c;
}

model::T5Config t5_config(const TrainOptions& o, int64_t vocab_size) {
  model::T5Config c;
  c.encoder_num_layers = o.num_layers;
  c.decoder_num_layers = o.decoder_num_layers;
  c.hidden = o.hidden_size;
  c.heads = o.num_attention_heads;
  c.ffn_hidden = o.ffn_hidden_size;
  c.encoder_seq_length = o.seq_length;
  c.decoder_seq_length = o.decoder_seq_length;
  c.max_positions = o.max_position_embeddings;
  c.vocab_size = (int)vocab_size;
  c.make_vocab_size_divisible_by = o.make_vocab_size_divisible_by;
  c.gelu = gelu_kind(o.no_bias_gelu_fusion && !o.openai_gelu);
  if (o.layernorm_epsilon > 0.0) c.layernorm_eps = (float)o.layernorm_epsilon;
  c.init_std = (float)o.init_method_std;
  c.hidden_dropout = (float)o.hidden_dropout;
  c.attention_dropout = (float)o.attention_dropout;
  c.recompute = recompute_of(o);
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

// `train bert --data-path DIR|GLOB|FILE.hdf5`: NVIDIA's pre-masked shards (run_pretraining.py's route). The flags
// that shape Megatron's samples have nothing to act on: a value other than the default is an error, not ignored.
std::unique_ptr<Task> make_hdf5_bert_task(const TrainOptions& o, const text::Tokenizer& tokenizer,
                                          const std::array<int64_t, 3>& samples_per_split) {
  const std::string& spec = o.data_path[0];
  std::string split = o.split;
  split.erase(std::remove(split.begin(), split.end(), ' '), split.end());
  if (split != "969,30,1")
    throw Error("--split " + o.split + ": " + spec + " holds NVIDIA HDF5 shards, which are split by file name "
                "(*training* for training, *test*/*valid*/*eval* for validation); drop --split");
  const TrainOptions defaults;
  if (o.mask_prob != defaults.mask_prob || o.short_seq_prob != defaults.short_seq_prob)
    throw Error("--mask-prob / --short-seq-prob: " + spec + " holds NVIDIA HDF5 shards, masked and cut when they "
                "were made (create_pretraining_data.py --masked_lm_prob, --short_seq_prob); drop these flags");
  if (!o.data_cache_path.empty())
    throw Error("--data-cache-path: " + spec + " holds NVIDIA HDF5 shards, whose sample order is computed, not "
                "cached; drop the flag");
  Hdf5BertTaskConfig c;
  c.spec = spec;
  c.seed = o.seed;
  c.seq_length = o.seq_length;
  c.binary_head = o.bert_binary_head;
  c.vocab_size = (int64_t)tokenizer.vocab_size();
  c.tokenizer_note = tokenizer.type_name() + " from " + o.tokenizer.vocab_file;
  c.samples_per_split = samples_per_split;
  return std::make_unique<Hdf5BertTask>(c);
}

template <typename Net, typename Config>
ModelShape shape_of(const Config& c, int64_t attention_layers, int64_t positions) {
  return {(int64_t)Net::parameter_table(c).whole_numel(), (int64_t)c.padded_vocab_size(), attention_layers,
          (int64_t)c.heads, positions};
}

// The settings BertDatasetConfig and T5DatasetConfig share (Megatron's masked-LM data flags).
template <typename DatasetConfig>
DatasetConfig masked_lm_dataset_config(const TrainOptions& o) {
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

}  // namespace

ModelShape model_shape(const TrainOptions& o, int64_t vocab_size) {
  if (o.model_type == "gpt") {
    const model::GPTConfig c = gpt_config(o, vocab_size);
    return shape_of<model::GPT>(c, c.num_layers, c.seq_length);
  }
  if (o.model_type == "bert") {
    const model::BertConfig c = bert_config(o, vocab_size);
    return shape_of<model::Bert>(c, c.num_layers, c.seq_length);
  }
  if (o.model_type == "t5") {
    const model::T5Config c = t5_config(o, vocab_size);
    // A decoder layer attends twice (itself and the encoder).
    return shape_of<model::T5>(c, c.encoder_num_layers + 2 * c.decoder_layers(),
                               std::max(c.encoder_seq_length, c.decoder_seq_length));
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

std::string apply_model_config_file(TrainOptions& o) {
  if (o.bert_config_file.empty()) return "";
  if (o.model_type != "bert") throw Error("--bert-config-file applies to `lmforge train bert` only");
  const model::BertConfig c = bert_config_from_json(read_text(o.bert_config_file), o.bert_config_file);
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
  char note[600];
  std::snprintf(note, sizeof note,
                "--bert-config-file %s: original (post-LN) BERT, %d layers, hidden %d, %d heads, ffn %d, max positions "
                "%d, type vocabulary %d, GELU %s, LayerNorm eps %g, dropout hidden %g attention %g, init std %g\n",
                o.bert_config_file.c_str(), c.num_layers, c.hidden, c.heads, c.ffn(), c.max_positions,
                c.type_vocab_size, c.mlp_gelu == kernels::GeluKind::ERF ? "erf" : "tanh", c.layernorm_eps,
                c.hidden_dropout, c.attention_dropout, c.init_std);
  return note;
}

namespace {

// A decoder-only or encoder-only stack cut into consecutive layers (stage_layer_counts); the first stage holds the
// embedding, the last the head.
model::Stage layer_stage(const TrainOptions& o, int rank) {
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

EncoderDecoderStages t5_stages(const TrainOptions& o) {
  return encoder_decoder_stages(o.num_layers, o.decoder_num_layers > 0 ? o.decoder_num_layers : o.num_layers,
                                o.pipeline_model_parallel_size, o.pipeline_model_parallel_split_rank);
}

// Megatron's T5 stages: before the split rank S the encoder's layers, from it the decoder's (numbered after the
// encoder's, model::Stage); what each stage holds besides follows from its layers (model::T5).
model::Stage t5_stage(const TrainOptions& o, int rank) {
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

}  // namespace

std::string pipeline_stage_layers(const TrainOptions& o) {
  const int P = o.pipeline_model_parallel_size;
  if (o.model_type == "t5") {
    const EncoderDecoderStages split = t5_stages(o);
    std::string out = "encoder";
    for (int s = 0; s < P; s++) {
      out += s == split.split_rank ? " | decoder " : " ";
      out += std::to_string(split.layers[(size_t)s]);
    }
    return out;
  }
  std::string out;
  for (int n : stage_layer_counts(o.num_layers, P, o.decoder_first_pipeline_num_layers,
                                  o.decoder_last_pipeline_num_layers)) {
    if (!out.empty()) out += " ";
    out += std::to_string(n);
  }
  return out;
}

std::unique_ptr<Model> make_model(const TrainOptions& o, int64_t vocab_size, dist::Communicator* tensor_parallel,
                                  int pipeline_rank) {
  if (o.model_type == "gpt")
    return std::make_unique<GptModel>(gpt_config(o, vocab_size), kernels::backend_for(o.device), tensor_parallel,
                                      layer_stage(o, pipeline_rank));
  if (o.model_type == "bert")
    return std::make_unique<BertModel>(bert_config(o, vocab_size), kernels::backend_for(o.device), tensor_parallel,
                                       layer_stage(o, pipeline_rank));
  if (o.model_type == "t5")
    return std::make_unique<T5Model>(t5_config(o, vocab_size), kernels::backend_for(o.device), tensor_parallel,
                                     t5_stage(o, pipeline_rank));
  unknown_model(o.model_type);
}

std::unique_ptr<Task> make_task(const TrainOptions& o, const text::Tokenizer& tokenizer,
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
  if (o.model_type == "bert" && o.data_path.size() == 1 && datasets::is_hdf5_bert_data_path(o.data_path[0]))
    return make_hdf5_bert_task(o, tokenizer, samples_per_split);
  if (o.model_type == "bert" && std::all_of(o.data_path.begin(), o.data_path.end(), datasets::is_hdf5_bert_data_path))
    throw Error("--data-path: " + std::to_string(o.data_path.size()) + " HDF5 paths (" + o.data_path[0] +
                " ...): give one directory, file or glob pattern; quote a pattern so that the shell does not expand "
                "it ('dir/*training*.hdf5')");
  if (o.model_type == "bert") {
    auto dc = masked_lm_dataset_config<datasets::BertDatasetConfig>(o);
    dc.seq_length = o.seq_length;
    dc.binary_head = o.bert_binary_head;
    return std::make_unique<BertTask>(datasets::build_bert_datasets(dc, samples_per_split), o.bert_binary_head);
  }
  if (o.model_type == "t5") {
    auto dc = masked_lm_dataset_config<datasets::T5DatasetConfig>(o);
    dc.encoder_seq_length = o.seq_length;
    dc.decoder_seq_length = o.decoder_seq_length;
    return std::make_unique<T5Task>(datasets::build_t5_datasets(dc, samples_per_split));
  }
  unknown_model(o.model_type);
}

}  // namespace lmforge::train
