// defines: tests of inference: generation over the model's key/value cache gives the tokens of the full forward
// (greedy and sampled), sampling rules (greedy, top-k, top-p, temperature, seeds), length errors, load_model();
// T5 span filling: cached and uncached decoding give the same tokens, [EOS] stops, prompts with sentinels,
// load_t5_model() and checkpoint_model_type()
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "checkpoint/checkpoint.h"
#include "datasets/masked_lm.h"
#include "test_util.h"
#include "text/bert_wordpiece.h"
#include "train/generate.h"
#include "families/gpt/gpt_hf_config.h"
#include "families/t5/t5_model.h"
#include "util/error.h"

namespace {

using lmforge::model::GPT;
using lmforge::model::GPTConfig;
using namespace lmforge::train;

GPTConfig small_config() {
  GPTConfig c;
  c.num_layers = 2;
  c.hidden = 48;
  c.heads = 3;
  c.seq_length = 64;
  c.max_positions = 64;
  c.vocab_size = 300;
  c.make_vocab_size_divisible_by = 128;
  // Larger weights than the default 0.02 make the logits far from uniform, so the greedy path is well defined.
  c.init_std = 0.3f;
  return c;
}

TEST(KVCache, CachedAndUncachedGenerationGiveIdenticalTokens) {
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  model.init_weights(11);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
  for (int mode = 0; mode < 2; mode++) {
    GenerateOptions o;
    o.max_new_tokens = 50;
    if (mode == 0) o.sampling.greedy = true;
    else o.sampling.temperature = 0.9, o.sampling.top_k = 50, o.sampling.top_p = 0.95, o.seed = 3;
    o.use_kv_cache = true;
    std::vector<int32_t> streamed;
    const auto cached = generate(model, prompt, o, [&](int32_t id) { streamed.push_back(id); });
    o.use_kv_cache = false;
    const auto uncached = generate(model, prompt, o);
    ASSERT_EQ(cached.size(), 50u);
    EXPECT_EQ(cached, uncached) << "mode " << mode;
    EXPECT_EQ(streamed, cached);
    std::map<int32_t, int> distinct;
    for (int32_t id : cached) distinct[id]++;
    EXPECT_GT(distinct.size(), 1u);  // not a degenerate constant stream
  }
  // Stopping at an id: the stop token is the last one reported.
  GenerateOptions o;
  o.sampling.greedy = true;
  o.max_new_tokens = 50;
  const auto all = generate(model, prompt, o);
  o.stop_id = all[3];
  const auto stopped = generate(model, prompt, o);
  ASSERT_LE(stopped.size(), 4u);
  EXPECT_EQ(stopped.back(), all[3]);
}

// The greedy token is the argmax over the WHOLE vocabulary (a regression: the logits were copied to the host as
// a quarter of their bytes, so only the first quarter of the ids were candidates; with that copy this test fails:
// greedy 15 where the argmax is 278).
TEST(KVCache, GreedyTokenIsTheArgmaxOverTheWholeVocabulary) {
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  model.init_weights(11);
  std::vector<int32_t> seq = {1, 2, 3};
  GenerateOptions o;
  o.sampling.greedy = true;
  o.max_new_tokens = 12;
  const auto produced = generate(model, seq, o);
  int beyond_quarter = 0;
  for (const int32_t id : produced) {
    const float* row = model.forward_logits(seq.data(), 1, (int)seq.size());
    EXPECT_EQ(id, std::max_element(row, row + 300) - row);
    beyond_quarter += id >= 96;
    seq.push_back(id);
  }
  EXPECT_GT(beyond_quarter, 0);  // the case the regression missed is exercised
}

TEST(Sampling, RulesAndDeterminism) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  std::mt19937_64 rng(1);
  SamplingOptions greedy;
  greedy.greedy = true;
  EXPECT_EQ(sample_token(logits.data(), 5, greedy, rng), 1);  // lowest id among the tied maxima
  SamplingOptions t0;
  t0.temperature = 0.0;
  EXPECT_EQ(sample_token(logits.data(), 5, t0, rng), 1);
  // Only the first vocab_size entries are candidates (padded columns never are).
  EXPECT_EQ(sample_token(logits.data(), 1, greedy, rng), 0);
  SamplingOptions k2;
  k2.top_k = 2;
  SamplingOptions p_small;
  p_small.top_p = 0.3;  // the top token alone (p ≈ 0.39 > 0.3)
  std::map<int32_t, int> counts_k2, counts_all;
  SamplingOptions all;
  for (int i = 0; i < 20000; i++) {
    const int32_t a = sample_token(logits.data(), 5, k2, rng);
    EXPECT_TRUE(a == 1 || a == 3);
    counts_k2[a]++;
    EXPECT_EQ(sample_token(logits.data(), 5, p_small, rng), 1);
    counts_all[sample_token(logits.data(), 5, all, rng)]++;
  }
  EXPECT_NEAR(counts_k2[1] / 20000.0, 0.5, 0.02);
  // Temperature 1: frequencies follow softmax(logits).
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (int v = 0; v < 5; v++) EXPECT_NEAR(counts_all[v] / 20000.0, std::exp(logits[v]) / z, 0.015) << v;
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 100; i++)
    EXPECT_EQ(sample_token(logits.data(), 5, all, a), sample_token(logits.data(), 5, all, b));
}

TEST(Generate, TooLongOrEmptyPromptIsAnErrorBeforeWork) {
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  GenerateOptions o;
  o.max_new_tokens = 60;
  std::vector<int32_t> prompt(5, 1);
  EXPECT_THROW(generate(model, prompt, o), lmforge::Error);  // 5 + 60 > 64
  EXPECT_THROW(generate(model, std::vector<int32_t>{}, o), lmforge::Error);
}

// Every sampling flag is validated, used or not: NaN or negative temperature, negative top-k, top-p outside (0, 1].
TEST(Generate, InvalidSamplingFlagsAreErrors) {
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  model.init_weights(3);
  const std::vector<int32_t> prompt = {1, 2};
  for (double t : {std::nan(""), -0.5, (double)INFINITY}) {
    GenerateOptions o;
    o.max_new_tokens = 2;
    o.sampling.temperature = t;
    try {
      generate(model, prompt, o);
      ADD_FAILURE() << "temperature " << t << " was accepted";
    } catch (const lmforge::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--temperature"), std::string::npos) << e.what();
    }
  }
  GenerateOptions greedy_bad_p;
  greedy_bad_p.sampling.greedy = true;
  greedy_bad_p.sampling.top_p = 1.5;
  EXPECT_THROW(generate(model, prompt, greedy_bad_p), lmforge::Error);
}

// A checkpoint with a NaN weight is refused at load, naming the tensor (it would generate "!!!!" otherwise).
TEST(Generate, NonFiniteWeightsAreRefusedAtLoad) {
  lmforge::testing::TempDir tmp;
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  model.init_weights(21);
  model.param("transformer.h.1.mlp.c_fc.weight")[5] = std::nanf("");
  std::vector<lmforge::checkpoint::NamedTensor> tensors;
  for (const auto& t : model.tensors()) tensors.push_back({t.name, t.shape, model.params() + t.offset});
  lmforge::checkpoint::SaveRequest req;
  req.model = tensors;
  req.config_json = gpt_config_json(model.config());
  req.state.iteration = 1;
  lmforge::checkpoint::save_checkpoint(tmp.file("ckpt"), req);
  try {
    load_model(tmp.file("ckpt"), lmforge::kernels::cpu_backend());
    ADD_FAILURE() << "NaN weights were loaded";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.h.1.mlp.c_fc.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
  }
}

TEST(Generate, LoadModelFromCheckpointDirectoryAndFile) {
  lmforge::testing::TempDir tmp;
  GPT model(small_config(), lmforge::kernels::cpu_backend());
  model.init_weights(21);
  std::vector<lmforge::checkpoint::NamedTensor> tensors;
  for (const auto& t : model.tensors()) tensors.push_back({t.name, t.shape, model.params() + t.offset});
  lmforge::checkpoint::SaveRequest req;
  req.model = tensors;
  req.config_json = gpt_config_json(model.config());
  req.state.iteration = 7;
  lmforge::checkpoint::save_checkpoint(tmp.file("ckpt"), req);
  for (const std::string& path : {tmp.file("ckpt"), tmp.file("ckpt/iter_0000007"),
                                  tmp.file("ckpt/iter_0000007/model.safetensors")}) {
    const auto loaded = load_model(path, lmforge::kernels::cpu_backend());
    EXPECT_EQ(loaded->config().vocab_size, 300) << path;
    EXPECT_EQ(loaded->config().padded_vocab_size(), 384) << path;
    EXPECT_EQ(loaded->config().init_std, model.config().init_std);
    ASSERT_EQ(loaded->num_parameters(), model.num_parameters());
    EXPECT_EQ(std::memcmp(loaded->params(), model.params(), model.num_parameters() * 4), 0) << path;
  }
  EXPECT_THROW(load_model(tmp.file("nothing"), lmforge::kernels::cpu_backend()), lmforge::Error);
  // A plain Hugging Face config.json: vocab_size is the real vocabulary, no padding.
  const auto hf = gpt_config_from_json(
      R"({"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024, "vocab_size": 50257,
          "activation_function": "gelu_new", "n_inner": null})",
      "config.json");
  EXPECT_EQ(hf.vocab_size, 50257);
  EXPECT_EQ(hf.padded_vocab_size(), 50257);
  EXPECT_THROW(gpt_config_from_json(R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "n_positions": 8,
                                        "vocab_size": 10, "activation_function": "relu"})", "c.json"),
               lmforge::Error);
  // Integers beyond the int fields are errors naming the field, not truncated (2^32 + 2 layers is not 2 layers).
  try {
    gpt_config_from_json(R"({"n_layer": 4294967298, "n_head": 2, "n_embd": 8, "n_positions": 8, "vocab_size": 10})",
                         "big.json");
    ADD_FAILURE() << "n_layer 2^32 + 2 was accepted";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"n_layer\" is 4294967298"), std::string::npos) << e.what();
  }
}

// ---- T5 ----

lmforge::model::T5Config small_t5() {
  lmforge::model::T5Config c;
  c.encoder_num_layers = 2;
  c.decoder_num_layers = 2;
  c.hidden = 48;
  c.heads = 3;
  c.ffn_hidden = 96;
  c.encoder_seq_length = 32;
  c.decoder_seq_length = 32;
  c.max_positions = 40;
  c.vocab_size = 300;
  c.make_vocab_size_divisible_by = 128;
  c.init_std = 0.3f;
  return c;
}

TEST(T5Generate, CachedAndUncachedSpanFillingGiveIdenticalTokens) {
  lmforge::model::T5 t5(small_t5(), lmforge::kernels::cpu_backend());
  t5.init_weights(13);
  const std::vector<int32_t> prompt = {5, 6, 290, 7, 8, 9, 291, 10};
  for (int mode = 0; mode < 2; mode++) {
    GenerateOptions o;
    o.max_new_tokens = 40;  // the decoder's whole length
    if (mode == 0) o.sampling.greedy = true;
    else o.sampling.temperature = 0.8, o.sampling.top_k = 40, o.sampling.top_p = 0.9, o.seed = 5;
    std::vector<int32_t> streamed;
    const auto cached = generate_t5(t5, prompt, 298, o, [&](int32_t id) { streamed.push_back(id); });
    o.use_kv_cache = false;
    const auto uncached = generate_t5(t5, prompt, 298, o);
    ASSERT_EQ(cached.size(), 40u);
    EXPECT_EQ(cached, uncached) << "mode " << mode;
    EXPECT_EQ(streamed, cached);
    std::map<int32_t, int> distinct;
    for (int32_t id : cached) distinct[id]++;
    EXPECT_GT(distinct.size(), 1u);  // not a constant stream
  }
  GenerateOptions o;
  o.sampling.greedy = true;
  o.max_new_tokens = 20;
  const auto all = generate_t5(t5, prompt, 298, o);
  // Each greedy token is the argmax over the whole vocabulary of the full forward's last row.
  std::vector<int32_t> dec = {298};
  for (const int32_t id : all) {
    const int Vp = t5.config().padded_vocab_size();
    const float* row = t5.forward_logits(prompt.data(), 1, (int)prompt.size(), dec.data(), (int)dec.size()) +
                       (dec.size() - 1) * (size_t)Vp;
    EXPECT_EQ(id, std::max_element(row, row + t5.config().vocab_size) - row);
    dec.push_back(id);
  }
  o.stop_id = all[4];  // as [EOS]: reported, then the end
  const auto stopped = generate_t5(t5, prompt, 298, o);
  ASSERT_LE(stopped.size(), 5u);
  EXPECT_EQ(stopped.back(), all[4]);
  o.max_new_tokens = 41;  // beyond the decoder's positions
  EXPECT_THROW(generate_t5(t5, prompt, 298, o), lmforge::Error);
  o.max_new_tokens = 4;
  EXPECT_THROW(generate_t5(t5, std::vector<int32_t>(41, 1), 298, o), lmforge::Error);
  EXPECT_THROW(generate_t5(t5, std::vector<int32_t>{}, 298, o), lmforge::Error);
  EXPECT_THROW(generate_t5(t5, prompt, 300, o), lmforge::Error);
}

// Sentinels written in the prompt become the vocabulary's <extra_id_N> ids (bert-base-uncased + [BOS] [EOS]: 30524
// onwards, as Megatron numbers them); the text between them is WordPiece-encoded as without them.
TEST(T5Generate, PromptSentinels) {
  const std::string vocab_file = lmforge::testing::shared_path("data/vocab/bert-base-uncased-vocab.txt");
  const auto tokenizer = lmforge::text::make_bert_wordpiece_tokenizer(vocab_file, true,
                                                                       lmforge::text::WordPieceFlavor::kMegatron, 3);
  const auto vocab = lmforge::datasets::load_bert_vocab(vocab_file, 3);
  ASSERT_EQ(vocab.sentinels.size(), 3u);
  EXPECT_EQ(vocab.sentinels[0], 30524);
  auto encoder = tokenizer->make_encoder();
  std::vector<int32_t> a, b;
  encoder->encode("The quick", a);
  encoder->encode("fox jumps over", b);
  std::vector<int32_t> want = a;
  want.push_back(30524);
  want.insert(want.end(), b.begin(), b.end());
  want.push_back(30526);
  EXPECT_EQ(encode_t5_prompt("The quick <extra_id_0> fox jumps over<extra_id_2>", *encoder, vocab.sentinels), want);
  // The tokenizer alone splits the marker into pieces (it never produces a sentinel).
  std::vector<int32_t> plain;
  encoder->encode("<extra_id_0>", plain);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 30524), 0);
  EXPECT_GT(plain.size(), 1u);
  for (const char* bad : {"a <extra_id_3> b", "a <extra_id_> b", "a <extra_id_x> b", "<extra_id_1"}) {
    try {
      encode_t5_prompt(bad, *encoder, vocab.sentinels);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const lmforge::Error& e) {
      EXPECT_NE(std::string(e.what()).find("<extra_id_"), std::string::npos) << e.what();
    }
  }
}

TEST(T5Generate, LoadT5ModelAndModelType) {
  lmforge::testing::TempDir tmp;
  lmforge::model::T5 t5(small_t5(), lmforge::kernels::cpu_backend());
  t5.init_weights(4);
  std::vector<lmforge::checkpoint::NamedTensor> tensors;
  for (const auto& t : t5.table()) tensors.push_back({t.name, t.shape, t5.params() + t.offset});
  lmforge::checkpoint::SaveRequest req;
  req.model = tensors;
  req.config_json = t5_config_json(t5.config());
  req.state.iteration = 3;
  lmforge::checkpoint::save_checkpoint(tmp.file("ckpt"), req);
  EXPECT_EQ(checkpoint_model_type(tmp.file("ckpt")), "lmforge-megatron-t5");
  const auto loaded = load_t5_model(tmp.file("ckpt/iter_0000003"), lmforge::kernels::cpu_backend());
  ASSERT_EQ(loaded->num_parameters(), t5.num_parameters());
  EXPECT_EQ(std::memcmp(loaded->params(), t5.params(), t5.num_parameters() * 4), 0);
  EXPECT_THROW(load_model(tmp.file("ckpt"), lmforge::kernels::cpu_backend()), lmforge::Error);  // not a GPT config
}

}  // namespace
