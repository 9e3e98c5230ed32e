// defines: electra_family() — `lmforge train electra` (google-research/electra's run_pretraining.py on lmforge's
//          trainer): the --electra-size presets, ElectraConfig from the options, ElectraModel, ElectraTask over
//          datasets::ElectraPretrainingData, the registry entry
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "datasets/electra_pretraining_data.h"
#include "families/electra/electra_model.h"
#include "families/electra/electra_task.h"
#include "families/family_common.h"
#include "families/model_family.h"
#include "model/electra.h"
#include "util/error.h"

namespace lmforge::families {
namespace {

namespace fs = std::filesystem;

// The paper's Table 6 / configure_pretraining.py (electra-reference-notes §4). Base's generator fraction is the
// code's 0.33333 (round(768 x 0.33333) = 256).
struct ElectraPreset {
  const char* name;
  int layers, hidden, heads, ffn, embedding;
  double generator_fraction, lr;
  int64_t batch;
  double mask_prob;
};
constexpr ElectraPreset kPresets[] = {
    {"small", 12, 256, 4, 1024, 128, 0.25, 5e-4, 128, 0.15},
    {"base", 12, 768, 12, 3072, 768, 0.33333, 2e-4, 256, 0.15},
    {"large", 24, 1024, 16, 4096, 1024, 0.25, 2e-4, 2048, 0.25},
};

const ElectraPreset& preset_of(const std::string& name) {
  for (const ElectraPreset& p : kPresets)
    if (name == p.name) return p;
  throw Error("--electra-size " + name + ": expected small, base or large (ELECTRA's model sizes)");
}

// The settings whose 0 means "the preset's" (filled by apply_config_file; options made by hand may leave them 0).
double generator_hidden_of(const train::TrainOptions& o) {
  return o.generator_hidden_size > 0.0 ? o.generator_hidden_size : preset_of(o.electra_size).generator_fraction;
}
double mask_prob_of(const train::TrainOptions& o) {
  return o.electra_mask_prob > 0.0 ? o.electra_mask_prob : preset_of(o.electra_size).mask_prob;
}

// Python's round() (half to even) of a generator size from a fraction, or the size itself.
int generator_size(double value, int whole) {
  if (value <= 1.0) return (int)std::nearbyint(whole * value);
  return (int)value;
}

// ELECTRA's vocabulary: model/tokenization.py load_vocab, one token per line (stripped), its index the line's
// number, the last line holding a token giving its id; no [BOS]/[EOS] appended (Megatron's BertWordPiece does), so
// the model has the file's rows, as ELECTRA's and Hugging Face's checkpoints.
struct ElectraVocabulary {
  int64_t size = 0;
  model::ElectraTokens tokens;
};
ElectraVocabulary electra_vocabulary(const std::string& vocab_file) {
  const std::string text = read_text(vocab_file);
  std::map<std::string, int64_t> last;
  ElectraVocabulary v;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string token = text.substr(at, end - at);
    const size_t a = token.find_first_not_of(" \t\r\f\v"), b = token.find_last_not_of(" \t\r\f\v");
    token = a == std::string::npos ? "" : token.substr(a, b - a + 1);
    last[token] = v.size++;
    at = end + 1;
  }
  auto id = [&](const char* name) {
    const auto it = last.find(name);
    if (it == last.end())
      throw Error(vocab_file + ": no " + std::string(name) + " line (ELECTRA's masking and examples need [CLS], "
                  "[SEP] and [MASK])");
    return (int32_t)it->second;
  };
  v.tokens.cls = id("[CLS]");
  v.tokens.sep = id("[SEP]");
  v.tokens.mask = id("[MASK]");
  return v;
}

model::ElectraConfig electra_config(const train::TrainOptions& o) {
  const ElectraVocabulary vocab = electra_vocabulary(o.tokenizer.vocab_file);
  model::ElectraConfig c;
  fill_transformer_config(o, vocab.size, c);
  c.make_vocab_size_divisible_by = 1;  // the generator samples from every column: no padded rows
  if (c.max_positions == 0) c.max_positions = o.seq_length;
  c.num_layers = o.num_layers;
  c.ffn_hidden = o.ffn_hidden_size;
  c.embedding_size = o.embedding_size > 0 ? o.embedding_size : o.hidden_size;
  c.gen_hidden = generator_size(generator_hidden_of(o), o.hidden_size);
  c.gen_layers = generator_size(o.generator_layers, o.num_layers);
  c.gen_heads = std::max(1, c.gen_hidden / 64);  // get_generator_config: max(1, hidden // 64)
  c.gen_ffn_hidden = 4 * c.gen_hidden;
  c.gelu = kernels::GeluKind::ERF;
  c.layernorm_eps = o.layernorm_epsilon > 0.0 ? (float)o.layernorm_epsilon : 1e-12f;
  c.mask_prob = mask_prob_of(o);
  c.max_predictions = o.max_predictions_per_seq;
  c.disc_weight = o.disc_weight;
  c.temperature = o.sampling_temperature;
  c.tokens = vocab.tokens;
  c.validate();
  return c;
}

// --data-path: one Megatron sentence-level dataset prefix (PREFIX.bin/.idx), one text file of a sentence per line, or
// a directory of such files (read in name order, as build_pretraining_dataset.py's --corpus-dir).
std::shared_ptr<const datasets::ElectraPretrainingData> electra_examples(const train::TrainOptions& o) {
  if (o.data_path.size() != 1)
    throw Error("--data-path: train electra reads one dataset prefix, text file or directory (got " +
                std::to_string(o.data_path.size()) + " values; ELECTRA's examples have no blend)");
  const std::string& path = o.data_path[0];
  datasets::ElectraDataOptions d;
  d.max_seq_length = o.seq_length;
  d.random_seed = (int64_t)o.seed;
  std::error_code ec;
  if (fs::exists(path + ".idx", ec))
    return std::make_shared<const datasets::ElectraPretrainingData>(
        datasets::ElectraPretrainingData::from_megatron({path}, o.tokenizer.vocab_file, d));
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw Error("--data-path " + path + ": a directory without files");
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    throw Error("--data-path " + path + ": neither a dataset prefix (" + path + ".idx does not exist), a text file "
                "nor a directory");
  }
  const bool lower_case = o.tokenizer.type != "BertWordPieceCase";
  return std::make_shared<const datasets::ElectraPretrainingData>(
      datasets::ElectraPretrainingData::from_text_files(files, o.tokenizer.vocab_file, lower_case, d));
}

class ElectraFamily final : public ModelFamily {
 public:
  const char* name() const override { return "electra"; }
  const char* default_tokenizer_type() const override { return "BertWordPieceLowerCase"; }
  std::string help() const override {
    return
      "Pretrain ELECTRA (google-research/electra's run_pretraining.py): a small generator (masked LM) and a "
      "discriminator (replaced-token detection), both original post-LN BERT encoders sharing the word, position "
      "and token-type embeddings and the embedding LayerNorm, each with its own projection when --embedding-size "
      "differs from its width. Each step masks every example anew (positions drawn with replacement, 85% [MASK] / "
      "15% unchanged), the generator predicts the masked tokens, replacements are Gumbel-sampled from its logits "
      "(no gradient), and the discriminator labels every real token as replaced or original; loss = mlm + "
      "--disc-weight x disc. The masking and sampling draws come from a counter-based generator keyed by --seed, "
      "the iteration and each sample's global index (as dropout), so they do not depend on the parallel layout or "
      "the resume point.\n\n"
      "Data (--data-path, one entry): a Megatron sentence-level dataset (lmforge prep --split-sentences), a text "
      "file of one sentence per line with blank lines between documents, or a directory of such files; examples "
      "are made in memory as build_pretraining_dataset.py makes them (--seq-length is its --max-seq-length, --seed "
      "its random seed; text is lower-cased unless --tokenizer-type BertWordPieceCase), cut by --split, and each "
      "split is read in a seeded order per epoch. The vocabulary is the --vocab-file's lines (no [BOS]/[EOS], not "
      "padded: --make-vocab-size-divisible-by does not apply).\n"
      "Logged per interval: mlm loss, disc loss and disc accuracy (the share of real tokens the discriminator "
      "calls right, replaced when its logit is positive); evaluation reports the same on the validation split. "
      "Checkpoints: both networks in one model.safetensors (the discriminator under ElectraForPreTraining's names, "
      "the generator's own tensors prefixed \"generator.\"), config.json with model_type electra, and hf/"
      "discriminator and hf/generator: Hugging Face ElectraForPreTraining and ElectraForMaskedLM directories "
      "(config.json and model.safetensors each, transformers' names; the generator's copy of the shared "
      "embeddings).\n"
      "--tensor-model-parallel-size splits the discriminator's layers (whole heads and an equal share of the MLP "
      "per rank); the embeddings, the generator (1 head wide at Small) and both heads are replicated on the group's "
      "ranks. Pipeline stages are not implemented for ELECTRA.";
  }
  unsigned flag_groups() const override { return (unsigned)FlagGroup::ELECTRA; }

  // --electra-size: the sizes, learning rate, global batch, embedding size, generator fraction and mask probability
  // not given on the command line.
  std::string apply_config_file(train::TrainOptions& o) const override {
    const ElectraPreset& p = preset_of(o.electra_size);
    std::string from_preset;
    auto take = [&](auto& field, auto value, const char* flag) {
      if (field != 0) return;
      field = value;
      from_preset += std::string(from_preset.empty() ? "" : ", ") + flag;
    };
    const bool preset_width = o.hidden_size == 0 || o.hidden_size == p.hidden;
    take(o.num_layers, p.layers, "--num-layers");
    take(o.hidden_size, p.hidden, "--hidden-size");
    take(o.num_attention_heads, p.heads, "--num-attention-heads");
    if (preset_width) take(o.ffn_hidden_size, p.ffn, "--ffn-hidden-size");
    if (preset_width) take(o.embedding_size, p.embedding, "--embedding-size");
    take(o.generator_hidden_size, p.generator_fraction, "--generator-hidden-size");
    take(o.schedule.lr, p.lr, "--lr");
    take(o.global_batch_size, p.batch, "--global-batch-size");
    take(o.electra_mask_prob, p.mask_prob, "--mask-prob");
    if (from_preset.empty()) return "";
    return "--electra-size " + o.electra_size + ": " + from_preset + " from the preset\n";
  }

  void validate(train::TrainOptions& o) const override {
    if (const int T = o.tensor_model_parallel_size; T > 1) {
      const int ffn = o.ffn_hidden_size > 0 ? o.ffn_hidden_size : 4 * o.hidden_size;
      if (ffn % T != 0)
        throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide the discriminator's FFN "
                    "width " + std::to_string(ffn) + " (each rank takes an equal share of its MLP)");
    }
    if (o.pipeline_model_parallel_size > 1)
      throw Error("--pipeline-model-parallel-size " + std::to_string(o.pipeline_model_parallel_size) + ": train "
                  "electra runs the generator and the discriminator in one stage (the generator's samples feed the "
                  "discriminator within the step); pipeline stages are not implemented for it");
    if (o.make_vocab_size_divisible_by != 128 && o.make_vocab_size_divisible_by != 1)
      throw Error("--make-vocab-size-divisible-by " + std::to_string(o.make_vocab_size_divisible_by) + ": train "
                  "electra does not pad its vocabulary (the generator samples from every column); drop the flag");
    if (const double p = mask_prob_of(o); !(p > 0.0 && p < 1.0))
      throw Error("--mask-prob " + std::to_string(p) + " must be in (0, 1)");
    if (const double g = generator_hidden_of(o); g > 1.0 && g != std::floor(g))
      throw Error("--generator-hidden-size " + std::to_string(g) + ": a fraction in (0, 1] of --hidden-size or a "
                  "whole width");
    if (!(o.generator_layers > 0.0) || (o.generator_layers > 1.0 && o.generator_layers != std::floor(o.generator_layers)))
      throw Error("--generator-layers " + std::to_string(o.generator_layers) + ": a fraction in (0, 1] of "
                  "--num-layers or a whole count");
    if (generator_size(generator_hidden_of(o), o.hidden_size) < 1 || generator_size(o.generator_layers, o.num_layers) < 1)
      throw Error("--generator-hidden-size / --generator-layers: the generator would have no width or no layers");
    if (!(o.disc_weight >= 0.0) || !std::isfinite(o.disc_weight))
      throw Error("--disc-weight must be a finite number >= 0");
    if (!(o.sampling_temperature > 0.0) || !std::isfinite(o.sampling_temperature))
      throw Error("--sampling-temperature must be positive");
    if (o.max_predictions_per_seq < 0) throw Error("--max-predictions-per-seq must be >= 0 (0: ELECTRA's rule)");
    if (o.embedding_size < 0) throw Error("--embedding-size must be positive");
    if (o.seq_length < 5)
      throw Error("--seq-length " + std::to_string(o.seq_length) + ": ELECTRA's examples need at least 5 tokens");
  }
  bool checks_token_ids(const std::string& prefix) const override {
    (void)prefix;  // the examples' ids are checked against the --vocab-file's lines as they are made
    return false;
  }
  train::ModelShape shape(const train::TrainOptions& o, int64_t vocab_size) const override {
    (void)vocab_size;
    const model::ElectraConfig c = electra_config(o);
    return {(int64_t)model::Electra::parameter_table(c).whole_numel(), (int64_t)c.padded_vocab_size(),
            (int64_t)(c.num_layers + c.gen_layers), (int64_t)c.heads, (int64_t)o.seq_length};
  }
  std::string pipeline_stage_layers(const train::TrainOptions& o) const override {
    return std::to_string(o.num_layers);
  }
  std::unique_ptr<train::Model> make_model(const train::TrainOptions& o, int64_t vocab_size, kernels::Backend& backend,
                                           dist::Communicator* tensor_parallel, int pipeline_rank) const override {
    (void)vocab_size, (void)pipeline_rank;
    return std::make_unique<train::ElectraModel>(electra_config(o), o.seq_length, backend, tensor_parallel);
  }
  std::unique_ptr<train::Task> make_task(const train::TrainOptions& o, const text::Tokenizer& tokenizer,
                                         const std::array<int64_t, 3>& samples_per_split) const override {
    (void)tokenizer;
    train::ElectraTaskConfig c;
    c.source = o.data_path[0];
    c.split = o.split;
    c.seed = o.seed;
    c.disc_weight = o.disc_weight;
    c.samples_per_split = samples_per_split;
    return std::make_unique<train::ElectraTask>(electra_examples(o), c);
  }
  std::vector<std::string> checkpoint_model_types() const override { return {"electra"}; }
};

}  // namespace

const ModelFamily& electra_family() {
  static const ElectraFamily family;
  return family;
}

}  // namespace lmforge::families
