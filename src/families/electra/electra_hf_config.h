// defines: lmforge::train::electra_config_json(), electra_config_from_json() (an ELECTRA checkpoint's config.json,
//          both ways), electra_discriminator_hf_config(), electra_generator_hf_config() (Hugging Face's
//          ElectraForPreTraining / ElectraForMaskedLM config.json of each network)
#pragma once
#include <string>

#include "model/electra.h"

namespace lmforge::train {

// The training checkpoint's config.json: Hugging Face's ElectraConfig of the discriminator (model_type "electra",
// architectures ElectraForPreTraining, its key names) plus lmforge_* fields for what HF's config cannot say: the
// generator's width, layers, heads and FFN, the masking and loss settings and the special ids. `seq_length` is the
// run's --seq-length (lmforge_seq_length).
std::string electra_config_json(const model::ElectraConfig& config, int seq_length);
// The inverse. Error naming `source` for a missing or invalid field.
model::ElectraConfig electra_config_from_json(const std::string& text, const std::string& source);

// Hugging Face's own configs (transformers' ElectraConfig keys only, as `ElectraForPreTraining.from_pretrained` and
// `ElectraForMaskedLM.from_pretrained` read them): the discriminator with hidden_act "gelu" (erf), and the
// generator with its own hidden_size / num_hidden_layers / num_attention_heads / intermediate_size and the shared
// embedding_size.
std::string electra_discriminator_hf_config(const model::ElectraConfig& config);
std::string electra_generator_hf_config(const model::ElectraConfig& config);

}  // namespace lmforge::train
