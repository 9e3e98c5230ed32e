// defines: TensorParallelGPT (Megatron tensor parallelism over the GPT-2 kernels of kernels/ops.h)
#include "train/parallel_gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::train {

using kernels::WeightLayout;

namespace {
bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
}  // namespace

TensorParallelGPT::TensorParallelGPT(const model::GPTConfig& config, dist::Communicator& tp)
    : config_(config), tp_(tp), rank_(tp.rank()), size_(tp.size()) {
  config_.validate();
  const int T = size_;
  if (config_.heads % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide --num-attention-heads " +
                std::to_string(config_.heads) + " (each rank takes whole heads)");
  if (config_.padded_vocab_size() % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide the padded vocabulary " +
                std::to_string(config_.padded_vocab_size()) + " (use --make-vocab-size-divisible-by a multiple of it)");
  whole_ = model::GPT::parameter_table(config_);
  for (size_t i = 0; i < whole_.size(); i++) {
    const model::ParamTensor& w = whole_[i];
    Tensor t;
    t.name = w.name;
    t.full_shape = w.shape;
    t.shape = w.shape;
    t.weight_decay = w.weight_decay;
    const bool rows = w.name == "transformer.wte.weight" || ends_with(w.name, "attn.c_proj.weight") ||
                      ends_with(w.name, "mlp.c_proj.weight");
    const bool cols = ends_with(w.name, "c_attn.weight") || ends_with(w.name, "c_attn.bias") ||
                      ends_with(w.name, "c_fc.weight") || ends_with(w.name, "c_fc.bias");
    t.replicated = !rows && !cols;
    t.split_rows = rows;
    if (rows) t.shape[0] /= T;
    if (cols) t.shape.back() /= T;
    t.numel = 1;
    for (int64_t d : t.shape) t.numel *= (size_t)d;
    t.offset = n_;
    n_ += t.numel;
    tensors_.push_back(std::move(t));
  }
  params_.assign(n_, 0.0f);
  grads_.assign(n_, 0.0f);
}

TensorParallelGPT::~TensorParallelGPT() = default;

std::vector<std::pair<int64_t, int64_t>> TensorParallelGPT::ranges(size_t i, int q) const {
  const Tensor& t = tensors_[i];
  if (t.replicated) return {};
  const int64_t C = config_.hidden, Cl = C / size_;
  if (ends_with(t.name, "c_attn.weight") || ends_with(t.name, "c_attn.bias"))
    return {{q * Cl, (q + 1) * Cl}, {C + q * Cl, C + (q + 1) * Cl}, {2 * C + q * Cl, 2 * C + (q + 1) * Cl}};
  const int64_t len = t.split_rows ? t.shape[0] : t.shape.back();
  return {{q * len, (q + 1) * len}};
}

void TensorParallelGPT::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

std::vector<optim::ParamSpan> TensorParallelGPT::spans() {
  std::vector<optim::ParamSpan> out;
  for (const Tensor& t : tensors_)
    out.push_back({t.name, params_.data() + t.offset, grads_.data() + t.offset, t.numel, t.weight_decay});
  return out;
}

// Whole [R, K] (1-D: R = 1) → piece: rows lo..hi, or for each row the column ranges in order.
void TensorParallelGPT::slice_whole(const float* whole, float* local) const {
  for (size_t i = 0; i < tensors_.size(); i++) {
    const Tensor& t = tensors_[i];
    const float* src = whole + whole_[i].offset;
    float* dst = local + t.offset;
    if (t.replicated) {
      std::copy(src, src + t.numel, dst);
      continue;
    }
    const int64_t K = t.full_shape.back(), R = t.full_shape.size() == 1 ? 1 : t.full_shape[0];
    for (const auto& [lo, hi] : ranges(i, rank_)) {
      if (t.split_rows) {
        std::copy(src + lo * K, src + hi * K, dst);
        dst += (hi - lo) * K;
      }
    }
    if (t.split_rows) continue;
    for (int64_t r = 0; r < R; r++)
      for (const auto& [lo, hi] : ranges(i, rank_)) {
        std::copy(src + r * K + lo, src + r * K + hi, dst);
        dst += hi - lo;
      }
  }
}

void TensorParallelGPT::gather_whole(const float* local, float* whole) {
  std::vector<float> all;
  for (size_t i = 0; i < tensors_.size(); i++) {
    const Tensor& t = tensors_[i];
    float* dst = whole + whole_[i].offset;
    if (t.replicated) {
      std::copy(local + t.offset, local + t.offset + t.numel, dst);
      continue;
    }
    all.assign(t.numel * (size_t)size_, 0.0f);
    std::copy(local + t.offset, local + t.offset + t.numel, all.begin() + (ptrdiff_t)(t.numel * (size_t)rank_));
    const std::vector<size_t> counts((size_t)size_, t.numel);
    tp_.all_gather(all.data(), counts);
    const int64_t K = t.full_shape.back(), R = t.full_shape.size() == 1 ? 1 : t.full_shape[0];
    for (int q = 0; q < size_; q++) {
      const float* src = all.data() + t.numel * (size_t)q;
      if (t.split_rows) {
        for (const auto& [lo, hi] : ranges(i, q)) {
          std::copy(src, src + (hi - lo) * K, dst + lo * K);
          src += (hi - lo) * K;
        }
        continue;
      }
      for (int64_t r = 0; r < R; r++)
        for (const auto& [lo, hi] : ranges(i, q)) {
          std::copy(src, src + (hi - lo), dst + r * K + lo);
          src += hi - lo;
        }
    }
  }
}

void TensorParallelGPT::ensure(int B, int T) {
  const size_t L = config_.num_layers, C = config_.hidden, N = (size_t)B * T, Cl = C / size_,
               NHl = config_.heads / size_, Vl = config_.padded_vocab_size() / size_;
  auto sz = [](std::vector<float>& v, size_t n) { v.resize(n); };
  sz(encoded_, N * C);
  sz(ln1_, L * N * C), sz(ln1_mean_, L * N), sz(ln1_rstd_, L * N), sz(qkv_, L * N * 3 * Cl);
  sz(att_, L * B * NHl * T * T), sz(atty_, L * N * Cl), sz(attproj_, L * N * C), sz(res2_, L * N * C);
  sz(ln2_, L * N * C), sz(ln2_mean_, L * N), sz(ln2_rstd_, L * N), sz(fch_, L * N * 4 * Cl);
  sz(fch_gelu_, L * N * 4 * Cl), sz(fcproj_, L * N * C), sz(res3_, L * N * C);
  sz(lnf_, N * C), sz(lnf_mean_, N), sz(lnf_rstd_, N), sz(logits_, N * Vl), sz(lse_, N);
  sz(d_res_, N * C), sz(d_ln_, N * C), sz(d_atty_, N * Cl), sz(d_qkv_, N * 3 * Cl), sz(d_fch_gelu_, N * 4 * Cl);
  sz(d_fch_, N * 4 * Cl);
  B_ = B;
  T_ = T;
}

float TensorParallelGPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T) {
  have_targets_ = false;
  if (B < 1 || T < 1 || T > config_.max_positions)
    throw Error("TensorParallelGPT forward: bad batch shape");
  const size_t N = (size_t)B * T;
  for (size_t i = 0; i < N; i++)
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size || targets[i] < 0 || targets[i] >= config_.vocab_size)
      throw Error("TensorParallelGPT forward: id outside the vocabulary at position " + std::to_string(i));
  ensure(B, T);
  tokens_.assign(tokens, tokens + N);
  targets_.assign(targets, targets + N);
  const int C = config_.hidden, L = config_.num_layers, Cl = C / size_, NHl = config_.heads / size_;
  const int Vl = config_.padded_vocab_size() / size_, v0 = rank_ * Vl;
  const size_t NC = N * C;
  auto P = [&](size_t i) { return params_.data() + tensors_[i].offset; };
  // Vocabulary-parallel lookup: rows outside this shard contribute 0, the all-reduce assembles wte[token]
  // exactly (x + 0 = x), then the replicated position embedding is added, as one wte + wpe add.
  const float* wte = P(0);
  const float* wpe = P(1);
  for (size_t n = 0; n < N; n++) {
    float* out = encoded_.data() + n * C;
    const int tok = tokens[n];
    if (tok >= v0 && tok < v0 + Vl) std::copy(wte + (size_t)(tok - v0) * C, wte + (size_t)(tok - v0 + 1) * C, out);
    else std::fill(out, out + C, 0.0f);
  }
  all_reduce(encoded_, NC);
  for (size_t n = 0; n < N; n++)
    for (int c = 0; c < C; c++) encoded_[n * C + c] += wpe[(size_t)(n % T) * C + c];

  for (int l = 0; l < L; l++) {
    const size_t b = 2 + (size_t)12 * l;  // this layer's 12 tensors
    const float* res_in = l == 0 ? encoded_.data() : res3_.data() + (l - 1) * NC;
    float* ln1 = ln1_.data() + l * NC;
    float* qkv = qkv_.data() + l * N * 3 * Cl;
    float* atty = atty_.data() + l * N * Cl;
    float* attproj = attproj_.data() + l * NC;
    float* res2 = res2_.data() + l * NC;
    float* ln2 = ln2_.data() + l * NC;
    float* fch = fch_.data() + l * N * 4 * Cl;
    float* fch_gelu = fch_gelu_.data() + l * N * 4 * Cl;
    float* fcproj = fcproj_.data() + l * NC;
    kernels::layernorm_forward(ln1, ln1_mean_.data() + l * N, ln1_rstd_.data() + l * N, res_in, P(b), P(b + 1), N, C);
    kernels::linear_forward(qkv, ln1, P(b + 2), P(b + 3), N, C, 3 * Cl, WeightLayout::IN_OUT);  // column-parallel
    kernels::attention_forward(atty, att_.data() + (size_t)l * B * NHl * T * T, qkv, B, T, Cl, NHl);
    kernels::linear_forward(attproj, atty, P(b + 4), nullptr, N, Cl, C, WeightLayout::IN_OUT);  // row-parallel
    tp_.all_reduce_sum(attproj, NC);
    const float* proj_b = P(b + 5);
    for (size_t n = 0; n < N; n++)
      for (int c = 0; c < C; c++) attproj[n * C + c] += proj_b[c];
    kernels::residual_forward(res2, res_in, attproj, NC);
    kernels::layernorm_forward(ln2, ln2_mean_.data() + l * N, ln2_rstd_.data() + l * N, res2, P(b + 6), P(b + 7), N, C);
    kernels::linear_forward(fch, ln2, P(b + 8), P(b + 9), N, C, 4 * Cl, WeightLayout::IN_OUT);
    kernels::gelu_forward(fch_gelu, fch, N * 4 * Cl);
    kernels::linear_forward(fcproj, fch_gelu, P(b + 10), nullptr, N, 4 * Cl, C, WeightLayout::IN_OUT);
    tp_.all_reduce_sum(fcproj, NC);
    const float* fcproj_b = P(b + 11);
    for (size_t n = 0; n < N; n++)
      for (int c = 0; c < C; c++) fcproj[n * C + c] += fcproj_b[c];
    kernels::residual_forward(res3_.data() + l * NC, res2, fcproj, NC);
  }
  const size_t f = tensors_.size() - 2;
  kernels::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), res3_.data() + (L - 1) * NC, P(f),
                             P(f + 1), N, C);
  // Vocabulary-parallel LM head and cross-entropy: lse = m + log Σ_ranks Σ_v exp(x − m) with m the global row max.
  kernels::linear_forward(logits_.data(), lnf_.data(), wte, nullptr, N, C, Vl, WeightLayout::OUT_IN);
  std::vector<double> maxes(N * (size_t)size_, 0.0), sums(2 * N, 0.0);
  for (size_t n = 0; n < N; n++) {
    const float* x = logits_.data() + n * Vl;
    maxes[(size_t)rank_ * N + n] = *std::max_element(x, x + Vl);
  }
  tp_.all_reduce_sum(maxes.data(), maxes.size());  // every rank's maxima (others' slots are 0 here)
  for (size_t n = 0; n < N; n++) {
    float m = -INFINITY;
    for (int q = 0; q < size_; q++) m = std::max(m, (float)maxes[(size_t)q * N + n]);
    const float* x = logits_.data() + n * Vl;
    float s = 0.0f;
    for (int v = 0; v < Vl; v++) s += std::exp(x[v] - m);
    sums[n] = s;
    maxes[n] = m;
    const int tgt = targets[n];
    if (tgt >= v0 && tgt < v0 + Vl) sums[N + n] = x[tgt - v0];
  }
  tp_.all_reduce_sum(sums.data(), sums.size());
  double total = 0.0;
  for (size_t n = 0; n < N; n++) {
    lse_[n] = (float)maxes[n] + std::log((float)sums[n]);
    total += (double)(lse_[n] - (float)sums[N + n]);
  }
  have_targets_ = true;
  return (float)(total / (double)N);
}

void TensorParallelGPT::backward() {
  if (!have_targets_) throw Error("TensorParallelGPT backward: no forward() with targets precedes it");
  have_targets_ = false;
  const int B = B_, T = T_, C = config_.hidden, L = config_.num_layers, Cl = C / size_, NHl = config_.heads / size_;
  const int Vl = config_.padded_vocab_size() / size_, v0 = rank_ * Vl;
  const size_t N = (size_t)B * T, NC = N * C;
  auto P = [&](size_t i) { return params_.data() + tensors_[i].offset; };
  auto G = [&](size_t i) { return grads_.data() + tensors_[i].offset; };
  // dlogits = (softmax − onehot)/N over this shard's columns, in place.
  const float dloss = 1.0f / (float)N;
  for (size_t n = 0; n < N; n++) {
    float* x = logits_.data() + n * Vl;
    for (int v = 0; v < Vl; v++) x[v] = dloss * std::exp(x[v] - lse_[n]);
    const int tgt = targets_[n];
    if (tgt >= v0 && tgt < v0 + Vl) x[tgt - v0] -= dloss;
  }
  std::fill(d_ln_.begin(), d_ln_.end(), 0.0f);
  kernels::linear_backward(d_ln_.data(), G(0), nullptr, logits_.data(), lnf_.data(), P(0), N, C, Vl,
                           WeightLayout::OUT_IN);
  all_reduce(d_ln_, NC);  // each shard of the vocabulary gives part of d(lnf)
  std::fill(d_res_.begin(), d_res_.end(), 0.0f);
  const size_t f = tensors_.size() - 2;
  kernels::layernorm_backward(d_res_.data(), G(f), G(f + 1), d_ln_.data(), res3_.data() + (L - 1) * NC, P(f),
                              lnf_mean_.data(), lnf_rstd_.data(), N, C);
  for (int l = L - 1; l >= 0; l--) {
    const size_t b = 2 + (size_t)12 * l;
    const float* res_in = l == 0 ? encoded_.data() : res3_.data() + (l - 1) * NC;
    // MLP: row-parallel c_proj (the replicated bias takes the whole d_res on every rank), column-parallel c_fc
    // whose input gradient is a partial sum over ranks.
    std::fill(d_fch_gelu_.begin(), d_fch_gelu_.end(), 0.0f);
    kernels::linear_backward(d_fch_gelu_.data(), G(b + 10), G(b + 11), d_res_.data(),
                             fch_gelu_.data() + l * N * 4 * Cl, P(b + 10), N, 4 * Cl, C, WeightLayout::IN_OUT);
    std::fill(d_fch_.begin(), d_fch_.end(), 0.0f);
    kernels::gelu_backward(d_fch_.data(), fch_.data() + l * N * 4 * Cl, d_fch_gelu_.data(), N * 4 * Cl);
    std::fill(d_ln_.begin(), d_ln_.end(), 0.0f);
    kernels::linear_backward(d_ln_.data(), G(b + 8), G(b + 9), d_fch_.data(), ln2_.data() + l * NC, P(b + 8), N, C,
                             4 * Cl, WeightLayout::IN_OUT);
    all_reduce(d_ln_, NC);
    kernels::layernorm_backward(d_res_.data(), G(b + 6), G(b + 7), d_ln_.data(), res2_.data() + l * NC, P(b + 6),
                                ln2_mean_.data() + l * N, ln2_rstd_.data() + l * N, N, C);
    // Attention: row-parallel c_proj, the local heads, column-parallel c_attn.
    std::fill(d_atty_.begin(), d_atty_.end(), 0.0f);
    kernels::linear_backward(d_atty_.data(), G(b + 4), G(b + 5), d_res_.data(), atty_.data() + l * N * Cl, P(b + 4),
                             N, Cl, C, WeightLayout::IN_OUT);
    std::fill(d_qkv_.begin(), d_qkv_.end(), 0.0f);
    kernels::attention_backward(d_qkv_.data(), d_atty_.data(), qkv_.data() + l * N * 3 * Cl,
                                att_.data() + (size_t)l * B * NHl * T * T, B, T, Cl, NHl);
    std::fill(d_ln_.begin(), d_ln_.end(), 0.0f);
    kernels::linear_backward(d_ln_.data(), G(b + 2), G(b + 3), d_qkv_.data(), ln1_.data() + l * NC, P(b + 2), N, C,
                             3 * Cl, WeightLayout::IN_OUT);
    all_reduce(d_ln_, NC);
    kernels::layernorm_backward(d_res_.data(), G(b), G(b + 1), d_ln_.data(), res_in, P(b), ln1_mean_.data() + l * N,
                                ln1_rstd_.data() + l * N, N, C);
  }
  // Embedding: this shard's rows of wte take their tokens' gradients; wpe (replicated) takes all.
  float* dwte = G(0);
  float* dwpe = G(1);
  for (size_t n = 0; n < N; n++) {
    const float* d = d_res_.data() + n * C;
    const int tok = tokens_[n];
    if (tok >= v0 && tok < v0 + Vl) {
      float* row = dwte + (size_t)(tok - v0) * C;
      for (int c = 0; c < C; c++) row[c] += d[c];
    }
    float* prow = dwpe + (size_t)(n % T) * C;
    for (int c = 0; c < C; c++) prow[c] += d[c];
  }
}

}  // namespace lmforge::train
