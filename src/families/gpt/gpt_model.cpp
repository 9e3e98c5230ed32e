// defines: GPTModel
#include "families/gpt/gpt_model.h"

#include <algorithm>
#include <cstdio>

#include "families/gpt/gpt_hf_config.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

GPTModel::GPTModel(const model::GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                   model::Stage stage)
    : FamilyModel(config, backend, tensor_parallel, stage) {}

std::vector<double> GPTModel::forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                            size_t slot) {
  const bool last = last_stage();
  if (batch.tokens.size() != (size_t)batch.B * batch.T || (last && batch.targets.size() != batch.tokens.size()))
    throw Error("GPT: a micro-batch needs B·T tokens and targets");
  const float loss =
      model_.forward_stage(batch.tokens.data(), input, last ? batch.targets.data() : nullptr, batch.B, batch.T, &step,
                         slot);
  if (!last) return {};
  return {(double)loss};
}

// The tied word embedding lives on the first stage (lookup) and the last (LM head) when they are different stages.
std::vector<std::string> GPTModel::shared_tensors() const {
  const model::Stage& s = model_.stage();
  if (s.pre_process == s.post_process) return {};
  return {"transformer.wte.weight"};
}

std::vector<double> GPTModel::forward(const Batch& batch, const layers::ForwardStep& step) {
  if (batch.tokens.size() != (size_t)batch.B * batch.T || batch.targets.size() != batch.tokens.size())
    throw Error("GPT: a micro-batch needs B·T tokens and targets");
  return {(double)model_.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T, &step)};
}

std::string GPTModel::config_json() const { return gpt_config_json(model_.config()); }

// Every shape-defining setting is compared, not only the tensors' shapes: a change of --num-attention-heads keeps
// every tensor's shape and would silently train (and save) another model.
void GPTModel::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::GPTConfig saved = gpt_config_from_json(json, source);
  const model::GPTConfig& c = model_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "a different --vocab-file?", source);
  check_checkpoint_settings({{"--num-layers", saved.num_layers, c.num_layers}}, source);
  check_checkpoint_transformer(saved, c, source);
}

std::string GPTModel::describe() const {
  const model::GPTConfig& c = model_.config();
  char line[512];
  std::snprintf(line, sizeof line,
                "GPT: %d layers, hidden %d, %d heads, seq %d, vocab %d (padded %d), %zu parameters, dropout hidden %g "
                "attention %g\n",
                c.num_layers, c.hidden, c.heads, c.seq_length, c.vocab_size, c.padded_vocab_size(),
                model_.table().whole_numel(), c.hidden_dropout, c.attention_dropout);
  return line;
}

}  // namespace lmforge::train
