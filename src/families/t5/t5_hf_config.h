// defines: lmforge::train::t5_config_json(), t5_config_from_json() (a T5 checkpoint's config.json, both ways)
#pragma once
#include <string>

#include "model/t5.h"

namespace lmforge::train {

// The config.json of a T5 checkpoint. There is no Hugging Face class for Megatron's T5 (HF's T5 has relative
// position buckets, RMSNorm, no biases: §3.1 of the reference notes), so the fields are named after Megatron's
// arguments: model_type "lmforge-megatron-t5", encoder_num_layers, decoder_num_layers, hidden_size,
// num_attention_heads, ffn_hidden_size, encoder_seq_length, decoder_seq_length, max_position_embeddings, vocab_size
// (padded: the rows of the word table), lmforge_vocab_size, lmforge_make_vocab_size_divisible_by, layer_norm_eps,
// hidden_act ("gelu_new" tanh / "gelu" erf), hidden_dropout, attention_dropout, init_method_std, and a note.
std::string t5_config_json(const model::T5Config& config);
// The inverse; Error naming `source` for missing or invalid fields.
model::T5Config t5_config_from_json(const std::string& text, const std::string& source);

}  // namespace lmforge::train
