// defines: tests of the BERT and T5 train::Model adapters: the Batch fields they read, their loss lists, their
// config.json both ways (including the shared Megatron-flavour reference's config.json and tensor names, i.e. Hugging
// Face MegatronBertForPreTraining's), and the checkpoint-config checks that refuse another model.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "checkpoint/safetensors.h"
#include "kernels/backend.h"
#include "test_util.h"
#include "families/bert/bert_model.h"
#include "families/t5/t5_model.h"
#include "util/error.h"

namespace lmforge::train {
namespace {

using lmforge::testing::read_file;
using lmforge::testing::shared_path;

model::BertConfig small_bert() {
  model::BertConfig c;
  c.num_layers = 2;
  c.hidden = 16;
  c.heads = 2;
  c.ffn_hidden = 32;
  c.seq_length = 8;
  c.max_positions = 8;
  c.vocab_size = 100;
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  return c;
}

// A BERT micro-batch with padding in the second row.
Batch bert_batch(int vocab) {
  Batch b;
  b.B = 2;
  b.T = 8;
  std::mt19937 rng(3);
  for (int i = 0; i < b.B * b.T; i++) {
    const bool real = i < 8 || i % 8 < 5;
    b.tokens.push_back(real ? (int32_t)(rng() % vocab) : 0);
    b.padding.push_back(real);
    b.token_types.push_back(i % 8 >= 3 && real);
    const bool masked = real && i % 3 == 1;
    b.targets.push_back(masked ? (int32_t)(rng() % vocab) : -1);
    b.loss_mask.push_back(masked ? 1.0f : 0.0f);
  }
  b.labels = {1, 0};
  return b;
}

TEST(BertModel, BatchFieldsReachTheModelAndLossesAreNamedAsMegatron) {
  const model::BertConfig c = small_bert();
  BertModel adapter(c, lmforge::kernels::cpu_backend(), nullptr);
  adapter.init_weights(5);
  EXPECT_EQ(adapter.loss_names(), (std::vector<std::string>{"lm loss", "sop loss"}));
  const Batch b = bert_batch(c.vocab_size);
  const std::vector<double> losses = adapter.forward(b, layers::ForwardStep{});
  ASSERT_EQ(losses.size(), 2u);
  model::Bert direct(c, lmforge::kernels::cpu_backend());
  direct.init_weights(5);
  model::BertInputs in;
  in.B = b.B;
  in.T = b.T;
  in.tokens = b.tokens.data();
  in.types = b.token_types.data();
  in.padding = b.padding.data();
  in.labels = b.targets.data();
  in.loss_mask = b.loss_mask.data();
  in.is_random = b.labels.data();
  const model::BertLosses l = direct.forward(in);
  EXPECT_EQ(losses[0], l.lm);
  EXPECT_EQ(losses[1], l.sop);
  // is_random is required with the binary head, not without.
  Batch missing = b;
  missing.labels.clear();
  EXPECT_THROW(adapter.forward(missing, layers::ForwardStep{}), Error);
  model::BertConfig no_head = c;
  no_head.binary_head = false;
  BertModel lm_only(no_head, lmforge::kernels::cpu_backend(), nullptr);
  lm_only.init_weights(5);
  EXPECT_EQ(lm_only.loss_names(), (std::vector<std::string>{"lm loss"}));
  EXPECT_EQ(lm_only.forward(missing, layers::ForwardStep{}).size(), 1u);
}

TEST(BertModel, NothingMaskedGivesANanLossAndNoGradient) {
  BertModel adapter(small_bert(), lmforge::kernels::cpu_backend(), nullptr);
  adapter.init_weights(5);
  Batch b = bert_batch(100);
  std::fill(b.loss_mask.begin(), b.loss_mask.end(), 0.0f);
  std::fill(b.targets.begin(), b.targets.end(), -1);
  const std::vector<double> losses = adapter.forward(b, layers::ForwardStep{});
  EXPECT_TRUE(std::isnan(losses[0]));
  EXPECT_TRUE(std::isfinite(losses[1]));
  adapter.zero_grad();
  adapter.backward(1.0f);
  std::vector<float> grads((size_t)adapter.grads().numel());
  lmforge::kernels::backend_for(adapter.grads().device).copy_to_host(grads.data(), adapter.grads().data, grads.size() * 4);
  const param::Parameter& bias = adapter.table().find("cls.predictions.bias");
  for (size_t i = 0; i < bias.numel; i++) ASSERT_EQ(grads[bias.offset + i], 0.0f);
  const param::Parameter& pooler = adapter.table().find("bert.pooler.dense.weight");
  double norm = 0.0;
  for (size_t i = 0; i < pooler.numel; i++) norm += std::fabs(grads[pooler.offset + i]);
  EXPECT_GT(norm, 0.0) << "the sop loss still trains";
}

// The Megatron flavour's tensors are exactly those of the shared Megatron-checked reference, which carries Hugging
// Face MegatronBertForPreTraining's names; its config.json reads back as the model that produced it.
TEST(BertModel, MegatronFlavourNamesAndConfigAreHuggingFaces) {
  const std::string dir = shared_path("data/sample/megatron_samples/bert_model_small/");
  const model::BertConfig from_shared = bert_config_from_json(read_file(dir + "config.json"), "config.json");
  EXPECT_FALSE(from_shared.post_layernorm);
  EXPECT_TRUE(from_shared.binary_head);
  EXPECT_EQ(from_shared.mlp_gelu, kernels::GeluKind::TANH);
  EXPECT_EQ(from_shared.head_gelu, kernels::GeluKind::ERF);
  EXPECT_FLOAT_EQ(from_shared.layernorm_eps, 1e-5f);
  EXPECT_EQ(from_shared.padded_vocab_size(), 30592);
  const checkpoint::SafetensorsFile weights(dir + "model.safetensors");
  std::set<std::string> want, got;
  for (const auto& t : weights.tensors()) want.insert(t.name);
  for (const auto& p : model::Bert::parameter_table(from_shared)) got.insert(p.name);
  EXPECT_EQ(got, want);

  model::BertConfig c = small_bert();
  c.vocab_size = 30524;
  const std::string json = bert_config_json(c);
  EXPECT_NE(json.find("\"model_type\": \"megatron-bert\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"MegatronBertForPreTraining\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"vocab_size\": 30592"), std::string::npos) << json;
  EXPECT_NE(json.find("\"hidden_act\": \"gelu_new\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"layer_norm_eps\": 1e-05"), std::string::npos) << json;
  EXPECT_NE(json.find("lmforge_note"), std::string::npos) << json;
  const model::BertConfig back = bert_config_from_json(json, "written");
  EXPECT_EQ(back.vocab_size, 30524);
  EXPECT_EQ(back.padded_vocab_size(), 30592);
  EXPECT_EQ(back.mlp_gelu, kernels::GeluKind::TANH);
  EXPECT_EQ(back.head_gelu, kernels::GeluKind::ERF);
  EXPECT_EQ(back.ffn(), 32);
}

TEST(BertModel, OriginalFlavourConfigIsBertForPreTrainings) {
  model::BertConfig c = small_bert();
  c.post_layernorm = true;
  c.layernorm_eps = 1e-12f;
  c.mlp_gelu = c.head_gelu = kernels::GeluKind::ERF;
  const std::string json = bert_config_json(c);
  EXPECT_NE(json.find("\"model_type\": \"bert\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"BertForPreTraining\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"hidden_act\": \"gelu\""), std::string::npos) << json;
  const model::BertConfig back = bert_config_from_json(json, "written");
  EXPECT_TRUE(back.post_layernorm);
  EXPECT_FLOAT_EQ(back.layernorm_eps, 1e-12f);
  const param::ParamTable t = model::Bert::parameter_table(c);
  EXPECT_TRUE(t.contains("bert.embeddings.LayerNorm.weight"));
  EXPECT_TRUE(t.contains("bert.encoder.layer.1.attention.output.LayerNorm.bias"));
  EXPECT_TRUE(t.contains("bert.encoder.layer.1.output.LayerNorm.weight"));
  EXPECT_FALSE(t.contains("bert.encoder.ln.weight"));
  // A Google bert_config.json (no layer_norm_eps, no model_type): the original BERT with eps 1e-12, erf GELU.
  const model::BertConfig google = bert_config_from_json(
      "{\"vocab_size\": 30522, \"hidden_size\": 768, \"num_hidden_layers\": 12, \"num_attention_heads\": 12, "
      "\"intermediate_size\": 3072, \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": 0.1, "
      "\"attention_probs_dropout_prob\": 0.1, \"max_position_embeddings\": 512, \"type_vocab_size\": 2, "
      "\"initializer_range\": 0.02}",
      "bert_config.json");
  EXPECT_TRUE(google.post_layernorm);
  EXPECT_FLOAT_EQ(google.layernorm_eps, 1e-12f);
  EXPECT_EQ(google.padded_vocab_size(), 30522);
}

TEST(BertModel, CheckpointConfigRefusesAnotherModel) {
  const model::BertConfig c = small_bert();
  BertModel adapter(c, lmforge::kernels::cpu_backend(), nullptr);
  EXPECT_NO_THROW(adapter.check_checkpoint_config(bert_config_json(c), "ckpt"));
  model::BertConfig other = c;
  other.binary_head = false;
  EXPECT_THROW(adapter.check_checkpoint_config(bert_config_json(other), "ckpt"), Error);
  other = c;
  other.heads = 4;
  EXPECT_THROW(adapter.check_checkpoint_config(bert_config_json(other), "ckpt"), Error);
  other = c;
  other.post_layernorm = true;
  EXPECT_THROW(adapter.check_checkpoint_config(bert_config_json(other), "ckpt"), Error);
  other = c;
  other.head_gelu = kernels::GeluKind::TANH;
  EXPECT_THROW(adapter.check_checkpoint_config(bert_config_json(other), "ckpt"), Error);
  EXPECT_EQ(adapter.vocabulary_tensors(),
            (std::vector<std::string>{"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"}));
}

model::T5Config small_t5() {
  model::T5Config c;
  c.encoder_num_layers = 2;
  c.hidden = 16;
  c.heads = 2;
  c.ffn_hidden = 32;
  c.encoder_seq_length = 8;
  c.decoder_seq_length = 4;
  c.max_positions = 8;
  c.vocab_size = 100;
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  return c;
}

TEST(T5Model, DecoderFieldsOfTheBatchReachTheModel) {
  const model::T5Config c = small_t5();
  T5Model adapter(c, lmforge::kernels::cpu_backend(), nullptr);
  adapter.init_weights(9);
  Batch b;
  b.B = 2;
  b.T = 8;
  b.Td = 4;
  for (int i = 0; i < 16; i++) b.tokens.push_back(i % 8 < 6 ? 1 + i : 0), b.padding.push_back(i % 8 < 6);
  for (int i = 0; i < 8; i++) {
    b.decoder_tokens.push_back(i % 4 < 3 ? 20 + i : 0);
    b.decoder_padding.push_back(i % 4 < 3);
    b.targets.push_back(i % 4 < 3 ? 40 + i : -1);
    b.loss_mask.push_back(i % 4 < 3 ? 1.0f : 0.0f);
  }
  const std::vector<double> losses = adapter.forward(b, layers::ForwardStep{});
  ASSERT_EQ(losses.size(), 1u);
  model::T5 direct(c, lmforge::kernels::cpu_backend());
  direct.init_weights(9);
  model::T5Inputs in;
  in.B = 2;
  in.Te = 8;
  in.Td = 4;
  in.encoder_tokens = b.tokens.data();
  in.encoder_padding = b.padding.data();
  in.decoder_tokens = b.decoder_tokens.data();
  in.decoder_padding = b.decoder_padding.data();
  in.labels = b.targets.data();
  in.loss_mask = b.loss_mask.data();
  EXPECT_EQ(losses[0], direct.forward(in));
  Batch no_decoder = b;
  no_decoder.Td = 0;
  EXPECT_THROW(adapter.forward(no_decoder, layers::ForwardStep{}), Error);
}

TEST(T5Model, ConfigRoundTripsAndRefusesAnotherModel) {
  model::T5Config c = small_t5();
  c.decoder_num_layers = 3;
  const std::string json = t5_config_json(c);
  EXPECT_NE(json.find("\"model_type\": \"lmforge-megatron-t5\""), std::string::npos) << json;
  const model::T5Config back = t5_config_from_json(json, "written");
  EXPECT_EQ(back.decoder_layers(), 3);
  EXPECT_EQ(back.encoder_num_layers, 2);
  EXPECT_EQ(back.padded_vocab_size(), c.padded_vocab_size());
  T5Model adapter(c, lmforge::kernels::cpu_backend(), nullptr);
  EXPECT_NO_THROW(adapter.check_checkpoint_config(json, "ckpt"));
  model::T5Config other = c;
  other.decoder_num_layers = 2;
  EXPECT_THROW(adapter.check_checkpoint_config(t5_config_json(other), "ckpt"), Error);
  EXPECT_THROW(t5_config_from_json(bert_config_json(small_bert()), "bert"), Error);
}

// A field of the wrong type in a config.json is an error naming it; before, "hidden_act": 5 or
// "add_binary_head": "no" silently took the default (checkpoint/config_fields.h, found by the config fuzz target's
// review).
TEST(BertModel, ConfigFieldOfTheWrongTypeIsAnErrorNamingIt) {
  const std::string google = R"({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 256, "max_position_embeddings": 128, "vocab_size": 100, )";
  EXPECT_NO_THROW(bert_config_from_json(google + R"("hidden_act": "gelu"})", "bert_config.json"));
  for (const char* bad : {R"("hidden_act": 5})", R"("add_binary_head": "no"})", R"("layer_norm_eps": "1e-12"})"}) {
    try {
      bert_config_from_json(google + bad, "bert_config.json");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const lmforge::Error& e) {
      const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
      EXPECT_NE(std::string(e.what()).find("bert_config.json: " + key + " must be"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lmforge::train
