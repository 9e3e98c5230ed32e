// defines: model_shape, check_memory, make_model, make_task
#include "train/model_factory.h"

#include <unistd.h>

#include <cstdio>

#include "datasets/gpt_dataset.h"
#include "model/gpt.h"
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
  unknown_model(o.model_type);
}

}  // namespace lmforge::train
