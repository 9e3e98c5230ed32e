// defines: what the families' train::Model adapters check alike: validate_config_from() (a config read from a file,
//          its errors naming the file), check_batch_field() (a micro-batch field's size), check_checkpoint_vocab()
//          check_checkpoint_settings() and check_checkpoint_transformer() (a checkpoint's settings against this run's)
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "model/transformer_config.h"
#include "util/error.h"

namespace lmforge::train {

// c.validate(), its Error prefixed with "source: ".
template <typename Config>
void validate_config_from(const Config& c, const std::string& source) {
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
}

// A micro-batch field of `size` entries must have `want` (or none when optional): an Error
// "<model>: the micro-batch's <what> has N entries, expected M" otherwise.
void check_batch_field(const char* model, size_t size, size_t want, const char* what, bool optional);

// The checkpoint's vocabulary size against the tokenizer's; `hint` names the flags that change it.
void check_checkpoint_vocab(int64_t saved, int64_t now, const char* hint, const std::string& source);

// A shape- or function-defining setting: its flag, the checkpoint's value and this run's.
struct CheckpointSetting {
  const char* flag;
  int64_t saved, now;
};
// The first setting that differs is an Error naming its flag and both values (resume with the checkpoint's value,
// or --finetune).
void check_checkpoint_settings(std::initializer_list<CheckpointSetting> settings, const std::string& source);
// The shape settings every family shares (model::TransformerConfig: hidden size, heads, MLP width, positions, padded
// vocabulary), as check_checkpoint_settings; a family checks its layer counts before and its own settings after.
void check_checkpoint_transformer(const model::TransformerConfig& saved, const model::TransformerConfig& now,
                                  const std::string& source);

}  // namespace lmforge::train
