// defines: check_batch_field, check_checkpoint_vocab, check_checkpoint_settings, check_checkpoint_transformer
#include "families/model_checks.h"

namespace lmforge::train {

void check_batch_field(const char* model, size_t size, size_t want, const char* what, bool optional) {
  if ((optional && size == 0) || size == want) return;
  throw Error(std::string(model) + ": the micro-batch's " + what + " has " + std::to_string(size) +
              " entries, expected " + std::to_string(want));
}

void check_checkpoint_vocab(int64_t saved, int64_t now, const char* hint, const std::string& source) {
  if (saved != now)
    throw Error(source + ": the checkpoint's vocabulary has " + std::to_string(saved) + " tokens, the tokenizer " +
                std::to_string(now) + " (" + hint + "); use --finetune to start a new run from these weights");
}

void check_checkpoint_settings(std::initializer_list<CheckpointSetting> settings, const std::string& source) {
  for (const CheckpointSetting& f : settings)
    if (f.saved != f.now)
      throw Error(source + ": the checkpoint was trained with " + f.flag + " " + std::to_string(f.saved) +
                  ", this run asks for " + std::to_string(f.now) +
                  "; resume with the checkpoint's value, or start a new run from its weights with --finetune "
                  "(where the shapes allow)");
}

void check_checkpoint_transformer(const model::TransformerConfig& saved, const model::TransformerConfig& now,
                                  const std::string& source) {
  check_checkpoint_settings(
      {
          {"--hidden-size", saved.hidden, now.hidden},
          {"--num-attention-heads", saved.heads, now.heads},
          {"--ffn-hidden-size", saved.ffn(), now.ffn()},
          {"--max-position-embeddings", saved.max_positions, now.max_positions},
          {"--make-vocab-size-divisible-by (padded vocabulary)", saved.padded_vocab_size(), now.padded_vocab_size()},
      },
      source);
}

}  // namespace lmforge::train
