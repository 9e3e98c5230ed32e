// defines: GPT model unit tests — config validation, the parameter table (HF names/layouts, GPT-2 124M count),
// Megatron init statistics and determinism, gradient accumulation, buffer reuse across shapes, input errors
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "util/error.h"

namespace lmforge::model {
namespace {

GPTConfig small_config() {
  GPTConfig c;
  c.num_layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.seq_length = 16;
  c.max_positions = 24;
  c.vocab_size = 100;
  c.make_vocab_size_divisible_by = 64;
  return c;
}

std::string error_of(const GPTConfig& c) {
  try {
    c.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GptDatasetConfig, ValidationNamesTheProblem) {
  EXPECT_EQ(error_of(small_config()), "");
  GPTConfig c = small_config();
  c.heads = 5;
  EXPECT_NE(error_of(c).find("not divisible by the number of attention heads 5"), std::string::npos) << error_of(c);
  c = small_config();
  c.seq_length = 25;
  EXPECT_NE(error_of(c).find("seq_length 25"), std::string::npos);
  c = small_config();
  c.num_layers = 0;
  EXPECT_NE(error_of(c).find("num_layers"), std::string::npos);
  c = small_config();
  c.vocab_size = 0;
  EXPECT_NE(error_of(c).find("vocab_size"), std::string::npos);
  c = small_config();
  c.make_vocab_size_divisible_by = 0;
  EXPECT_NE(error_of(c).find("make_vocab_size_divisible_by"), std::string::npos);
  c = small_config();
  c.heads = 3;
  EXPECT_THROW(GPT model(c, lmforge::kernels::cpu_backend()), Error);
}

TEST(GptDatasetConfig, PaddedVocabulary) {
  GPTConfig c;
  EXPECT_EQ(c.padded_vocab_size(), 50304);  // Megatron's 50257 -> 50304
  c.vocab_size = 500;
  EXPECT_EQ(c.padded_vocab_size(), 512);
  c.vocab_size = 512;
  EXPECT_EQ(c.padded_vocab_size(), 512);
  c.make_vocab_size_divisible_by = 1;
  c.vocab_size = 50257;
  EXPECT_EQ(c.padded_vocab_size(), 50257);
}

TEST(GptModel, ParameterTableIsHuggingFaceGpt2) {
  GPTConfig c;  // GPT-2 124M
  const std::vector<lmforge::param::Parameter> t = GPT::parameter_table(c).all();
  ASSERT_EQ(t.size(), 2u + 12u * 12u + 2u);
  // HF GPT-2 small has 124,439,808 parameters with 50257 rows; the padded 50304-row table adds 47·768.
  EXPECT_EQ(t.back().offset + t.back().numel, 124439808u + 47u * 768u);
  auto tensor = [&](const std::string& name) {
    for (const lmforge::param::Parameter& p : t)
      if (p.name == name) return p;
    ADD_FAILURE() << "no tensor " << name;
    return lmforge::param::Parameter{};
  };
  EXPECT_EQ(t[0].name, "transformer.wte.weight");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{50304, 768}));
  EXPECT_EQ(t[1].name, "transformer.wpe.weight");
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{1024, 768}));
  EXPECT_EQ(tensor("transformer.h.11.attn.c_attn.weight").shape, (std::vector<int64_t>{768, 2304}));  // [in,out]
  EXPECT_EQ(tensor("transformer.h.3.mlp.c_proj.weight").shape, (std::vector<int64_t>{3072, 768}));
  EXPECT_EQ(tensor("transformer.h.0.mlp.c_fc.bias").shape, (std::vector<int64_t>{3072}));
  EXPECT_EQ(tensor("transformer.h.7.ln_2.weight").shape, (std::vector<int64_t>{768}));
  EXPECT_EQ(t.back().name, "transformer.ln_f.bias");
  size_t offset = 0;
  for (const lmforge::param::Parameter& p : t) {
    EXPECT_EQ(p.offset, offset) << p.name;
    offset += p.numel;
    const bool matrix = p.shape.size() == 2;
    EXPECT_EQ(p.weight_decay, matrix) << p.name;
  }
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  EXPECT_EQ(model.tensors().size(), 2u + 12u * 2u + 2u);
  EXPECT_THROW(model.tensor("lm_head.weight"), Error);
}

TEST(GptModel, MegatronInitialisation) {
  GPTConfig c = small_config();
  c.hidden = 64;
  c.num_layers = 8;
  c.vocab_size = 4000;
  GPT model(c, lmforge::kernels::cpu_backend());
  model.init_weights(7);
  auto stats = [&](const std::string& name) {
    const lmforge::param::Parameter& t = model.tensor(name);
    const float* p = model.params() + t.offset;
    double s = 0, s2 = 0;
    for (size_t i = 0; i < t.numel; i++) s += p[i], s2 += (double)p[i] * p[i];
    const double mean = s / t.numel;
    return std::pair<double, double>(mean, std::sqrt(s2 / t.numel - mean * mean));
  };
  auto [wte_mean, wte_std] = stats("transformer.wte.weight");
  EXPECT_NEAR(wte_mean, 0.0, 1e-3);
  EXPECT_NEAR(wte_std, 0.02, 0.02 * 0.02);
  EXPECT_NEAR(stats("transformer.h.1.mlp.c_fc.weight").second, 0.02, 0.02 * 0.03);
  const double proj = 0.02 / std::sqrt(2.0 * 8);
  EXPECT_NEAR(stats("transformer.h.5.mlp.c_proj.weight").second, proj, proj * 0.03);
  EXPECT_NEAR(stats("transformer.h.5.attn.c_proj.weight").second, proj, proj * 0.05);
  EXPECT_EQ(stats("transformer.h.2.ln_1.weight"), (std::pair<double, double>(1.0, 0.0)));
  EXPECT_EQ(stats("transformer.h.2.attn.c_attn.bias"), (std::pair<double, double>(0.0, 0.0)));
  EXPECT_EQ(stats("transformer.ln_f.bias"), (std::pair<double, double>(0.0, 0.0)));
  // Same seed, same weights; another seed, other weights.
  GPT again(c, lmforge::kernels::cpu_backend()), other(c, lmforge::kernels::cpu_backend());
  again.init_weights(7);
  other.init_weights(8);
  EXPECT_EQ(std::vector<float>(model.params(), model.params() + model.num_parameters()),
            std::vector<float>(again.params(), again.params() + again.num_parameters()));
  EXPECT_NE(model.params()[100], other.params()[100]);
}

std::vector<int32_t> random_ids(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = (int32_t)(rng() % vocab);
  return v;
}

TEST(GptModel, BackwardAccumulatesAndBuffersAreReusedAcrossShapes) {
  GPTConfig c = small_config();
  GPT model(c, lmforge::kernels::cpu_backend());
  model.init_weights(3);
  const int B = 2, T = 16;
  auto tok = random_ids(B * T, c.vocab_size, 1), tgt = random_ids(B * T, c.vocab_size, 2);
  model.zero_grad();
  const float loss = model.forward(tok.data(), tgt.data(), B, T);
  EXPECT_NEAR(loss, std::log((double)c.padded_vocab_size()), 0.1);  // near-uniform at init
  model.backward();
  std::vector<float> once(model.grads(), model.grads() + model.num_parameters());
  // A smaller shape in between must not disturb the next full-size step.
  auto tok2 = random_ids(5, c.vocab_size, 3);
  model.forward(tok2.data(), tok2.data(), 1, 5);
  model.forward_logits(tok2.data(), 1, 5);
  EXPECT_EQ(model.forward(tok.data(), tgt.data(), B, T), loss);
  model.backward();
  double max_err = 0, max_g = 0;
  for (size_t i = 0; i < once.size(); i++) {
    max_err = std::max(max_err, (double)std::fabs(model.grads()[i] - 2.0f * once[i]));
    max_g = std::max(max_g, (double)std::fabs(once[i]));
  }
  EXPECT_GT(max_g, 0.0);
  EXPECT_LE(max_err, 1e-6 * max_g);
  // backward(s) adds s times the gradient: two half-weighted micro-batches average to one full one.
  model.zero_grad();
  for (int k = 0; k < 2; k++) {
    model.forward(tok.data(), tgt.data(), B, T);
    model.backward(0.5f);
  }
  max_err = 0;
  for (size_t i = 0; i < once.size(); i++) max_err = std::max(max_err, (double)std::fabs(model.grads()[i] - once[i]));
  EXPECT_LE(max_err, 1e-6 * max_g);
  model.zero_grad();
  for (size_t i = 0; i < model.num_parameters(); i++) ASSERT_EQ(model.grads()[i], 0.0f);
}

// The LM head and cross-entropy over chunks of rows (the whole logits never held; each chunk's logits made again in
// the backward) give the one-chunk losses and gradients up to the order of the head's weight-gradient sums.
TEST(GptModel, ChunkedHeadAndLossMatchOneChunk) {
  GPTConfig c = small_config();
  c.hidden_dropout = c.attention_dropout = 0.0f;
  GPT whole(c, lmforge::kernels::cpu_backend());
  c.loss_chunk_rows = 7;  // 2·16 = 32 rows: four chunks of 7 and one of 4
  GPT chunked(c, lmforge::kernels::cpu_backend());
  whole.init_weights(7), chunked.init_weights(7);
  const int B = 2, T = 16;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (auto& t : tokens) t = (int32_t)(rng() % (uint32_t)c.vocab_size);
  for (auto& t : targets) t = (int32_t)(rng() % (uint32_t)c.vocab_size);
  const float a = whole.forward(tokens.data(), targets.data(), B, T);
  const float b = chunked.forward(tokens.data(), targets.data(), B, T);
  EXPECT_NE(whole.logits(), nullptr);
  EXPECT_EQ(chunked.logits(), nullptr) << "a chunked forward holds no whole logits";
  EXPECT_NEAR(a, b, 1e-6f * std::fabs(a));
  whole.backward(0.5f), chunked.backward(0.5f);
  double worst = 0, scale = 0;
  for (size_t i = 0; i < whole.num_parameters(); i++) {
    worst = std::max(worst, (double)std::fabs(whole.grads()[i] - chunked.grads()[i]));
    scale = std::max(scale, (double)std::fabs(whole.grads()[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst, 1e-5 * scale);
}

TEST(GptModel, InputErrors) {
  GPTConfig c = small_config();
  GPT model(c, lmforge::kernels::cpu_backend());
  model.init_weights(3);
  auto tok = random_ids(32, c.vocab_size, 1);
  EXPECT_THROW(model.backward(), Error);  // no forward yet
  std::vector<int32_t> bad = tok;
  bad[7] = c.vocab_size;  // a padding row is not a token
  try {
    model.forward(bad.data(), tok.data(), 2, 16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 100 at position 7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model.forward(tok.data(), bad.data(), 2, 16), Error);
  std::vector<int32_t> longer(25, 1);
  EXPECT_THROW(model.forward(longer.data(), longer.data(), 1, 25), Error);  // > max_positions
  model.forward_logits(tok.data(), 2, 16);
  EXPECT_THROW(model.backward(), Error);  // inference forward has no loss to differentiate
}

}  // namespace
}  // namespace lmforge::model
