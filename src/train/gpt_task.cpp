// defines: GptModel, GptTask
#include "train/gpt_task.h"

#include <algorithm>
#include <cstdio>

#include "train/gpt_hf_config.h"
#include "train/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

GptModel::GptModel(const model::GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                   model::Stage stage)
    : gpt_(config, backend, tensor_parallel, stage) {}

std::vector<double> GptModel::forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step) {
  const bool last = last_stage();
  if (batch.tokens.size() != (size_t)batch.B * batch.T || (last && batch.targets.size() != batch.tokens.size()))
    throw Error("GPT: a micro-batch needs B·T tokens and targets");
  const float loss =
      gpt_.forward_stage(batch.tokens.data(), input, last ? batch.targets.data() : nullptr, batch.B, batch.T, &step);
  if (!last) return {};
  return {(double)loss};
}

// The tied word embedding lives on the first stage (lookup) and the last (LM head) when they are different stages.
std::vector<std::string> GptModel::shared_tensors() const {
  const model::Stage& s = gpt_.stage();
  if (s.pre_process == s.post_process) return {};
  return {"transformer.wte.weight"};
}

std::vector<double> GptModel::forward(const Batch& batch, const layers::ForwardStep& step) {
  if (batch.tokens.size() != (size_t)batch.B * batch.T || batch.targets.size() != batch.tokens.size())
    throw Error("GPT: a micro-batch needs B·T tokens and targets");
  return {(double)gpt_.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T, &step)};
}

std::string GptModel::config_json() const { return gpt_config_json(gpt_.config()); }

// Every shape-defining setting is compared, not only the tensors' shapes: a change of --num-attention-heads keeps
// every tensor's shape and would silently train (and save) another model.
void GptModel::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::GPTConfig saved = gpt_config_from_json(json, source);
  const model::GPTConfig& c = gpt_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "a different --vocab-file?", source);
  check_checkpoint_settings(
      {
          {"--num-layers", saved.num_layers, c.num_layers},
          {"--hidden-size", saved.hidden, c.hidden},
          {"--num-attention-heads", saved.heads, c.heads},
          {"--max-position-embeddings", saved.max_positions, c.max_positions},
          {"--make-vocab-size-divisible-by (padded vocabulary)", saved.padded_vocab_size(), c.padded_vocab_size()},
      },
      source);
}

std::string GptModel::describe() const {
  const model::GPTConfig& c = gpt_.config();
  char line[512];
  std::snprintf(line, sizeof line,
                "GPT: %d layers, hidden %d, %d heads, seq %d, vocab %d (padded %d), %zu parameters, dropout hidden %g "
                "attention %g\n",
                c.num_layers, c.hidden, c.heads, c.seq_length, c.vocab_size, c.padded_vocab_size(),
                gpt_.table().whole_numel(), c.hidden_dropout, c.attention_dropout);
  return line;
}

GptTask::GptTask(std::unique_ptr<datasets::GptSampleSource> source, int seq_length)
    : source_(std::move(source)), seq_length_(seq_length) {}

bool GptTask::has_split(SplitKind split) const { return source_->has_split((datasets::Split)split); }

int64_t GptTask::split_size(SplitKind split) const {
  return source_->has_split((datasets::Split)split) ? source_->size((datasets::Split)split) : 0;
}

void GptTask::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  const int T = seq_length_, B = micro_batch;
  const auto s = (datasets::Split)split;
  const int64_t available = split_size(split);
  batch.B = B;
  batch.T = T;
  batch.tokens.resize((size_t)B * T);
  batch.targets.resize((size_t)B * T);
  for (int b = 0; b < B; b++) {
    const int64_t index = first + b;
    if (index >= available)
      throw Error(std::string("the ") + datasets::split_name(s) + " split has " + std::to_string(available) +
                  " samples; sample " + std::to_string(index) +
                  " was asked (the flags differ from the run that built it?)");
    source_->sample(s, index, sample_);
    std::copy(sample_.begin(), sample_.begin() + T, batch.tokens.begin() + (size_t)b * T);
    std::copy(sample_.begin() + 1, sample_.begin() + T + 1, batch.targets.begin() + (size_t)b * T);
  }
}

// Megatron's GPTDataset returns {"text": the seq_length + 1 tokens} per sample.
std::string GptTask::sample_json(SplitKind split, int64_t index) {
  const auto s = (datasets::Split)split;
  if (index >= split_size(split))
    throw Error(std::string("the ") + datasets::split_name(s) + " split has " + std::to_string(split_size(split)) +
                " samples; sample " + std::to_string(index) + " was asked");
  source_->sample(s, index, sample_);
  std::string line = sample_json_head(split, index);
  append_json_field(line, "text", sample_.data(), sample_.size());
  return line + "}";
}

}  // namespace lmforge::train
