// defines: ElectraModel, electra_loss_names()
#include "families/electra/electra_model.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "checkpoint/safetensors.h"

#include "families/electra/electra_hf_config.h"
#include "families/model_checks.h"
#include "util/error.h"

namespace lmforge::train {

std::vector<std::string> electra_loss_names() { return {"mlm loss", "disc loss", "disc accuracy"}; }

ElectraModel::ElectraModel(const model::ElectraConfig& config, int seq_length, kernels::Backend& backend,
                           dist::Communicator* tensor_parallel)
    : model_(config, backend, tensor_parallel), seq_length_(seq_length) {}

std::vector<double> ElectraModel::forward(const Batch& batch, const layers::ForwardStep& step) {
  const size_t n = (size_t)batch.B * batch.T;
  check_batch_field("ELECTRA", batch.tokens.size(), n, "tokens (input_ids)", false);
  check_batch_field("ELECTRA", batch.padding.size(), n, "padding (input_mask)", false);
  check_batch_field("ELECTRA", batch.token_types.size(), n, "token_types (segment_ids)", true);
  model::ElectraInputs in;
  in.B = batch.B;
  in.L = batch.T;
  in.input_ids = batch.tokens.data();
  in.input_mask = batch.padding.data();
  in.segment_ids = batch.token_types.empty() ? nullptr : batch.token_types.data();
  model::ElectraDrawKey key;
  key.seed = step.seed;
  key.iteration = step.training ? step.iteration : std::numeric_limits<uint64_t>::max() - (uint64_t)batch.split;
  model::ElectraDraws draws;
  draws.key = &key;
  draws.first_sample = (uint64_t)batch.first_sample;
  const model::ElectraLosses l = model_.forward(in, draws, &step);
  // Replaced-token accuracy over the real tokens: the call is "replaced" where the logit is positive.
  const model::ElectraStepRecord& r = model_.record();
  double right = 0.0, real = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (batch.padding[i] == 0) continue;
    real += 1.0;
    right += (r.disc_logits[i] > 0.0f) == (r.fake.labels[i] != 0);
  }
  return {l.mlm, l.disc, real > 0.0 ? right / real : 0.0};
}

std::string ElectraModel::config_json() const { return electra_config_json(model_.config(), seq_length_); }

// Every shape- or function-defining setting is compared: resuming with another generator, masking or loss weight
// would train another model with the same tensors.
void ElectraModel::check_checkpoint_config(const std::string& json, const std::string& source) const {
  const model::ElectraConfig saved = electra_config_from_json(json, source);
  const model::ElectraConfig& c = model_.config();
  check_checkpoint_vocab(saved.vocab_size, c.vocab_size, "a different --vocab-file?", source);
  check_checkpoint_settings({{"--num-layers", saved.num_layers, c.num_layers},
                             {"--embedding-size", saved.embedding_size, c.embedding_size},
                             {"--generator-hidden-size (width)", saved.gen_hidden, c.gen_hidden},
                             {"--generator-layers (count)", saved.gen_layers, c.gen_layers},
                             {"--max-predictions-per-seq", saved.max_predictions, c.max_predictions},
                             {"the [MASK] id", saved.tokens.mask, c.tokens.mask}},
                            source);
  check_checkpoint_transformer(saved, c, source);
  const struct {
    const char* flag;
    double saved, now;
  } numbers[] = {{"--mask-prob", saved.mask_prob, c.mask_prob},
                 {"--disc-weight", saved.disc_weight, c.disc_weight},
                 {"--sampling-temperature", saved.temperature, c.temperature}};
  for (const auto& f : numbers)
    if (f.saved != f.now)
      throw Error(source + ": the checkpoint was trained with " + f.flag + " " + std::to_string(f.saved) +
                  ", this run asks for " + std::to_string(f.now) + "; resume with the checkpoint's value, or start "
                  "a new run from its weights with --finetune");
}

std::string ElectraModel::describe() const {
  const model::ElectraConfig& c = model_.config();
  char line[800];
  std::snprintf(line, sizeof line,
                "ELECTRA: discriminator %d layers, hidden %d, %d heads, ffn %d; generator %d layers, hidden %d, "
                "%d heads, ffn %d; shared embeddings %d wide (vocab %d, %d positions, %d types); mask prob %g, %d "
                "predictions per sequence, disc weight %g, temperature %g; %zu parameters, dropout hidden %g "
                "attention %g\n",
                c.num_layers, c.hidden, c.heads, c.ffn(), c.gen_layers, c.gen_hidden, c.gen_heads, c.gen_ffn(),
                c.embedding_size, c.vocab_size, c.max_positions, c.type_vocab_size, c.mask_prob,
                c.predictions(seq_length_), c.disc_weight, c.temperature, model_.table().whole_numel(),
                c.hidden_dropout, c.attention_dropout);
  return line;
}

// 6 x (matrix parameters) per token for each encoder and the discriminator head, 12·layers·hidden·T for their
// attention, and the generator head's transform and vocabulary product on the N predicted slots only.
double ElectraModel::training_flops(int B, int T) const {
  const model::ElectraConfig& c = model_.config();
  const double H = c.hidden, gH = c.gen_hidden, E = c.embedding_size, V = c.padded_vocab_size();
  const double disc = c.num_layers * (4.0 * H * H + 2.0 * H * c.ffn()) + H * H + H + (E != H ? E * H : 0.0);
  const double gen = c.gen_layers * (4.0 * gH * gH + 2.0 * gH * c.gen_ffn()) + (E != gH ? E * gH : 0.0);
  const double attention = 12.0 * T * (c.num_layers * H + c.gen_layers * gH);
  const double N = c.predictions(T);
  return (double)B * T * (6.0 * (disc + gen) + attention) + (double)B * N * 6.0 * (gH * E + E * V);
}

namespace {

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw Error(path + ": cannot write");
}

}  // namespace

void ElectraModel::write_hugging_face(const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  // The checkpoint's own file holds the whole tensors whatever this rank holds (tensor-parallel pieces).
  const checkpoint::SafetensorsFile file((fs::path(checkpoint_dir) / "model.safetensors").string());
  std::vector<checkpoint::TensorRef> disc, gen;
  const std::string prefix = "generator.";
  for (const param::Parameter& p : whole_table()) {
    const checkpoint::TensorInfo& t = file.at(p.name);
    const void* data = file.bytes(t).data();
    if (p.name.rfind(prefix, 0) == 0) {
      gen.push_back({p.name.substr(prefix.size()), t.dtype, t.shape, data});
      continue;
    }
    disc.push_back({p.name, t.dtype, t.shape, data});
    // The generator reads the shared embeddings and their LayerNorm (not the discriminator's projection).
    if (p.name.rfind("electra.embeddings.", 0) == 0) gen.push_back({p.name, t.dtype, t.shape, data});
  }
  const fs::path final_dir = fs::path(checkpoint_dir) / "hf", tmp = fs::path(checkpoint_dir) / "hf.tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  for (const char* part : {"discriminator", "generator"}) {
    fs::create_directories(tmp / part, ec);
    if (ec) throw Error((tmp / part).string() + ": cannot create: " + ec.message());
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  checkpoint::write_safetensors((tmp / "discriminator" / "model.safetensors").string(), disc, metadata, true);
  write_text_file((tmp / "discriminator" / "config.json").string(), electra_discriminator_hf_config(model_.config()));
  checkpoint::write_safetensors((tmp / "generator" / "model.safetensors").string(), gen, metadata, true);
  write_text_file((tmp / "generator" / "config.json").string(), electra_generator_hf_config(model_.config()));
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) throw Error(final_dir.string() + ": cannot rename " + tmp.string() + " to it: " + ec.message());
}

}  // namespace lmforge::train
