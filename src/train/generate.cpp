// defines: KVCacheDecoder (chunked incremental forward with a per-layer K/V cache), sample_token(), generate()
#include "train/generate.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "kernels/ops.h"
#include "train/trainer.h"
#include "util/error.h"

namespace lmforge::train {

using kernels::WeightLayout;

namespace {

// out[OC] = x[IC]·W (+ bias) for ONE row, as matrix-vector products: for a single row OpenBLAS's sgemm packs the
// whole weight matrix on every call (in a profile of decode steps, packing took 6x the time of the multiply), while
// sgemv streams it once; a decode step is nothing but such rows. Threads own disjoint column blocks, each a single-threaded sgemv (the kernels keep OpenBLAS
// single-threaded under OpenMP). Host memory: CPU backend only, like the cached attention.
void linear_one_row(float* out, const float* x, const float* W, const float* bias, int IC, int OC,
                    WeightLayout layout) {
#pragma omp parallel if ((size_t)IC * OC >= (1u << 16))
  {
    // The team's real size: 1 when the if clause keeps this serial.
    const int threads = omp_get_num_threads();
    const int chunk = ((OC + threads - 1) / threads + 15) / 16 * 16;
    const int o0 = omp_get_thread_num() * chunk;
    const int o1 = std::min(OC, o0 + chunk);
    if (o0 < o1) {
      // Start from the bias (or 0) and accumulate with beta = 1: OpenBLAS 0.3.21 scales y by beta = 0 instead of
      // overwriting it, which would keep NaNs of uninitialised memory.
      if (bias != nullptr)
        std::copy(bias + o0, bias + o1, out + o0);
      else
        std::fill(out + o0, out + o1, 0.0f);
      const float beta = 1.0f;
      if (layout == WeightLayout::IN_OUT)  // W [IC,OC]: out[o] = Σ_i x[i]·W[i,o], a column block of Wᵀx
        cblas_sgemv(CblasRowMajor, CblasTrans, IC, o1 - o0, 1.0f, W + o0, OC, x, 1, beta, out + o0, 1);
      else  // W [OC,IC]: out[o] = W[o,:]·x, a row block
        cblas_sgemv(CblasRowMajor, CblasNoTrans, o1 - o0, IC, 1.0f, W + (size_t)o0 * IC, IC, x, 1, beta, out + o0, 1);
    }
  }
}

void linear(float* out, const float* inp, const float* W, const float* bias, int n, int IC, int OC,
            WeightLayout layout) {
  if (n == 1)
    linear_one_row(out, inp, W, bias, IC, OC, layout);
  else
    kernels::linear_forward(out, inp, W, bias, n, IC, OC, layout);
}

}  // namespace

KVCacheDecoder::KVCacheDecoder(model::GPT& model) : model_(model) {
  const auto& c = model_.config();
  const size_t per = (size_t)c.num_layers * c.max_positions * c.hidden;
  k_cache_.assign(per, 0.0f);
  v_cache_.assign(per, 0.0f);
}

KVCacheDecoder::~KVCacheDecoder() {
  if (memory_ != nullptr) model_.backend().free(memory_);
}

void KVCacheDecoder::ensure_chunk(int n) {
  if (n <= chunk_capacity_) return;
  const auto& c = model_.config();
  const size_t C = c.hidden, N = n, Vp = c.padded_vocab_size();
  const size_t total = N * C * 4 + N * 2 + N * C * 3 + N * C * 4 * 2 + Vp;
  if (memory_ != nullptr) model_.backend().free(memory_);
  memory_ = model_.backend().alloc(total);
  float* p = memory_;
  auto take = [&](size_t count) {
    float* r = p;
    p += count;
    return r;
  };
  x_ = take(N * C);
  ln_ = take(N * C);
  mean_ = take(N);
  rstd_ = take(N);
  qkv_ = take(N * C * 3);
  atty_ = take(N * C);
  proj_ = take(N * C);
  fch_ = take(N * C * 4);
  fch_gelu_ = take(N * C * 4);
  logits_ = take(Vp);
  chunk_capacity_ = n;
}

const float* KVCacheDecoder::feed(std::span<const int32_t> ids) {
  const auto& c = model_.config();
  const int n = (int)ids.size();
  if (n < 1) throw Error("KV-cache decoder: nothing to feed");
  if (position_ + n > c.max_positions)
    throw Error("KV-cache decoder: position " + std::to_string(position_ + n) + " exceeds max_positions " +
                std::to_string(c.max_positions));
  for (int32_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw Error("KV-cache decoder: token id " + std::to_string(id) + " outside the vocabulary [0, " +
                  std::to_string(c.vocab_size) + ")");
  ensure_chunk(n);
  const int C = c.hidden, NH = c.heads, hs = C / NH, L = c.num_layers, P = c.max_positions;
  const size_t NC = (size_t)n * C;
  const int p0 = position_;
  // Positions p0..p0+n−1 are one "batch row" of length n whose position embeddings start at p0: embed by hand
  // (embedding_forward would start at wpe[0]).
  const float* wte = model_.param("transformer.wte.weight");
  const float* wpe = model_.param("transformer.wpe.weight");
  for (int i = 0; i < n; i++) {
    const float* e = wte + (size_t)ids[i] * C;
    const float* q = wpe + (size_t)(p0 + i) * C;
    float* o = x_ + (size_t)i * C;
    for (int j = 0; j < C; j++) o[j] = e[j] + q[j];
  }
  const float scale = 1.0f / std::sqrt((float)hs);
  for (int l = 0; l < L; l++) {
    const std::string pre = "transformer.h." + std::to_string(l) + ".";
    auto w = [&](const char* name) { return model_.param(pre + name); };
    kernels::layernorm_forward(ln_, mean_, rstd_, x_, w("ln_1.weight"), w("ln_1.bias"), n, C);
    linear(qkv_, ln_, w("attn.c_attn.weight"), w("attn.c_attn.bias"), n, C, 3 * C, WeightLayout::IN_OUT);
    float* kc = k_cache_.data() + (size_t)l * P * C;
    float* vc = v_cache_.data() + (size_t)l * P * C;
    for (int i = 0; i < n; i++) {
      const float* row = qkv_ + (size_t)i * 3 * C;
      std::copy(row + C, row + 2 * C, kc + (size_t)(p0 + i) * C);
      std::copy(row + 2 * C, row + 3 * C, vc + (size_t)(p0 + i) * C);
    }
    // Causal attention of each new position t over cached positions s ≤ t: the same max-shifted softmax and
    // left-to-right value sum as the training kernel.
    scores_.resize((size_t)p0 + n);
    for (int i = 0; i < n; i++) {
      const int t = p0 + i;
      for (int h = 0; h < NH; h++) {
        const float* q = qkv_ + (size_t)i * 3 * C + (size_t)h * hs;
        float maxv = -INFINITY;
        for (int s = 0; s <= t; s++) {
          const float* k = kc + (size_t)s * C + (size_t)h * hs;
          float d = 0.0f;
          for (int j = 0; j < hs; j++) d += q[j] * k[j];
          scores_[s] = d * scale;
          maxv = std::max(maxv, scores_[s]);
        }
        float sum = 0.0f;
        for (int s = 0; s <= t; s++) {
          scores_[s] = std::exp(scores_[s] - maxv);
          sum += scores_[s];
        }
        const float inv = 1.0f / sum;
        float* o = atty_ + (size_t)i * C + (size_t)h * hs;
        std::fill(o, o + hs, 0.0f);
        for (int s = 0; s <= t; s++) {
          const float ps = scores_[s] * inv;
          const float* v = vc + (size_t)s * C + (size_t)h * hs;
          for (int j = 0; j < hs; j++) o[j] += ps * v[j];
        }
      }
    }
    linear(proj_, atty_, w("attn.c_proj.weight"), w("attn.c_proj.bias"), n, C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(x_, x_, proj_, NC);
    kernels::layernorm_forward(ln_, mean_, rstd_, x_, w("ln_2.weight"), w("ln_2.bias"), n, C);
    linear(fch_, ln_, w("mlp.c_fc.weight"), w("mlp.c_fc.bias"), n, C, 4 * C, WeightLayout::IN_OUT);
    kernels::gelu_forward(fch_gelu_, fch_, NC * 4);
    linear(proj_, fch_gelu_, w("mlp.c_proj.weight"), w("mlp.c_proj.bias"), n, 4 * C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(x_, x_, proj_, NC);
  }
  // Only the last position's logits are needed: final LayerNorm and the tied head on that row alone.
  const float* last = x_ + (size_t)(n - 1) * C;
  kernels::layernorm_forward(ln_, mean_, rstd_, last, model_.param("transformer.ln_f.weight"),
                             model_.param("transformer.ln_f.bias"), 1, C);
  linear(logits_, ln_, wte, nullptr, 1, C, c.padded_vocab_size(), WeightLayout::OUT_IN);
  position_ += n;
  return logits_;
}

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
  if (!options.sampling.greedy && options.sampling.temperature > 0.0) {
    if (options.sampling.top_k < 0) throw Error("generate: --top-k must be >= 0");
    if (!(options.sampling.top_p > 0.0 && options.sampling.top_p <= 1.0))
      throw Error("generate: --top-p must be in (0, 1], got " + std::to_string(options.sampling.top_p));
  }
  std::mt19937_64 rng(options.seed);
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<int32_t> produced;
  std::optional<KVCacheDecoder> decoder;
  if (options.use_kv_cache) decoder.emplace(model);
  std::vector<float> host(c.padded_vocab_size());
  for (int step = 0; step < options.max_new_tokens; step++) {
    const float* logits;
    if (decoder) {
      // First step: the whole prompt in one chunk; then one position per step.
      logits = step == 0 ? decoder->feed(sequence) : decoder->feed(std::span<const int32_t>(&sequence.back(), 1));
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
  for (const model::ParamTensor& t : model->tensors()) tensors.push_back({t.name, t.shape, model->params() + t.offset});
  checkpoint::load_weights(weights, tensors);
  return model;
}

}  // namespace lmforge::train
