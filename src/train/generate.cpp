// defines: sample_token(), generate() (over the model's key/value cache or its full forward), load_model()
#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "train/gpt_hf_config.h"
#include "util/error.h"

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

std::vector<int32_t> generate(model::GPT& model, std::span<const int32_t> prompt, const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const auto& c = model.config();
  if (prompt.empty()) throw Error("generate: the prompt gives no tokens");
  if (options.max_new_tokens < 0)
    throw Error("generate: --max-new-tokens must be >= 0, got " + std::to_string(options.max_new_tokens));
  if ((int64_t)prompt.size() + options.max_new_tokens > c.max_positions)
    throw Error("generate: the prompt (" + std::to_string(prompt.size()) + " tokens) plus --max-new-tokens " +
                std::to_string(options.max_new_tokens) + " exceeds the model's max-position-embeddings " +
                std::to_string(c.max_positions));
  // Every sampling flag is checked, whether or not this run uses it: a NaN or negative temperature is a typo, not a
  // request for greedy decoding.
  if (!(options.sampling.temperature >= 0.0) || !std::isfinite(options.sampling.temperature))
    throw Error("generate: --temperature must be a finite number >= 0 (0: greedy), got " +
                std::to_string(options.sampling.temperature));
  if (options.sampling.top_k < 0) throw Error("generate: --top-k must be >= 0, got " + std::to_string(options.sampling.top_k));
  if (!(options.sampling.top_p > 0.0 && options.sampling.top_p <= 1.0))
    throw Error("generate: --top-p must be in (0, 1], got " + std::to_string(options.sampling.top_p));
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
    model.backend().copy_to_host(host.data(), logits, host.size());
    const int32_t next = sample_token(host.data(), c.vocab_size, options.sampling, rng);
    sequence.push_back(next);
    produced.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_id && next == *options.stop_id) break;
  }
  return produced;
}

std::unique_ptr<model::GPT> load_model(const std::string& path, const std::string& config_path) {
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
    dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
  }
  const std::string config_file = config_path.empty() ? (fs::path(dir) / "config.json").string() : config_path;
  std::ifstream in(config_file, std::ios::binary);
  if (!in) throw Error(config_file + ": cannot read the model's config.json (give --config)");
  std::stringstream text;
  text << in.rdbuf();
  const model::GPTConfig config = gpt_config_from_json(text.str(), config_file);
  auto model = std::make_unique<model::GPT>(config);
  std::vector<checkpoint::NamedTensor> tensors;
  for (const param::Parameter& t : model->tensors()) tensors.push_back({t.name, t.shape, model->params() + t.offset});
  checkpoint::load_weights(weights, tensors);
  // Weights that are not finite would decode to garbage ("!!!!") with exit 0: name the first bad tensor instead.
  for (const param::Parameter& t : model->tensors()) {
    const float* p = model->params() + t.offset;
    for (size_t i = 0; i < t.numel; i++)
      if (!std::isfinite(p[i]))
        throw Error(weights + ": tensor '" + t.name + "' holds a non-finite value (" + std::to_string(p[i]) +
                    " at element " + std::to_string(i) + "); the checkpoint is corrupt or training diverged");
  }
  return model;
}

}  // namespace lmforge::train
