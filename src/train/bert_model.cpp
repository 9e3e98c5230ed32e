// defines: BertModel, bert_config_json(), bert_config_from_json(), bert_loss_names()
#include "train/bert_model.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "train/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

using checkpoint::config_bool;
using checkpoint::config_number;
using checkpoint::config_positive_int;
using checkpoint::config_string;
using checkpoint::shortest_decimal;
namespace {

using kernels::GeluKind;

// HF's activation names: "gelu" is exact erf in transformers; "gelu_new" / "gelu_pytorch_tanh" the tanh form.
const char* hf_act(GeluKind kind) { return kind == GeluKind::TANH ? "gelu_new" : "gelu"; }
const char* gelu_name(GeluKind kind) { return kind == GeluKind::TANH ? "tanh" : "erf"; }

GeluKind parse_act(const std::string& name, const std::string& key, const std::string& source) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "tanh" || name == "megatron_bias_gelu")
    return GeluKind::TANH;
  if (name == "gelu" || name == "erf") return GeluKind::ERF;
  throw Error(source + ": \"" + key + "\" is \"" + name +
              "\"; this model implements \"gelu\" (erf) and \"gelu_new\" (tanh)");
}

}  // namespace

std::vector<std::string> bert_loss_names(const model::BertConfig& config) {
  if (config.binary_head) return {"lm loss", "sop loss"};
  return {"lm loss"};
}

std::string bert_config_json(const model::BertConfig& c) {
  checkpoint::JsonObject o;
  const bool megatron = !c.post_layernorm;
  o["architectures"] = checkpoint::RawJson{megatron ? "[\"MegatronBertForPreTraining\"]" : "[\"BertForPreTraining\"]"};
  o["model_type"] = std::string(megatron ? "megatron-bert" : "bert");
  o["vocab_size"] = (int64_t)c.padded_vocab_size();
  o["hidden_size"] = (int64_t)c.hidden;
  o["num_hidden_layers"] = (int64_t)c.num_layers;
  o["num_attention_heads"] = (int64_t)c.heads;
  o["intermediate_size"] = (int64_t)c.ffn();
  o["hidden_act"] = std::string(hf_act(c.mlp_gelu));
  o["hidden_dropout_prob"] = shortest_decimal(c.hidden_dropout);
  o["attention_probs_dropout_prob"] = shortest_decimal(c.attention_dropout);
  o["max_position_embeddings"] = (int64_t)c.max_positions;
  o["type_vocab_size"] = (int64_t)c.type_vocab_size;
  o["initializer_range"] = shortest_decimal(c.init_std);
  o["layer_norm_eps"] = shortest_decimal(c.layernorm_eps);
  o["pad_token_id"] = (int64_t)0;
  o["position_embedding_type"] = std::string("absolute");
  o["tie_word_embeddings"] = true;
  o["lmforge_vocab_size"] = (int64_t)c.vocab_size;
  o["lmforge_make_vocab_size_divisible_by"] = (int64_t)c.make_vocab_size_divisible_by;
  o["lmforge_seq_length"] = (int64_t)c.seq_length;
  o["lmforge_binary_head"] = c.binary_head;
  o["lmforge_mlp_gelu"] = std::string(gelu_name(c.mlp_gelu));
  o["lmforge_head_gelu"] = std::string(gelu_name(c.head_gelu));
  std::string note;
  if (c.mlp_gelu != c.head_gelu)
    note += std::string("the MLP uses the ") + gelu_name(c.mlp_gelu) + " GELU and the MLM head the " +
            gelu_name(c.head_gelu) + " GELU (Megatron's fused bias-GELU); Hugging Face applies hidden_act in both, "
            "so it computes a slightly different function. ";
  if (megatron && !c.binary_head)
    note += "Trained without the binary head (--bert-no-binary-head): token_type_embeddings are zero and "
            "bert.pooler / cls.seq_relationship are absent (Hugging Face initialises them randomly; they do not "
            "affect the masked-LM logits). ";
  if (!megatron && !c.binary_head)
    note += "Trained without the NSP head: bert.pooler and cls.seq_relationship are absent. ";
  note += "vocab_size is the padded vocabulary (lmforge_vocab_size real tokens); padded rows are part of the "
          "softmax as in Megatron.";
  o["lmforge_note"] = note;
  return checkpoint::to_json(o);
}

model::BertConfig bert_config_from_json(const std::string& text, const std::string& source) {
  const checkpoint::JsonObject o = checkpoint::parse_json_object(text, source);
  model::BertConfig c;
  const std::string type = config_string(o, "model_type", "bert", source);
  if (type != "bert" && type != "megatron-bert")
    throw Error(source + ": model_type \"" + type + "\" is not a BERT (\"bert\" or \"megatron-bert\")");
  c.post_layernorm = type == "bert";
  c.num_layers = config_positive_int(o, "num_hidden_layers", source);
  c.hidden = config_positive_int(o, "hidden_size", source);
  c.heads = config_positive_int(o, "num_attention_heads", source);
  c.ffn_hidden = config_positive_int(o, "intermediate_size", source);
  c.max_positions = config_positive_int(o, "max_position_embeddings", source);
  c.type_vocab_size = o.count("type_vocab_size") ? config_positive_int(o, "type_vocab_size", source) : 2;
  const int file_vocab = config_positive_int(o, "vocab_size", source);
  if (o.count("lmforge_vocab_size")) {
    c.vocab_size = config_positive_int(o, "lmforge_vocab_size", source);
    c.make_vocab_size_divisible_by = config_positive_int(o, "lmforge_make_vocab_size_divisible_by", source);
    if (c.padded_vocab_size() != file_vocab)
      throw Error(source + ": vocab_size " + std::to_string(file_vocab) + " is not lmforge_vocab_size " +
                  std::to_string(c.vocab_size) + " padded to a multiple of " +
                  std::to_string(c.make_vocab_size_divisible_by));
  } else {
    c.vocab_size = file_vocab;
    c.make_vocab_size_divisible_by = 1;
  }
  // Google's bert_config.json has no layer_norm_eps: the original BERT's 1e-12; HF MegatronBert's default 1e-12.
  c.layernorm_eps = (float)config_number(o, "layer_norm_eps", 1e-12, source);
  c.init_std = (float)config_number(o, "initializer_range", 0.02, source);
  c.hidden_dropout = (float)config_number(o, "hidden_dropout_prob", 0.1, source);
  c.attention_dropout = (float)config_number(o, "attention_probs_dropout_prob", 0.1, source);
  const std::string act = config_string(o, "hidden_act", "gelu", source);
  c.mlp_gelu = parse_act(config_string(o, "lmforge_mlp_gelu", act, source), "hidden_act", source);
  const std::string head_act = config_string(o, "lm_head_act", act, source);
  c.head_gelu = parse_act(config_string(o, "lmforge_head_gelu", head_act, source), "lm_head_act", source);
  c.binary_head = config_bool(o, "lmforge_binary_head", config_bool(o, "add_binary_head", true, source), source);
  c.seq_length = o.count("lmforge_seq_length") ? config_positive_int(o, "lmforge_seq_length", source) : c.max_positions;
  if (config_string(o, "position_embedding_type", "absolute", source) != "absolute")
    throw Error(source + ": position_embedding_type must be \"absolute\" (learned positions)");
  validate_config_from(c, source);
  return c;
}

BertModel::BertModel(const model::BertConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                     model::Stage stage)
    : bert_(config, backend, tensor_parallel, stage) {}

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
  need(batch.labels.size(), (size_t)batch.B, "labels (is_random)", !bert_.config().binary_head);
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
  const model::BertLosses l = bert_.forward(inputs(batch), &step);
  if (bert_.config().binary_head) return {l.lm, l.sop};
  return {l.lm};
}

std::vector<double> BertModel::forward_stage(const Batch& batch, const float* input,
                                             const layers::ForwardStep& step) {
  const model::BertLosses l = bert_.forward_stage(inputs(batch), input, &step);
  if (!last_stage()) return {};
  if (bert_.config().binary_head) return {l.lm, l.sop};
  return {l.lm};
}

std::vector<std::string> BertModel::shared_tensors() const {
  const model::Stage& s = bert_.stage();
  if (s.pre_process == s.post_process) return {};
  return {"bert.embeddings.word_embeddings.weight"};
}

// Every shape- or function-defining setting is compared: resuming with another flavour, head or GELU would train
// another model with the same tensors.
void BertModel::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::BertConfig saved = bert_config_from_json(json, source);
  const model::BertConfig& c = bert_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "a different --vocab-file?", source);
  check_checkpoint_settings(
      {
          {"--num-layers", saved.num_layers, c.num_layers},
          {"--hidden-size", saved.hidden, c.hidden},
          {"--num-attention-heads", saved.heads, c.heads},
          {"--ffn-hidden-size", saved.ffn(), c.ffn()},
          {"--max-position-embeddings", saved.max_positions, c.max_positions},
          {"--make-vocab-size-divisible-by (padded vocabulary)", saved.padded_vocab_size(), c.padded_vocab_size()},
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
  const model::BertConfig& c = bert_.config();
  char line[640];
  std::snprintf(line, sizeof line,
                "BERT (%s): %d layers, hidden %d, %d heads, ffn %d, seq %d, vocab %d (padded %d), binary head %s, "
                "GELU mlp %s head %s, LayerNorm eps %g, %zu parameters, dropout hidden %g attention %g\n",
                c.post_layernorm ? "original post-LN" : "Megatron pre-LN", c.num_layers, c.hidden, c.heads, c.ffn(),
                c.seq_length, c.vocab_size, c.padded_vocab_size(), c.binary_head ? "on" : "off",
                gelu_name(c.mlp_gelu), gelu_name(c.head_gelu), (double)c.layernorm_eps,
                bert_.table().whole_numel(), c.hidden_dropout, c.attention_dropout);
  return line;
}

}  // namespace lmforge::train
