// defines: T5Model, t5_config_json(), t5_config_from_json()
#include "train/t5_model.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "train/model_checks.h"
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

T5Model::T5Model(const model::T5Config& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                 model::Stage stage)
    : t5_(config, backend, tensor_parallel, stage) {}

model::T5Inputs T5Model::inputs(const Batch& batch) const {
  const size_t Ne = (size_t)batch.B * batch.T, Nd = (size_t)batch.B * batch.Td;
  auto need = [](size_t size, size_t want, const char* what, bool optional) {
    check_batch_field("T5", size, want, what, optional);
  };
  if (batch.Td < 1) throw Error("T5: the micro-batch has no decoder side (Batch::Td)");
  need(batch.tokens.size(), Ne, "tokens (encoder input)", false);
  need(batch.padding.size(), Ne, "padding (encoder)", true);
  need(batch.decoder_tokens.size(), Nd, "decoder_tokens", false);
  need(batch.decoder_padding.size(), Nd, "decoder_padding", true);
  need(batch.targets.size(), Nd, "targets (decoder labels)", false);
  need(batch.loss_mask.size(), Nd, "loss_mask (decoder)", false);
  model::T5Inputs in;
  in.B = batch.B;
  in.Te = batch.T;
  in.Td = batch.Td;
  in.encoder_tokens = batch.tokens.data();
  in.encoder_padding = batch.padding.empty() ? nullptr : batch.padding.data();
  in.decoder_tokens = batch.decoder_tokens.data();
  in.decoder_padding = batch.decoder_padding.empty() ? nullptr : batch.decoder_padding.data();
  in.labels = batch.targets.data();
  in.loss_mask = batch.loss_mask.data();
  return in;
}

std::vector<double> T5Model::forward(const Batch& batch, const layers::ForwardStep& step) {
  return {t5_.forward(inputs(batch), &step)};
}

std::vector<double> T5Model::forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step) {
  const double loss = t5_.forward_stage(inputs(batch), input, &step);
  if (!last_stage()) return {};
  return {loss};
}

std::vector<std::string> T5Model::shared_tensors() const {
  if (t5_.whole()) return {};
  const std::string word = "language_model.embedding.word_embeddings.weight";
  const std::string position = "language_model.embedding.position_embeddings.weight";
  if (t5_.holds_embedding()) return {word, position};  // stage 0 or the split stage S (perhaps also the last)
  if (t5_.stage().post_process) return {word};        // the last
  return {};
}

void T5Model::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::T5Config saved = t5_config_from_json(json, source);
  const model::T5Config& c = t5_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "another --vocab-file or --vocab-extra-ids?", source);
  check_checkpoint_settings(
      {
          {"--encoder-num-layers", saved.encoder_num_layers, c.encoder_num_layers},
          {"--decoder-num-layers", saved.decoder_layers(), c.decoder_layers()},
          {"--hidden-size", saved.hidden, c.hidden},
          {"--num-attention-heads", saved.heads, c.heads},
          {"--ffn-hidden-size", saved.ffn(), c.ffn()},
          {"--max-position-embeddings", saved.max_positions, c.max_positions},
          {"--make-vocab-size-divisible-by (padded vocabulary)", saved.padded_vocab_size(), c.padded_vocab_size()},
          {"the MLP GELU (0 tanh, 1 erf)", (int64_t)saved.gelu, (int64_t)c.gelu},
      },
      source);
}

std::string T5Model::describe() const {
  const model::T5Config& c = t5_.config();
  char line[512];
  std::snprintf(line, sizeof line,
                "T5 (Megatron): %d encoder and %d decoder layers, hidden %d, %d heads, ffn %d, encoder seq %d, "
                "decoder seq %d, vocab %d (padded %d), %zu parameters, dropout hidden %g attention %g\n",
                c.encoder_num_layers, c.decoder_layers(), c.hidden, c.heads, c.ffn(), c.encoder_seq_length,
                c.decoder_seq_length, c.vocab_size, c.padded_vocab_size(), t5_.table().whole_numel(),
                c.hidden_dropout, c.attention_dropout);
  return line;
}

}  // namespace lmforge::train
