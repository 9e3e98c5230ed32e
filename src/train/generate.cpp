// defines: sample_token(), generate() (over the model's key/value cache or its full forward), load_model()
#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <variant>

#include "checkpoint/checkpoint.h"
#include "families/registry.h"
#include "families/gpt/gpt_hf_config.h"
#include "families/t5/t5_hf_config.h"
#include "util/error.h"
#include "util/file_text.h"

namespace lmforge::train {

int32_t sample_token(const float* logits, int vocab_size, const SamplingOptions& options, std::mt19937_64& rng) {
  if (options.greedy || options.temperature <= 0.0) {
    int best = 0;
    for (int v = 1; v < vocab_size; v++)
      if (logits[v] > logits[best]) best = v;
    return best;
  }
  // Candidates ordered by logit descending, then id: a total order, so top-k/top-p cut the same set every run.
  std::vector<int32_t> order(vocab_size);
  std::iota(order.begin(), order.end(), 0);
  auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = (size_t)vocab_size;
  if (options.top_k > 0 && (size_t)options.top_k < keep) {
    keep = (size_t)options.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  // softmax(logits / T) over the kept candidates, in double.
  std::vector<double> prob(keep);
  const double maxv = logits[order[0]] / options.temperature;
  double sum = 0.0;
  for (size_t i = 0; i < keep; i++) {
    prob[i] = std::exp(logits[order[i]] / options.temperature - maxv);
    sum += prob[i];
  }
  for (double& p : prob) p /= sum;
  if (options.top_p < 1.0) {
    double mass = 0.0;
    size_t cut = 0;
    while (cut < keep) {
      mass += prob[cut++];
      if (mass >= options.top_p) break;
    }
    keep = cut;
    double kept = 0.0;
    for (size_t i = 0; i < keep; i++) kept += prob[i];
    for (size_t i = 0; i < keep; i++) prob[i] /= kept;
  }
  // Inverse CDF with a 53-bit uniform in [0,1): independent of the standard library's distributions.
  const double u = (rng() >> 11) * (1.0 / 9007199254740992.0);
  double acc = 0.0;
  for (size_t i = 0; i < keep; i++) {
    acc += prob[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

namespace {

// Every sampling flag is checked, whether or not this run uses it: a NaN or negative temperature is a typo, not a
// request for greedy decoding.
void check_options(std::span<const int32_t> prompt, const GenerateOptions& options) {
  if (prompt.empty()) throw Error("generate: the prompt gives no tokens");
  if (options.max_new_tokens < 0)
    throw Error("generate: --max-new-tokens must be >= 0, got " + std::to_string(options.max_new_tokens));
  if (!(options.sampling.temperature >= 0.0) || !std::isfinite(options.sampling.temperature))
    throw Error("generate: --temperature must be a finite number >= 0 (0: greedy), got " +
                std::to_string(options.sampling.temperature));
  if (options.sampling.top_k < 0) throw Error("generate: --top-k must be >= 0, got " + std::to_string(options.sampling.top_k));
  if (!(options.sampling.top_p > 0.0 && options.sampling.top_p <= 1.0))
    throw Error("generate: --top-p must be in (0, 1], got " + std::to_string(options.sampling.top_p));
}

}  // namespace

std::vector<int32_t> generate(model::GPT& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const auto& c = model.config();
  check_options(prompt, options);
  if ((int64_t)prompt.size() + options.max_new_tokens > c.max_positions)
    throw Error("generate: the prompt (" + std::to_string(prompt.size()) + " tokens) plus --max-new-tokens " +
                std::to_string(options.max_new_tokens) + " exceeds the model's max-position-embeddings " +
                std::to_string(c.max_positions));
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<int32_t> produced;
  std::vector<float> host(c.padded_vocab_size());
  // The model's key/value cache (model::GPT::decode_step): one position per call, the prompt included.
  const float* logits = nullptr;
  if (options.use_kv_cache) {
    model.decode_begin(1);
    for (const int32_t id : prompt) logits = model.decode_step(&id);
  }
  for (int step = 0; step < options.max_new_tokens; step++) {
    if (options.use_kv_cache) {
      if (step > 0) logits = model.decode_step(&sequence.back());
    } else {
      logits = model.forward_logits(sequence.data(), 1, (int)sequence.size());
    }
    model.backend().copy_to_host(host.data(), logits, host.size() * sizeof(float));
    const int32_t next = sample_token(host.data(), c.vocab_size, options.sampling, rng);
    sequence.push_back(next);
    produced.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_id && next == *options.stop_id) break;
  }
  return produced;
}

namespace {

// The weights file and config.json that `path` (and an explicit config_path) name; see load_model().
struct CheckpointFiles {
  std::string weights, config;
};

CheckpointFiles checkpoint_files(const std::string& path, const std::string& config_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path + ": no such file or directory");
  std::string weights = path, dir;
  if (fs::is_directory(path, ec)) {
    dir = checkpoint::find_latest_checkpoint(path).value_or(path);
    weights = (fs::path(dir) / "model.safetensors").string();
    if (!fs::exists(weights, ec))
      throw Error(dir +
                  ": no model.safetensors (expected a save directory, an iteration directory or a model "
                  "directory)");
  } else {
    const fs::path parent = fs::path(path).parent_path();
    dir = parent.empty() ? fs::path(".").string() : parent.string();
  }
  return {weights, config_path.empty() ? (fs::path(dir) / "config.json").string() : config_path};
}

std::string read_config(const std::string& config_file) {
  std::error_code ec;
  if (!std::filesystem::exists(config_file, ec))
    throw Error(config_file + ": cannot read the model's config.json (give --config)");
  return read_text_file(config_file, "the model's config.json (--config)");
}

// Loads every tensor of `table` from `weights` (checkpoint::load_weights refuses a non-finite value, naming the tensor:
// it would decode to garbage with exit 0): read into host memory, then copied to the model's device through its
// backend.
void load_checked(const std::string& weights, model::LanguageModel& model) {
  std::vector<float> host(model.num_parameters());
  std::vector<checkpoint::NamedTensor> tensors;
  for (const param::Parameter& t : model.table()) tensors.push_back({t.name, t.shape, host.data() + t.offset});
  checkpoint::load_weights(weights, tensors);
  model.backend().copy_to_device(model.params(), host.data(), host.size() * sizeof(float));
  model.params_updated();
}

}  // namespace

std::unique_ptr<model::GPT> load_model(const std::string& path, kernels::Backend& backend,
                                       const std::string& config_path) {
  const CheckpointFiles files = checkpoint_files(path, config_path);
  const model::GPTConfig config = gpt_config_from_json(read_config(files.config), files.config);
  auto model = std::make_unique<model::GPT>(config, backend);
  load_checked(files.weights, *model);
  return model;
}

std::string checkpoint_model_type(const std::string& path, const std::string& config_path) {
  const CheckpointFiles files = checkpoint_files(path, config_path);
  const checkpoint::JsonObject o = checkpoint::parse_json_object(read_config(files.config), files.config);
  const auto it = o.find("model_type");
  if (it == o.end()) return "";
  const std::string* type = std::get_if<std::string>(&it->second);
  return type ? *type : "";
}

const families::ModelFamily& generating_family(const std::string& path, const std::string& config_path) {
  const std::string type = checkpoint_model_type(path, config_path);
  const families::ModelFamily& family = families::checkpoint_family(
      type, config_path.empty() ? path + " (its config.json)" : config_path);
  if (family.generation() == families::Generation::NONE)
    throw Error(path + ": a " + family.name() + " checkpoint (config.json model_type \"" + type +
                "\"): it does not generate text (lmforge generate runs the checkpoints of a decoder or an "
                "encoder-decoder: train gpt, train t5); it is read by lmforge train " + family.name() + " --load " +
                path + " (to resume, or with --finetune to start from its weights)");
  return family;
}

std::unique_ptr<model::T5> load_t5_model(const std::string& path, kernels::Backend& backend,
                                         const std::string& config_path) {
  const CheckpointFiles files = checkpoint_files(path, config_path);
  const model::T5Config config = t5_config_from_json(read_config(files.config), files.config);
  auto model = std::make_unique<model::T5>(config, backend);
  load_checked(files.weights, *model);
  return model;
}

std::vector<int32_t> encode_t5_prompt(std::string_view text, text::TextEncoder& encoder,
                                      std::span<const int32_t> sentinels) {
  static constexpr std::string_view kOpen = "<extra_id_";
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t marker = text.find(kOpen, at);
    encoder.encode(text.substr(at, marker == std::string_view::npos ? std::string_view::npos : marker - at), ids);
    if (marker == std::string_view::npos) break;
    // <extra_id_N>: N decimal digits, then '>'.
    size_t end = marker + kOpen.size();
    int64_t n = 0;
    while (end < text.size() && end - marker - kOpen.size() < 9 && text[end] >= '0' && text[end] <= '9')
      n = n * 10 + (text[end++] - '0');
    const size_t close = text.find('>', marker);
    if (end == marker + kOpen.size() || end >= text.size() || text[end] != '>')
      throw Error("T5 prompt: malformed sentinel '" +
                  std::string(text.substr(marker, close == std::string_view::npos ? 16 : close - marker + 1)) +
                  "' at byte " + std::to_string(marker) + " (write <extra_id_0>, <extra_id_1>, ...)");
    if (n >= (int64_t)sentinels.size())
      throw Error("T5 prompt: <extra_id_" + std::to_string(n) + "> at byte " + std::to_string(marker) +
                  " needs --vocab-extra-ids > " + std::to_string(n) + " (the vocabulary has " +
                  std::to_string(sentinels.size()) + " sentinels)");
    ids.push_back(sentinels[(size_t)n]);
    at = end + 1;
  }
  return ids;
}

std::vector<int32_t> generate_t5(model::T5& model, std::span<const int32_t> encoder_prompt, int32_t start_id,
                                 const GenerateOptions& options, const std::function<void(int32_t)>& on_token) {
  const model::T5Config& c = model.config();
  check_options(encoder_prompt, options);
  if ((int64_t)encoder_prompt.size() > c.max_positions)
    throw Error("generate: the prompt (" + std::to_string(encoder_prompt.size()) +
                " tokens) exceeds the model's max-position-embeddings " + std::to_string(c.max_positions));
  if (options.max_new_tokens > c.max_positions)
    throw Error("generate: --max-new-tokens " + std::to_string(options.max_new_tokens) +
                " exceeds the decoder's max-position-embeddings " + std::to_string(c.max_positions));
  if (start_id < 0 || start_id >= c.vocab_size)
    throw Error("generate: the decoder's start id " + std::to_string(start_id) + " is outside the vocabulary");
  std::mt19937_64 rng(options.seed);
  const int Te = (int)encoder_prompt.size();
  // The decoder's input: [BOS] and then every produced token but the last (each position predicts the next).
  std::vector<int32_t> decoder_input = {start_id};
  std::vector<int32_t> produced;
  std::vector<float> host(c.padded_vocab_size());
  if (options.use_kv_cache) model.decode_begin(encoder_prompt.data(), 1, Te);
  for (int step = 0; step < options.max_new_tokens; step++) {
    const float* logits;
    if (options.use_kv_cache) {
      logits = model.decode_step(&decoder_input.back());
    } else {
      const int Td = (int)decoder_input.size();
      logits = model.forward_logits(encoder_prompt.data(), 1, Te, decoder_input.data(), Td) +
               (size_t)(Td - 1) * c.padded_vocab_size();
    }
    model.backend().copy_to_host(host.data(), logits, host.size() * sizeof(float));
    const int32_t next = sample_token(host.data(), c.vocab_size, options.sampling, rng);
    produced.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_id && next == *options.stop_id) break;
    decoder_input.push_back(next);
  }
  return produced;
}

}  // namespace lmforge::train
