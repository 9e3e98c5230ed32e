// defines: electra_config_json(), electra_config_from_json(), electra_discriminator_hf_config(),
//          electra_generator_hf_config()
#include "families/electra/electra_hf_config.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

using checkpoint::config_int;
using checkpoint::config_number;
using checkpoint::config_positive_int;
using checkpoint::config_string;
using checkpoint::shortest_decimal;

namespace {

// transformers' ElectraConfig fields of one network (hidden, layers, heads, FFN its own; the rest shared).
checkpoint::JsonObject hf_fields(const model::ElectraConfig& c, bool generator) {
  checkpoint::JsonObject o;
  o["architectures"] = checkpoint::RawJson{generator ? "[\"ElectraForMaskedLM\"]" : "[\"ElectraForPreTraining\"]"};
  o["model_type"] = std::string("electra");
  o["vocab_size"] = (int64_t)c.padded_vocab_size();
  o["embedding_size"] = (int64_t)c.embedding_size;
  o["hidden_size"] = (int64_t)(generator ? c.gen_hidden : c.hidden);
  o["num_hidden_layers"] = (int64_t)(generator ? c.gen_layers : c.num_layers);
  o["num_attention_heads"] = (int64_t)(generator ? c.gen_heads : c.heads);
  o["intermediate_size"] = (int64_t)(generator ? c.gen_ffn() : c.ffn());
  o["hidden_act"] = std::string(c.gelu == kernels::GeluKind::TANH ? "gelu_new" : "gelu");
  o["hidden_dropout_prob"] = shortest_decimal(c.hidden_dropout);
  o["attention_probs_dropout_prob"] = shortest_decimal(c.attention_dropout);
  o["max_position_embeddings"] = (int64_t)c.max_positions;
  o["type_vocab_size"] = (int64_t)c.type_vocab_size;
  o["initializer_range"] = shortest_decimal(c.init_std);
  o["layer_norm_eps"] = shortest_decimal(c.layernorm_eps);
  o["pad_token_id"] = (int64_t)0;
  o["position_embedding_type"] = std::string("absolute");
  o["summary_type"] = std::string("first");
  o["summary_use_proj"] = true;
  o["summary_activation"] = std::string("gelu");
  o["summary_last_dropout"] = 0.1;
  o["tie_word_embeddings"] = true;
  return o;
}

}  // namespace

std::string electra_config_json(const model::ElectraConfig& c, int seq_length) {
  checkpoint::JsonObject o = hf_fields(c, false);
  o["lmforge_vocab_size"] = (int64_t)c.vocab_size;
  o["lmforge_make_vocab_size_divisible_by"] = (int64_t)c.make_vocab_size_divisible_by;
  o["lmforge_seq_length"] = (int64_t)seq_length;
  o["lmforge_generator_hidden_size"] = (int64_t)c.gen_hidden;
  o["lmforge_generator_num_hidden_layers"] = (int64_t)c.gen_layers;
  o["lmforge_generator_num_attention_heads"] = (int64_t)c.gen_heads;
  o["lmforge_generator_intermediate_size"] = (int64_t)c.gen_ffn();
  o["lmforge_mask_prob"] = c.mask_prob;
  o["lmforge_max_predictions_per_seq"] = (int64_t)c.max_predictions;
  o["lmforge_disc_weight"] = c.disc_weight;
  o["lmforge_gen_weight"] = c.gen_weight;
  o["lmforge_sampling_temperature"] = c.temperature;
  o["lmforge_cls_id"] = (int64_t)c.tokens.cls;
  o["lmforge_sep_id"] = (int64_t)c.tokens.sep;
  o["lmforge_mask_id"] = (int64_t)c.tokens.mask;
  o["lmforge_note"] = std::string(
      "ELECTRA pretraining checkpoint: the discriminator under ElectraForPreTraining's names, the generator's own "
      "tensors under ElectraForMaskedLM's names prefixed \"generator.\" (its embeddings are the discriminator's); "
      "the hf/discriminator and hf/generator directories beside this file are the two Hugging Face models");
  return checkpoint::to_json(o);
}

model::ElectraConfig electra_config_from_json(const std::string& text, const std::string& source) {
  const checkpoint::JsonObject o = checkpoint::parse_json_object(text, source);
  const std::string type = config_string(o, "model_type", "", source);
  if (type != "electra") throw Error(source + ": model_type \"" + type + "\" is not \"electra\"");
  model::ElectraConfig c;
  c.num_layers = config_positive_int(o, "num_hidden_layers", source);
  c.hidden = config_positive_int(o, "hidden_size", source);
  c.heads = config_positive_int(o, "num_attention_heads", source);
  c.ffn_hidden = config_positive_int(o, "intermediate_size", source);
  c.embedding_size = config_positive_int(o, "embedding_size", source);
  c.max_positions = config_positive_int(o, "max_position_embeddings", source);
  c.type_vocab_size = config_positive_int(o, "type_vocab_size", source);
  c.vocab_size = config_positive_int(o, "lmforge_vocab_size", source);
  c.make_vocab_size_divisible_by = config_positive_int(o, "lmforge_make_vocab_size_divisible_by", source);
  if (c.padded_vocab_size() != config_positive_int(o, "vocab_size", source))
    throw Error(source + ": vocab_size is not lmforge_vocab_size padded to lmforge_make_vocab_size_divisible_by");
  c.layernorm_eps = (float)config_number(o, "layer_norm_eps", 1e-12, source);
  c.init_std = (float)config_number(o, "initializer_range", 0.02, source);
  c.hidden_dropout = (float)config_number(o, "hidden_dropout_prob", 0.1, source);
  c.attention_dropout = (float)config_number(o, "attention_probs_dropout_prob", 0.1, source);
  const std::string act = config_string(o, "hidden_act", "gelu", source);
  if (act != "gelu" && act != "gelu_new")
    throw Error(source + ": \"hidden_act\" is \"" + act + "\"; ELECTRA here computes \"gelu\" (erf) or \"gelu_new\"");
  c.gelu = act == "gelu" ? kernels::GeluKind::ERF : kernels::GeluKind::TANH;
  c.gen_hidden = config_positive_int(o, "lmforge_generator_hidden_size", source);
  c.gen_layers = config_positive_int(o, "lmforge_generator_num_hidden_layers", source);
  c.gen_heads = config_positive_int(o, "lmforge_generator_num_attention_heads", source);
  c.gen_ffn_hidden = config_positive_int(o, "lmforge_generator_intermediate_size", source);
  c.mask_prob = config_number(o, "lmforge_mask_prob", 0.15, source);
  c.max_predictions = (int)config_int(o, "lmforge_max_predictions_per_seq", source);
  c.disc_weight = config_number(o, "lmforge_disc_weight", 50.0, source);
  c.gen_weight = config_number(o, "lmforge_gen_weight", 1.0, source);
  c.temperature = config_number(o, "lmforge_sampling_temperature", 1.0, source);
  c.tokens.cls = (int32_t)config_int(o, "lmforge_cls_id", source);
  c.tokens.sep = (int32_t)config_int(o, "lmforge_sep_id", source);
  c.tokens.mask = (int32_t)config_int(o, "lmforge_mask_id", source);
  validate_config_from(c, source);
  return c;
}

std::string electra_discriminator_hf_config(const model::ElectraConfig& c) { return checkpoint::to_json(hf_fields(c, false)); }
std::string electra_generator_hf_config(const model::ElectraConfig& c) { return checkpoint::to_json(hf_fields(c, true)); }

}  // namespace lmforge::train
