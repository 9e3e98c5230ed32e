// defines: T5Model
#include "families/t5/t5_model.h"

#include "families/t5/t5_hf_config.h"

#include <cstdio>
#include <limits>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config_fields.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

T5Model::T5Model(const model::T5Config& config, kernels::Backend& backend, dist::Communicator* tensor_parallel,
                 model::Stage stage)
    : FamilyModel(config, backend, tensor_parallel, stage) {}

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
  return {model_.forward(inputs(batch), &step)};
}

std::vector<double> T5Model::forward_stage(const Batch& batch, const float* input, const layers::ForwardStep& step,
                                           size_t slot) {
  const double loss = model_.forward_stage(inputs(batch), input, &step, slot);
  if (!last_stage()) return {};
  return {loss};
}

std::vector<std::string> T5Model::shared_tensors() const {
  if (model_.whole()) return {};
  const std::string word = "language_model.embedding.word_embeddings.weight";
  const std::string position = "language_model.embedding.position_embeddings.weight";
  if (model_.holds_embedding()) return {word, position};  // stage 0 or the split stage S (perhaps also the last)
  if (model_.stage().post_process) return {word};        // the last
  return {};
}

void T5Model::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::T5Config saved = t5_config_from_json(json, source);
  const model::T5Config& c = model_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "another --vocab-file or --vocab-extra-ids?", source);
  check_checkpoint_settings(
      {
          {"--encoder-num-layers", saved.encoder_num_layers, c.encoder_num_layers},
          {"--decoder-num-layers", saved.decoder_layers(), c.decoder_layers()},
      },
      source);
  check_checkpoint_transformer(saved, c, source);
  check_checkpoint_settings({{"the MLP GELU (0 tanh, 1 erf)", (int64_t)saved.gelu, (int64_t)c.gelu}}, source);
}

std::string T5Model::describe() const {
  const model::T5Config& c = model_.config();
  char line[512];
  std::snprintf(line, sizeof line,
                "T5 (Megatron): %d encoder and %d decoder layers, hidden %d, %d heads, ffn %d, encoder seq %d, "
                "decoder seq %d, vocab %d (padded %d), %zu parameters, dropout hidden %g attention %g\n",
                c.encoder_num_layers, c.decoder_layers(), c.hidden, c.heads, c.ffn(), c.encoder_seq_length,
                c.decoder_seq_length, c.vocab_size, c.padded_vocab_size(), model_.table().whole_numel(),
                c.hidden_dropout, c.attention_dropout);
  return line;
}

}  // namespace lmforge::train
