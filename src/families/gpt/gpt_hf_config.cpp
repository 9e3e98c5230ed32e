// defines: gpt_config_json(), gpt_config_from_json() (a GPT's Hugging Face GPT2Config text, both ways)
#include "families/gpt/gpt_hf_config.h"

#include <cstdio>
#include <limits>
#include <string>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::train {

using checkpoint::config_number;
using checkpoint::config_positive_int;
using checkpoint::shortest_decimal;
namespace {


}  // namespace

std::string gpt_config_json(const model::GPTConfig& c) {
  checkpoint::JsonObject o;
  o["activation_function"] = std::string("gelu_new");
  o["architectures"] = checkpoint::RawJson{"[\"GPT2LMHeadModel\"]"};
  // Megatron's --hidden-dropout is GPT-2's embd_pdrop and resid_pdrop, --attention-dropout its attn_pdrop.
  o["attn_pdrop"] = shortest_decimal(c.attention_dropout);
  o["embd_pdrop"] = shortest_decimal(c.hidden_dropout);
  o["resid_pdrop"] = shortest_decimal(c.hidden_dropout);
  o["initializer_range"] = shortest_decimal(c.init_std);
  o["layer_norm_epsilon"] = 1e-5;
  o["model_type"] = std::string("gpt2");
  o["n_ctx"] = (int64_t)c.max_positions;
  o["n_embd"] = (int64_t)c.hidden;
  o["n_head"] = (int64_t)c.heads;
  o["n_layer"] = (int64_t)c.num_layers;
  o["n_positions"] = (int64_t)c.max_positions;
  o["tie_word_embeddings"] = true;
  o["vocab_size"] = (int64_t)c.padded_vocab_size();
  o["lmforge_vocab_size"] = (int64_t)c.vocab_size;
  o["lmforge_make_vocab_size_divisible_by"] = (int64_t)c.make_vocab_size_divisible_by;
  o["lmforge_seq_length"] = (int64_t)c.seq_length;
  return checkpoint::to_json(o);
}

model::GPTConfig gpt_config_from_json(const std::string& text, const std::string& source) {
  const checkpoint::JsonObject o = checkpoint::parse_json_object(text, source);
  model::GPTConfig c;
  c.num_layers = config_positive_int(o, "n_layer", source);
  c.heads = config_positive_int(o, "n_head", source);
  c.hidden = config_positive_int(o, "n_embd", source);
  c.max_positions = config_positive_int(o, "n_positions", source);
  const int64_t file_vocab = config_positive_int(o, "vocab_size", source);
  if (o.count("lmforge_vocab_size")) {
    c.vocab_size = config_positive_int(o, "lmforge_vocab_size", source);
    c.make_vocab_size_divisible_by = config_positive_int(o, "lmforge_make_vocab_size_divisible_by", source);
    if (c.padded_vocab_size() != file_vocab)
      throw Error(source + ": vocab_size " + int_text(file_vocab) + " is not lmforge_vocab_size " + int_text(c.vocab_size) +
                  " padded to a multiple of " + int_text(c.make_vocab_size_divisible_by));
  } else {
    c.vocab_size = (int)file_vocab;
    c.make_vocab_size_divisible_by = 1;
  }
  c.init_std = (float)config_number(o, "initializer_range", c.init_std, source);
  // Dropout as trained (Hugging Face's GPT-2 files say 0.1); it only matters when training goes on from the file.
  c.hidden_dropout = (float)config_number(o, "resid_pdrop", 0.1, source);
  c.attention_dropout = (float)config_number(o, "attn_pdrop", 0.1, source);
  if (config_number(o, "embd_pdrop", c.hidden_dropout, source) !=
      config_number(o, "resid_pdrop", c.hidden_dropout, source))
    throw Error(source + ": embd_pdrop and resid_pdrop differ (this model has one hidden dropout, Megatron's "
                "--hidden-dropout)");
  c.seq_length = o.count("lmforge_seq_length") ? config_positive_int(o, "lmforge_seq_length", source) : c.max_positions;
  if (auto it = o.find("activation_function"); it != o.end()) {
    const std::string* act = std::get_if<std::string>(&it->second);
    if (act == nullptr || (*act != "gelu_new" && *act != "gelu_pytorch_tanh"))
      throw Error(source + ": activation_function must be \"gelu_new\" (the tanh GELU this model implements)");
  }
  if (auto it = o.find("n_inner"); it != o.end() && !std::holds_alternative<checkpoint::RawJson>(it->second)) {
    const int64_t* inner = std::get_if<int64_t>(&it->second);
    if (inner == nullptr || *inner != 4 * (int64_t)c.hidden)
      throw Error(source + ": n_inner must be null or 4·n_embd");
  }
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
  return c;
}

}  // namespace lmforge::train
