// defines: t5_config_json(), t5_config_from_json()
#include "families/t5/t5_hf_config.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

using checkpoint::config_number;
using checkpoint::config_positive_int;
using checkpoint::shortest_decimal;

std::string t5_config_json(const model::T5Config& c) {
  checkpoint::JsonObject o;
  o["architectures"] = checkpoint::RawJson{"[\"MegatronT5\"]"};
  o["model_type"] = std::string("lmforge-megatron-t5");
  o["encoder_num_layers"] = (int64_t)c.encoder_num_layers;
  o["decoder_num_layers"] = (int64_t)c.decoder_layers();
  o["hidden_size"] = (int64_t)c.hidden;
  o["num_attention_heads"] = (int64_t)c.heads;
  o["ffn_hidden_size"] = (int64_t)c.ffn();
  o["encoder_seq_length"] = (int64_t)c.encoder_seq_length;
  o["decoder_seq_length"] = (int64_t)c.decoder_seq_length;
  o["max_position_embeddings"] = (int64_t)c.max_positions;
  o["vocab_size"] = (int64_t)c.padded_vocab_size();
  o["lmforge_vocab_size"] = (int64_t)c.vocab_size;
  o["lmforge_make_vocab_size_divisible_by"] = (int64_t)c.make_vocab_size_divisible_by;
  o["layer_norm_eps"] = shortest_decimal(c.layernorm_eps);
  o["hidden_act"] = std::string(c.gelu == kernels::GeluKind::TANH ? "gelu_new" : "gelu");
  o["hidden_dropout"] = shortest_decimal(c.hidden_dropout);
  o["attention_dropout"] = shortest_decimal(c.attention_dropout);
  o["init_method_std"] = shortest_decimal(c.init_std);
  o["lmforge_note"] = std::string(
      "Megatron's T5 (learned absolute positions shared by encoder and decoder, LayerNorm with bias, biases on "
      "every linear, GELU MLP, head tied to the word embedding with a bias). Hugging Face has no class for it "
      "(its T5 uses relative position buckets, RMSNorm and no biases). Tensor names are Megatron's legacy module "
      "names; query_key_value rows are [head][q|k|v][d], inter_attention.key_value rows [head][k|v][d]. "
      "vocab_size is the padded vocabulary.");
  return checkpoint::to_json(o);
}

model::T5Config t5_config_from_json(const std::string& text, const std::string& source) {
  const checkpoint::JsonObject o = checkpoint::parse_json_object(text, source);
  auto type = o.find("model_type");
  if (type == o.end() || std::get_if<std::string>(&type->second) == nullptr ||
      std::get<std::string>(type->second) != "lmforge-megatron-t5")
    throw Error(source + ": model_type must be \"lmforge-megatron-t5\"");
  model::T5Config c;
  c.encoder_num_layers = config_positive_int(o, "encoder_num_layers", source);
  c.decoder_num_layers = config_positive_int(o, "decoder_num_layers", source);
  c.hidden = config_positive_int(o, "hidden_size", source);
  c.heads = config_positive_int(o, "num_attention_heads", source);
  c.ffn_hidden = config_positive_int(o, "ffn_hidden_size", source);
  c.encoder_seq_length = config_positive_int(o, "encoder_seq_length", source);
  c.decoder_seq_length = config_positive_int(o, "decoder_seq_length", source);
  c.max_positions = config_positive_int(o, "max_position_embeddings", source);
  c.vocab_size = config_positive_int(o, "lmforge_vocab_size", source);
  c.make_vocab_size_divisible_by = config_positive_int(o, "lmforge_make_vocab_size_divisible_by", source);
  if (c.padded_vocab_size() != config_positive_int(o, "vocab_size", source))
    throw Error(source + ": vocab_size is not lmforge_vocab_size padded to lmforge_make_vocab_size_divisible_by");
  c.layernorm_eps = (float)config_number(o, "layer_norm_eps", 1e-5, source);
  c.hidden_dropout = (float)config_number(o, "hidden_dropout", 0.1, source);
  c.attention_dropout = (float)config_number(o, "attention_dropout", 0.1, source);
  c.init_std = (float)config_number(o, "init_method_std", 0.02, source);
  auto act = o.find("hidden_act");
  const std::string* a = act == o.end() ? nullptr : std::get_if<std::string>(&act->second);
  if (a == nullptr || (*a != "gelu_new" && *a != "gelu"))
    throw Error(source + ": hidden_act must be \"gelu_new\" (tanh) or \"gelu\" (erf)");
  c.gelu = *a == "gelu_new" ? kernels::GeluKind::TANH : kernels::GeluKind::ERF;
  validate_config_from(c, source);
  return c;
}

}  // namespace lmforge::train
