// defines: BertModel, bert_loss_names()
#include "families/bert/bert_model.h"

#include "families/bert/bert_hf_config.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

namespace {

const char* bert_gelu_name(kernels::GeluKind kind) { return kind == kernels::GeluKind::TANH ? "tanh" : "erf"; }

}  // namespace

std::vector<std::string> bert_loss_names(const model::BertConfig& config) {
  if (config.binary_head) return {"lm loss", "sop loss"};
  return {"lm loss"};
}

BertModel::BertModel(const model::BertConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                     model::Stage stage)
    : FamilyModel(config, backend, tensor_parallel, stage) {}

model::BertInputs BertModel::inputs(const Batch& batch) const {
  const size_t N = (size_t)batch.B * batch.T;
  auto need = [](size_t size, size_t want, const char* what, bool optional) {
    check_batch_field("BERT", size, want, what, optional);
  };
  need(batch.tokens.size(), N, "tokens", false);
  need(batch.targets.size(), N, "targets (masked-LM labels)", false);
  need(batch.loss_mask.size(), N, "loss_mask", false);
  need(batch.token_types.size(), N, "token_types", true);
  need(batch.padding.size(), N, "padding", true);
  need(batch.labels.size(), (size_t)batch.B, "labels (is_random)", !model_.config().binary_head);
  model::BertInputs in;
  in.B = batch.B;
  in.T = batch.T;
  in.tokens = batch.tokens.data();
  in.types = batch.token_types.empty() ? nullptr : batch.token_types.data();
  in.padding = batch.padding.empty() ? nullptr : batch.padding.data();
  in.labels = batch.targets.data();
  in.loss_mask = batch.loss_mask.data();
  in.is_random = batch.labels.empty() ? nullptr : batch.labels.data();
  return in;
}

std::vector<double> BertModel::forward(const Batch& batch, const layers::ForwardStep& step) {
  const model::BertLosses l = model_.forward(inputs(batch), &step);
  if (model_.config().binary_head) return {l.lm, l.sop};
  return {l.lm};
}

std::vector<double> BertModel::forward_stage(const Batch& batch, const float* input,
                                             const layers::ForwardStep& step, size_t slot) {
  const model::BertLosses l = model_.forward_stage(inputs(batch), input, &step, slot);
  if (!last_stage()) return {};
  if (model_.config().binary_head) return {l.lm, l.sop};
  return {l.lm};
}

std::vector<std::string> BertModel::shared_tensors() const {
  const model::Stage& s = model_.stage();
  if (s.pre_process == s.post_process) return {};
  return {"bert.embeddings.word_embeddings.weight"};
}

// Every shape- or function-defining setting is compared: resuming with another flavour, head or GELU would train
// another model with the same tensors.
void BertModel::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::BertConfig saved = bert_config_from_json(json, source);
  const model::BertConfig& c = model_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "a different --vocab-file?", source);
  check_checkpoint_settings({{"--num-layers", saved.num_layers, c.num_layers}}, source);
  check_checkpoint_transformer(saved, c, source);
  check_checkpoint_settings(
      {
          {"the binary head (--bert-no-binary-head)", saved.binary_head, c.binary_head},
          {"the post-LayerNorm (original) flavour", saved.post_layernorm, c.post_layernorm},
          {"the MLP GELU (0 tanh, 1 erf)", (int64_t)saved.mlp_gelu, (int64_t)c.mlp_gelu},
          {"the MLM-head GELU (0 tanh, 1 erf)", (int64_t)saved.head_gelu, (int64_t)c.head_gelu},
      },
      source);
  if (saved.layernorm_eps != c.layernorm_eps)
    throw Error(source + ": the checkpoint was trained with LayerNorm epsilon " +
                std::to_string(saved.layernorm_eps) + ", this run asks for " + std::to_string(c.layernorm_eps));
}

std::string BertModel::describe() const {
  const model::BertConfig& c = model_.config();
  char line[640];
  std::snprintf(line, sizeof line,
                "BERT (%s): %d layers, hidden %d, %d heads, ffn %d, seq %d, vocab %d (padded %d), binary head %s, "
                "GELU mlp %s head %s, LayerNorm eps %g, %zu parameters, dropout hidden %g attention %g\n",
                c.post_layernorm ? "original post-LN" : "Megatron pre-LN", c.num_layers, c.hidden, c.heads, c.ffn(),
                c.seq_length, c.vocab_size, c.padded_vocab_size(), c.binary_head ? "on" : "off",
                bert_gelu_name(c.mlp_gelu), bert_gelu_name(c.head_gelu), (double)c.layernorm_eps,
                model_.table().whole_numel(), c.hidden_dropout, c.attention_dropout);
  return line;
}

}  // namespace lmforge::train
