// defines: GPTConfig::validate/padded_vocab_size and the GPT class (parameter table, init, forward, backward)
#include "model/gpt.h"

#include <cmath>
#include <random>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::WeightLayout;

int GPTConfig::padded_vocab_size() const {
  const int64_t m = make_vocab_size_divisible_by;
  return (int)((vocab_size + m - 1) / m * m);
}

void GPTConfig::validate() const {
  auto fail = [](const std::string& msg) { throw Error("invalid GPT config: " + msg); };
  if (num_layers < 1) fail("num_layers must be >= 1 (got " + std::to_string(num_layers) + ")");
  if (hidden < 1) fail("hidden size must be >= 1 (got " + std::to_string(hidden) + ")");
  if (heads < 1) fail("number of attention heads must be >= 1 (got " + std::to_string(heads) + ")");
  if (hidden % heads != 0)
    fail("hidden size " + std::to_string(hidden) + " is not divisible by the number of attention heads " +
         std::to_string(heads));
  if (max_positions < 1) fail("max_positions must be >= 1 (got " + std::to_string(max_positions) + ")");
  if (seq_length < 1 || seq_length > max_positions)
    fail("seq_length " + std::to_string(seq_length) + " must be in [1, max_positions = " +
         std::to_string(max_positions) + "]");
  if (vocab_size < 1) fail("vocab_size must be >= 1 (got " + std::to_string(vocab_size) + ")");
  if (make_vocab_size_divisible_by < 1)
    fail("make_vocab_size_divisible_by must be >= 1 (got " + std::to_string(make_vocab_size_divisible_by) + ")");
  if ((int64_t)vocab_size + make_vocab_size_divisible_by > INT32_MAX) fail("vocab_size too large");
  if (!(init_std > 0.0f) || !std::isfinite(init_std))
    fail("init_std must be a positive number (got " + std::to_string(init_std) + ")");
}

GPT::GPT(const GPTConfig& config, kernels::Backend& backend) : config_(config), backend_(backend) {
  config_.validate();
  tensors_ = parameter_table(config_);
  num_params_ = tensors_.back().offset + tensors_.back().numel;
  params_ = backend_.alloc(num_params_);
  grads_ = backend_.alloc(num_params_);
  backend_.fill_zero(params_, num_params_);
  backend_.fill_zero(grads_, num_params_);
}

GPT::~GPT() {
  backend_.free(params_);
  backend_.free(grads_);
  if (acts_memory_ != nullptr) backend_.free(acts_memory_);
  if (decode_memory_ != nullptr) backend_.free(decode_memory_);
}

std::vector<ParamTensor> GPT::parameter_table(const GPTConfig& config) {
  config.validate();
  const int64_t C = config.hidden, Vp = config.padded_vocab_size();
  std::vector<ParamTensor> tensors;
  size_t total = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool decay) {
    ParamTensor t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.numel = 1;
    for (int64_t d : t.shape) t.numel *= (size_t)d;
    t.offset = total;
    t.weight_decay = decay;
    total += t.numel;
    tensors.push_back(std::move(t));
  };
  add("transformer.wte.weight", {Vp, C}, true);
  add("transformer.wpe.weight", {(int64_t)config.max_positions, C}, true);
  for (int l = 0; l < config.num_layers; l++) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, false);
    add(p + "ln_1.bias", {C}, false);
    add(p + "attn.c_attn.weight", {C, 3 * C}, true);
    add(p + "attn.c_attn.bias", {3 * C}, false);
    add(p + "attn.c_proj.weight", {C, C}, true);
    add(p + "attn.c_proj.bias", {C}, false);
    add(p + "ln_2.weight", {C}, false);
    add(p + "ln_2.bias", {C}, false);
    add(p + "mlp.c_fc.weight", {C, 4 * C}, true);
    add(p + "mlp.c_fc.bias", {4 * C}, false);
    add(p + "mlp.c_proj.weight", {4 * C, C}, true);
    add(p + "mlp.c_proj.bias", {C}, false);
  }
  add("transformer.ln_f.weight", {C}, false);
  add("transformer.ln_f.bias", {C}, false);
  return tensors;
}

const ParamTensor& GPT::tensor(std::string_view name) const {
  for (const ParamTensor& t : tensors_)
    if (t.name == name) return t;
  throw Error("GPT model has no parameter named '" + std::string(name) + "'");
}

// Tensors 2 + 12·l ... 13 + 12·l of the table belong to layer l, in the order parameter_table() adds them.
GPT::Layer GPT::layer_params(float* base, int l) const {
  const ParamTensor* t = &tensors_[2 + (size_t)12 * l];
  auto at = [&](int i) { return base + t[i].offset; };
  return Layer{at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

void GPT::init_weights(uint64_t seed) {
  // Box-Muller over mt19937_64 rather than std::normal_distribution, whose algorithm differs between standard
  // libraries: the same seed gives the same model everywhere.
  std::mt19937_64 rng(seed);
  auto uniform = [&]() { return ((rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0,1)
  std::vector<float> host;
  const double proj_std = config_.init_std / std::sqrt(2.0 * config_.num_layers);
  for (const ParamTensor& t : tensors_) {
    host.assign(t.numel, 0.0f);
    const bool is_ln = t.name.find(".ln_") != std::string::npos;
    const bool is_bias = t.name.size() >= 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
    if (is_ln && !is_bias) {
      host.assign(t.numel, 1.0f);
    } else if (!is_bias) {
      const bool is_proj = t.name.find("c_proj.weight") != std::string::npos;
      const double std_dev = is_proj ? proj_std : config_.init_std;
      for (size_t i = 0; i < t.numel; i += 2) {
        const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * M_PI * uniform();
        host[i] = (float)(std_dev * r * std::cos(a));
        if (i + 1 < t.numel) host[i + 1] = (float)(std_dev * r * std::sin(a));
      }
    }
    backend_.copy_to_device(params_ + t.offset, host.data(), t.numel);
  }
  zero_grad();
}

void GPT::zero_grad() { backend_.fill_zero(grads_, num_params_); }

void GPT::ensure_activations(int B, int T) {
  const size_t L = config_.num_layers, C = config_.hidden, NH = config_.heads, Vp = config_.padded_vocab_size();
  const size_t N = (size_t)B * T;
  const size_t per_layer = N * (C * 7 + 3 * C + 4 * C * 2 + 4) + (size_t)B * NH * T * T;
  const size_t total = N * C + L * per_layer + N * (C + 2) + N * Vp + 2 * N + (size_t)B * C + (size_t)B * Vp +
                       N * (3 * C + 3 * C + 8 * C);
  if (acts_memory_ == nullptr || total > acts_capacity_) {
    if (acts_memory_ != nullptr) backend_.free(acts_memory_);
    acts_memory_ = backend_.alloc(total);
    acts_capacity_ = total;
  }
  float* p = acts_memory_;
  auto take = [&](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  Acts& a = acts_;
  a.encoded = take(N * C);
  a.ln1 = take(L * N * C);
  a.ln1_mean = take(L * N);
  a.ln1_rstd = take(L * N);
  a.qkv = take(L * N * 3 * C);
  a.att = take(L * B * NH * T * T);
  a.atty = take(L * N * C);
  a.attproj = take(L * N * C);
  a.res2 = take(L * N * C);
  a.ln2 = take(L * N * C);
  a.ln2_mean = take(L * N);
  a.ln2_rstd = take(L * N);
  a.fch = take(L * N * 4 * C);
  a.fch_gelu = take(L * N * 4 * C);
  a.fcproj = take(L * N * C);
  a.res3 = take(L * N * C);
  a.lnf = take(N * C);
  a.lnf_mean = take(N);
  a.lnf_rstd = take(N);
  a.logits = take(N * Vp);
  a.losses = take(N);
  a.lse = take(N);
  a.last = take((size_t)B * C);
  a.last_logits = take((size_t)B * Vp);
  a.d_res = take(N * C);
  a.d_ln = take(N * C);
  a.d_atty = take(N * C);
  a.d_qkv = take(N * 3 * C);
  a.d_fch_gelu = take(N * 4 * C);
  a.d_fch = take(N * 4 * C);
  if ((size_t)(p - acts_memory_) > acts_capacity_) throw std::logic_error("GPT activation layout overflow");
  B_ = B;
  T_ = T;
}

void GPT::check_ids(const int32_t* ids, size_t n, const char* what) const {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      throw Error(std::string("GPT forward: ") + what + " id " + std::to_string(ids[i]) + " at position " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
}

void GPT::forward_body(const int32_t* tokens, int B, int T) {
  if (B < 1 || T < 1) throw Error("GPT forward: batch and sequence sizes must be >= 1");
  if (T > config_.max_positions)
    throw Error("GPT forward: sequence length " + std::to_string(T) + " exceeds max_positions " +
                std::to_string(config_.max_positions));
  const size_t N = (size_t)B * T;
  check_ids(tokens, N, "token");
  ensure_activations(B, T);
  tokens_.assign(tokens, tokens + N);
  const int C = config_.hidden, NH = config_.heads, L = config_.num_layers;
  const size_t NC = N * C;
  Acts& a = acts_;
  kernels::embedding_forward(a.encoded, tokens, param("transformer.wte.weight"), param("transformer.wpe.weight"),
                             B, T, C);
  for (int l = 0; l < L; l++) {
    const Layer w = layer_params(params_, l);
    const float* res_in = l == 0 ? a.encoded : a.res3 + (l - 1) * NC;
    float* ln1 = a.ln1 + l * NC;
    float* qkv = a.qkv + l * NC * 3;
    float* atty = a.atty + l * NC;
    float* attproj = a.attproj + l * NC;
    float* res2 = a.res2 + l * NC;
    float* ln2 = a.ln2 + l * NC;
    float* fch = a.fch + l * NC * 4;
    float* fch_gelu = a.fch_gelu + l * NC * 4;
    float* fcproj = a.fcproj + l * NC;
    kernels::layernorm_forward(ln1, a.ln1_mean + l * N, a.ln1_rstd + l * N, res_in, w.ln1_w, w.ln1_b, N, C);
    kernels::linear_forward(qkv, ln1, w.attn_w, w.attn_b, N, C, 3 * C, WeightLayout::IN_OUT);
    kernels::attention_forward(atty, a.att + (size_t)l * B * NH * T * T, qkv, B, T, C, NH);
    kernels::linear_forward(attproj, atty, w.proj_w, w.proj_b, N, C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(res2, res_in, attproj, NC);
    kernels::layernorm_forward(ln2, a.ln2_mean + l * N, a.ln2_rstd + l * N, res2, w.ln2_w, w.ln2_b, N, C);
    kernels::linear_forward(fch, ln2, w.fc_w, w.fc_b, N, C, 4 * C, WeightLayout::IN_OUT);
    kernels::gelu_forward(fch_gelu, fch, NC * 4);
    kernels::linear_forward(fcproj, fch_gelu, w.fcproj_w, w.fcproj_b, N, 4 * C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(a.res3 + l * NC, res2, fcproj, NC);
  }
  kernels::layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.res3 + (L - 1) * NC,
                             param("transformer.ln_f.weight"), param("transformer.ln_f.bias"), N, C);
}

float GPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T) {
  have_targets_ = false;
  const size_t N = (size_t)B * T;
  if (B >= 1 && T >= 1) check_ids(targets, N, "target");
  forward_body(tokens, B, T);
  targets_.assign(targets, targets + N);
  const int C = config_.hidden, Vp = config_.padded_vocab_size();
  // The LM head is tied to wte [Vp,C], i.e. an OUT_IN weight without bias.
  kernels::linear_forward(acts_.logits, acts_.lnf, param("transformer.wte.weight"), nullptr, N, C, Vp,
                          WeightLayout::OUT_IN);
  kernels::crossentropy_forward(acts_.losses, acts_.lse, acts_.logits, targets, N, Vp);
  std::vector<float> losses(N);
  backend_.copy_to_host(losses.data(), acts_.losses, N);
  double sum = 0.0;
  for (float x : losses) sum += x;
  have_targets_ = true;
  return (float)(sum / N);
}

const float* GPT::forward_logits(const int32_t* tokens, int B, int T) {
  have_targets_ = false;
  forward_body(tokens, B, T);
  const int C = config_.hidden, Vp = config_.padded_vocab_size();
  for (int b = 0; b < B; b++)
    backend_.copy_on_device(acts_.last + (size_t)b * C, acts_.lnf + ((size_t)b * T + T - 1) * C, C);
  kernels::linear_forward(acts_.last_logits, acts_.last, param("transformer.wte.weight"), nullptr, B, C, Vp,
                          WeightLayout::OUT_IN);
  return acts_.last_logits;
}

void GPT::decode_begin(int B) {
  if (B < 1) throw Error("GPT decode: batch size must be >= 1");
  const size_t L = config_.num_layers, C = config_.hidden, P = config_.max_positions, NH = config_.heads;
  const size_t Vp = config_.padded_vocab_size();
  const size_t total = 2 * L * B * P * C + (size_t)B * (C * 4 + 3 * C + 4 * C + 2) + (size_t)B * NH * P + B * Vp;
  if (decode_memory_ == nullptr || total > decode_capacity_) {
    if (decode_memory_ != nullptr) backend_.free(decode_memory_);
    decode_memory_ = backend_.alloc(total);
    decode_capacity_ = total;
  }
  float* p = decode_memory_;
  auto take = [&](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  kcache_ = take(L * B * P * C);
  vcache_ = take(L * B * P * C);
  dec_x_ = take(B * C);
  dec_ln_ = take(B * C);
  dec_atty_ = take(B * C);
  dec_tmp_ = take(B * C);
  dec_qkv_ = take(B * 3 * C);
  dec_fch_ = take(B * 4 * C);
  dec_mean_ = take(B);
  dec_rstd_ = take(B);
  dec_scores_ = take(B * NH * P);
  dec_logits_ = take(B * Vp);
  decode_B_ = B;
  decode_pos_ = 0;
}

const float* GPT::decode_step(const int32_t* tokens) {
  if (decode_B_ == 0) throw Error("GPT decode: decode_begin() must come first");
  if (decode_pos_ >= config_.max_positions)
    throw Error("GPT decode: the sequence is already max_positions = " + std::to_string(config_.max_positions) +
                " long");
  const int B = decode_B_, C = config_.hidden, NH = config_.heads, L = config_.num_layers;
  const int P = config_.max_positions, Vp = config_.padded_vocab_size(), pos = decode_pos_;
  check_ids(tokens, B, "token");
  have_targets_ = false;
  // Position pos of every row: the embedding with wpe shifted to row pos, then each block on B rows.
  kernels::embedding_forward(dec_x_, tokens, param("transformer.wte.weight"),
                             param("transformer.wpe.weight") + (size_t)pos * C, B, 1, C);
  for (int l = 0; l < L; l++) {
    const Layer w = layer_params(params_, l);
    float* kc = kcache_ + (size_t)l * B * P * C;
    float* vc = vcache_ + (size_t)l * B * P * C;
    kernels::layernorm_forward(dec_ln_, dec_mean_, dec_rstd_, dec_x_, w.ln1_w, w.ln1_b, B, C);
    kernels::linear_forward(dec_qkv_, dec_ln_, w.attn_w, w.attn_b, B, C, 3 * C, WeightLayout::IN_OUT);
    for (int b = 0; b < B; b++) {
      backend_.copy_on_device(kc + ((size_t)b * P + pos) * C, dec_qkv_ + (size_t)b * 3 * C + C, C);
      backend_.copy_on_device(vc + ((size_t)b * P + pos) * C, dec_qkv_ + (size_t)b * 3 * C + 2 * C, C);
    }
    kernels::attention_decode_forward(dec_atty_, dec_scores_, dec_qkv_, kc, vc, B, pos + 1, P, C, NH);
    kernels::linear_forward(dec_tmp_, dec_atty_, w.proj_w, w.proj_b, B, C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(dec_x_, dec_x_, dec_tmp_, (size_t)B * C);
    kernels::layernorm_forward(dec_ln_, dec_mean_, dec_rstd_, dec_x_, w.ln2_w, w.ln2_b, B, C);
    kernels::linear_forward(dec_fch_, dec_ln_, w.fc_w, w.fc_b, B, C, 4 * C, WeightLayout::IN_OUT);
    kernels::gelu_forward(dec_fch_, dec_fch_, (size_t)B * 4 * C);
    kernels::linear_forward(dec_tmp_, dec_fch_, w.fcproj_w, w.fcproj_b, B, 4 * C, C, WeightLayout::IN_OUT);
    kernels::residual_forward(dec_x_, dec_x_, dec_tmp_, (size_t)B * C);
  }
  kernels::layernorm_forward(dec_ln_, dec_mean_, dec_rstd_, dec_x_, param("transformer.ln_f.weight"),
                             param("transformer.ln_f.bias"), B, C);
  kernels::linear_forward(dec_logits_, dec_ln_, param("transformer.wte.weight"), nullptr, B, C, Vp,
                          WeightLayout::OUT_IN);
  decode_pos_++;
  return dec_logits_;
}

void GPT::backward(float loss_scale) {
  if (!have_targets_) throw Error("GPT backward: no forward() with targets precedes it (or backward already ran)");
  have_targets_ = false;
  const int B = B_, T = T_, C = config_.hidden, NH = config_.heads, L = config_.num_layers;
  const int Vp = config_.padded_vocab_size();
  const size_t N = (size_t)B * T, NC = N * C;
  Acts& a = acts_;
  kernels::Backend& be = backend_;
  float* wte = param("transformer.wte.weight");
  float* dwte = grad("transformer.wte.weight");

  // Mean over N positions: each row's loss has weight loss_scale/N. dlogits overwrite the logits in place.
  kernels::crossentropy_backward(a.logits, a.logits, a.lse, targets_.data(), loss_scale / N, N, Vp);
  be.fill_zero(a.d_ln, NC);
  kernels::linear_backward(a.d_ln, dwte, nullptr, a.logits, a.lnf, wte, N, C, Vp, WeightLayout::OUT_IN);
  // d_res carries the gradient of the residual stream down through the blocks; each block's two layernorm
  // backwards add their branch's contribution to it, the skip connection passing it through unchanged.
  be.fill_zero(a.d_res, NC);
  kernels::layernorm_backward(a.d_res, grad("transformer.ln_f.weight"), grad("transformer.ln_f.bias"), a.d_ln,
                              a.res3 + (L - 1) * NC, param("transformer.ln_f.weight"), a.lnf_mean, a.lnf_rstd, N, C);
  if (ready_hook_) ready_hook_(tensors_[2 + (size_t)12 * L].offset);  // ln_f, the last tensors of the table
  for (int l = L - 1; l >= 0; l--) {
    const Layer w = layer_params(params_, l);
    const Layer g = layer_params(grads_, l);
    const float* res_in = l == 0 ? a.encoded : a.res3 + (l - 1) * NC;
    // MLP branch: res3 = res2 + c_proj(gelu(c_fc(ln_2(res2))))
    be.fill_zero(a.d_fch_gelu, NC * 4);
    kernels::linear_backward(a.d_fch_gelu, g.fcproj_w, g.fcproj_b, a.d_res, a.fch_gelu + l * NC * 4, w.fcproj_w, N,
                             4 * C, C, WeightLayout::IN_OUT);
    be.fill_zero(a.d_fch, NC * 4);
    kernels::gelu_backward(a.d_fch, a.fch + l * NC * 4, a.d_fch_gelu, NC * 4);
    be.fill_zero(a.d_ln, NC);
    kernels::linear_backward(a.d_ln, g.fc_w, g.fc_b, a.d_fch, a.ln2 + l * NC, w.fc_w, N, C, 4 * C,
                             WeightLayout::IN_OUT);
    kernels::layernorm_backward(a.d_res, g.ln2_w, g.ln2_b, a.d_ln, a.res2 + l * NC, w.ln2_w, a.ln2_mean + l * N,
                                a.ln2_rstd + l * N, N, C);
    // Attention branch: res2 = res_in + c_proj(attention(c_attn(ln_1(res_in))))
    be.fill_zero(a.d_atty, NC);
    kernels::linear_backward(a.d_atty, g.proj_w, g.proj_b, a.d_res, a.atty + l * NC, w.proj_w, N, C, C,
                             WeightLayout::IN_OUT);
    be.fill_zero(a.d_qkv, NC * 3);
    kernels::attention_backward(a.d_qkv, a.d_atty, a.qkv + l * NC * 3, a.att + (size_t)l * B * NH * T * T, B, T, C,
                                NH);
    be.fill_zero(a.d_ln, NC);
    kernels::linear_backward(a.d_ln, g.attn_w, g.attn_b, a.d_qkv, a.ln1 + l * NC, w.attn_w, N, C, 3 * C,
                             WeightLayout::IN_OUT);
    kernels::layernorm_backward(a.d_res, g.ln1_w, g.ln1_b, a.d_ln, res_in, w.ln1_w, a.ln1_mean + l * N,
                                a.ln1_rstd + l * N, N, C);
    if (ready_hook_) ready_hook_(tensors_[2 + (size_t)12 * l].offset);  // block l and everything after it
  }
  kernels::embedding_backward(dwte, grad("transformer.wpe.weight"), a.d_res, tokens_.data(), B, T, C);
  if (ready_hook_) ready_hook_(0);
}

double GPT::training_flops(int B, int T) const {
  const double C = config_.hidden, L = config_.num_layers, Vp = config_.padded_vocab_size();
  const double matrix_params = L * 12.0 * C * C + Vp * C;
  return (double)B * T * (6.0 * matrix_params + 12.0 * L * C * T);
}

}  // namespace lmforge::model
