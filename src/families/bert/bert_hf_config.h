// defines: lmforge::train::bert_config_json(), bert_config_from_json() (a BERT's Hugging Face config.json, both ways:
//          checkpoints write it, resumes and --bert-config-file read it)
#pragma once
#include <string>

#include "model/bert.h"

namespace lmforge::train {

// Hugging Face config.json for a BERT (vocab_size = the padded size, the rows of the word table):
// * Megatron flavour: MegatronBertForPreTraining's config (model_type "megatron-bert", layer_norm_eps as trained,
//   1e-5 by default). HF applies ONE activation (hidden_act) in the MLP and the head, Megatron tanh in the MLP and
//   erf in the head: hidden_act is the MLP's ("gelu_new" = tanh, "gelu" = erf) and lmforge_note says what differs.
// * Original flavour: BertForPreTraining's config (bert_config.json's fields + model_type "bert", layer_norm_eps).
// Both add lmforge_* fields (the unpadded vocabulary, divisible-by, seq_length, binary head, both GELUs) that make
// the file describe the model exactly.
std::string bert_config_json(const model::BertConfig& config);
// The inverse, also for a plain HF/Google config (then vocab_size is unpadded, divisible-by 1, both GELUs from
// hidden_act, binary head on). Error naming `source` for missing or invalid fields.
model::BertConfig bert_config_from_json(const std::string& text, const std::string& source);

}  // namespace lmforge::train
