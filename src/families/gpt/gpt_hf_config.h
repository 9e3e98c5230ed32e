// defines: lmforge::train::gpt_config_json(), gpt_config_from_json() (a GPT's Hugging Face GPT2Config text, both
//          ways: checkpoints write it, `generate` and resumes read it)
#pragma once
#include <string>

#include "model/gpt.h"

namespace lmforge::train {

// Hugging Face GPT2Config JSON for a model (vocab_size is the padded size, the number of rows of wte, so that
// transformers loads the file as-is), plus lmforge_vocab_size (the tokenizer's, which bounds sampling) and
// lmforge_make_vocab_size_divisible_by; attn_pdrop / resid_pdrop / embd_pdrop carry the dropout.
std::string gpt_config_json(const model::GPTConfig& config);
// The inverse, also for a plain Hugging Face config.json (then vocab_size is taken as unpadded, divisible-by 1).
// seq_length is set to n_positions. Error naming `source` for missing or invalid fields.
model::GPTConfig gpt_config_from_json(const std::string& text, const std::string& source);

}  // namespace lmforge::train
