// defines: bert_config_json(), bert_config_from_json()
#include "families/bert/bert_hf_config.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "families/model_checks.h"
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

}  // namespace lmforge::train
