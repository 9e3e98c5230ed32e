// defines: tests of what the trainer refuses or stops on, and says why (issue 31): --load of an iteration directory
//          or its model.safetensors resumes it; a checkpoint of another family is named with the command that reads
//          it; loss scaling that skips every iteration ends with an error (all skipped, 100 in a row at a static scale,
//          an overflow at the dynamic minimum); --bf16 applies a static --loss-scale as Megatron; BERT's --mask-prob
//          that masks nothing, bert_config.json's type_vocab_size against sentence-pair data, and its vocab_size
//          (NVIDIA's padding to 8)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

#include "test_util.h"
#include "train/generate.h"
#include "train/mixed_precision.h"
#include "train/trainer.h"
#include "trainer_test_util.h"

namespace {

using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
using lmforge::train::Trainer;
using lmforge::train::TrainOptions;
namespace fs = std::filesystem;

// The message of the Error `f` throws ("" when it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- --load as users give it (item 6) and another family's checkpoint (item 17) ---------------------------------

TEST(TrainerLoad, IterationDirectoryAndItsWeightsFileResumeThatCheckpoint) {
  TempDir tmp;
  TrainOptions o = trainer_tests::saved_after_two_iterations(tmp);
  o.schedule.train_iters = 3;
  o.override_opt_param_scheduler = true;
  o.save.clear();
  for (const std::string& load : {o.load + "/iter_0000002", o.load + "/iter_0000002/model.safetensors"}) {
    o.load = load;
    std::ostringstream log;
    Trainer resumed(o, log);
    EXPECT_EQ(resumed.iteration(), 2) << load << ":\n" << log.str();
    EXPECT_TRUE(has(log.str(), "loaded checkpoint " + tmp.file("ckpt/iter_0000002"))) << log.str();
    resumed.run();
    EXPECT_EQ(resumed.history().size(), 1u);
  }
  // A weights file outside a checkpoint is weights only: refused, pointing to --finetune.
  fs::copy_file(tmp.file("ckpt/iter_0000002/model.safetensors"), tmp.file("weights.safetensors"));
  o.load = tmp.file("weights.safetensors");
  std::ostringstream log;
  const std::string e = error_of([&] { Trainer(o, log); });
  EXPECT_TRUE(has(e, "--finetune")) << e;
}

// A tiny BERT (Megatron's sentence data) saved after one iteration, its options returned.
TrainOptions tiny_bert(const TempDir& tmp) {
  TrainOptions o = trainer_tests::tiny_options(tmp);
  o.model_type = "bert";
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = shared_path("data/vocab/bert-base-uncased-vocab.txt");
  o.tokenizer.merge_file.clear();
  o.data_path = {shared_path("data/sample/sample_bert_text_sentence")};
  o.data_cache_path = tmp.file("cache-bert");
  o.seq_length = 32;
  o.schedule.train_iters = 1;
  o.schedule.lr_warmup_iters = 0;
  o.eval_iters = 0;
  return o;
}

TEST(TrainerLoad, CheckpointOfAnotherFamilyIsNamedWithTheCommandThatReadsIt) {
  TempDir tmp;
  TrainOptions bert = tiny_bert(tmp);
  bert.save = tmp.file("bert-ckpt");
  {
    std::ostringstream log;
    Trainer(bert, log).run();
  }
  TrainOptions gpt = trainer_tests::tiny_options(tmp);
  gpt.load = bert.save;
  std::ostringstream log;
  const std::string resume = error_of([&] { Trainer(gpt, log); });
  EXPECT_TRUE(has(resume, "a bert checkpoint (model_type \"megatron-bert\")")) << resume;
  EXPECT_TRUE(has(resume, "lmforge train bert --load " + bert.save)) << resume;
  gpt.finetune = true;
  const std::string finetune = error_of([&] { Trainer(gpt, log); });
  EXPECT_TRUE(has(finetune, "a bert checkpoint") && has(finetune, "--finetune")) << finetune;
  // lmforge generate --load of the same checkpoint.
  const std::string generate = error_of([&] { lmforge::train::generating_family(bert.save); });
  EXPECT_TRUE(has(generate, "a bert checkpoint (config.json model_type \"megatron-bert\")")) << generate;
  EXPECT_TRUE(has(generate, "lmforge train bert --load " + bert.save)) << generate;
}

// ---- loss scaling that makes no progress (item 8) and --bf16 --loss-scale (item 15) ------------------------------

TEST(TrainerLossScale, RunWhoseEveryIterationIsSkippedFailsSayingSo) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_options(tmp);
  o.precision.fp16 = true;
  o.precision.loss_scale = 1e30;  // every backward overflows fp16
  o.schedule.train_iters = 3;
  o.eval_iters = 0;
  o.save = tmp.file("ckpt");
  std::ostringstream log;
  Trainer t(o, log);
  const std::string e = error_of([&] { t.run(); });
  EXPECT_TRUE(has(e, "every one of the 3 iterations of this run was skipped")) << e;
  EXPECT_TRUE(has(e, "--loss-scale")) << e;
  EXPECT_FALSE(fs::exists(tmp.file("ckpt/iter_0000003"))) << "the unchanged weights were saved as a result";
}

TEST(TrainerLossScale, StaticScaleStopsAfterItsLimitOfConsecutiveSkips) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_options(tmp);
  o.precision.fp16 = true;
  o.precision.loss_scale = 1e30;
  o.schedule.train_iters = 1000;
  o.eval_iters = 0;
  o.log_interval = 1000;
  // Cheap iterations: one sample of 8 tokens each.
  o.seq_length = 8;
  o.micro_batch_size = 1;
  o.global_batch_size = 1;
  std::ostringstream log;
  Trainer t(o, log);
  const std::string e = error_of([&] { t.run(); });
  EXPECT_TRUE(has(e, "iteration 100: 100 iterations in a row were skipped")) << e;
  EXPECT_EQ(t.history().size(), 100u);
}

TEST(TrainerLossScale, DynamicScaleOverflowingAtItsMinimumStops) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_options(tmp);
  o.precision.fp16 = true;
  o.precision.initial_loss_scale = o.precision.min_loss_scale = 1e30;
  o.schedule.train_iters = 50;
  o.eval_iters = 0;
  std::ostringstream log;
  Trainer t(o, log);
  const std::string e = error_of([&] { t.run(); });
  // Hysteresis 2: the second overflow would halve the scale, which is at its minimum.
  EXPECT_TRUE(has(e, "iteration 2: the gradients overflowed with the dynamic loss scale at its minimum 1e+30 "
                     "(--min-loss-scale)")) << e;
}

TEST(TrainerLossScale, Bf16AppliesAStaticLossScaleAsMegatron) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_options(tmp);
  o.precision.bf16 = true;
  o.eval_iters = 0;
  o.schedule.train_iters = 4;
  lmforge::train::MixedPrecisionOptions p = o.precision;
  p.loss_scale = 1024;
  EXPECT_TRUE(lmforge::optim::LossScaler(lmforge::train::loss_scale_options(p)).active());
  std::ostringstream plain_log, scaled_log;
  Trainer plain(o, plain_log);
  plain.run();
  o.precision.loss_scale = 1024;
  Trainer scaled(o, scaled_log);
  scaled.run();
  ASSERT_EQ(scaled.history().size(), plain.history().size());
  for (size_t i = 0; i < plain.history().size(); i++) {
    EXPECT_EQ(scaled.history()[i].loss_scale, 1024.0);
    EXPECT_FALSE(scaled.history()[i].skipped);
    // A power of two scales and unscales exactly: the same run.
    EXPECT_NEAR(scaled.history()[i].loss, plain.history()[i].loss, 1e-5 * std::fabs(plain.history()[i].loss)) << i;
  }
  EXPECT_TRUE(has(scaled_log.str(), "loss scale: 1024.0")) << scaled_log.str();
  EXPECT_TRUE(has(scaled_log.str(), "static loss scale 1024 (--loss-scale with --bf16")) << scaled_log.str();
  // Applied, not only shown: a scale that is not a power of two rounds the bf16 gradients differently, so the
  // updates (not the first loss, computed before any) differ slightly.
  o.precision.loss_scale = 1000;
  std::ostringstream odd_log;
  Trainer odd(o, odd_log);
  odd.run();
  EXPECT_EQ(odd.history()[0].loss, plain.history()[0].loss);
  bool differs = false;
  for (size_t i = 1; i < plain.history().size(); i++) {
    differs |= odd.history()[i].loss != plain.history()[i].loss;
    EXPECT_NEAR(odd.history()[i].loss, plain.history()[i].loss, 1e-2 * std::fabs(plain.history()[i].loss)) << i;
  }
  EXPECT_TRUE(differs) << "--loss-scale 1000 changed nothing: the scale is not applied";
}

// ---- BERT's data against its flags and bert_config.json (items 18, 20, 21) --------------------------------------

TEST(TrainerBertChecks, MaskProbabilityThatMasksNothingIsRefused) {
  TempDir tmp;
  TrainOptions o = tiny_bert(tmp);
  std::ostringstream log;
  for (const double p : {0.0, 0.03}) {  // 0.03 x 29 tokens < 1
    o.mask_prob = p;
    const std::string e = error_of([&] { Trainer(o, log); });
    EXPECT_TRUE(has(e, "masks no token")) << p << ": " << e;
    EXPECT_TRUE(has(e, "give at least 0.0345")) << e;
  }
  o.mask_prob = 0.04;
  EXPECT_EQ(error_of([&] { Trainer(o, log); }), "");
}

// A Google/NVIDIA bert_config.json for tiny_bert's sizes.
std::string bert_config(const TempDir& tmp, const std::string& extra) {
  const std::string path = tmp.file("bert_config.json");
  write_file(path, R"({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 48,
    "num_attention_heads": 2, "num_hidden_layers": 2, )" + extra + "}");
  return path;
}

TEST(TrainerBertChecks, OneTokenTypeAgainstSentencePairDataIsNamedUpFront) {
  TempDir tmp;
  TrainOptions o = tiny_bert(tmp);
  o.bert_config_file = bert_config(tmp, R"("type_vocab_size": 1, "vocab_size": 30522)");
  o.num_layers = o.hidden_size = o.num_attention_heads = o.max_position_embeddings = 0;
  std::ostringstream log;
  const std::string megatron = error_of([&] { Trainer(o, log); });
  EXPECT_TRUE(has(megatron, o.bert_config_file + ": \"type_vocab_size\": 1")) << megatron;
  EXPECT_TRUE(has(megatron, o.data_path[0])) << megatron;
  // NVIDIA's shards: the shard and row are named.
  const std::string make = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                           "/tests/train/make_bert_hdf5_train.py " + tmp.file("fx") + " > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  o.data_path = {tmp.file("fx/train_only")};
  o.split = "969, 30, 1";
  o.data_cache_path.clear();
  const std::string nvidia = error_of([&] { Trainer(o, log); });
  EXPECT_TRUE(has(nvidia, tmp.file("fx/train_only/")) && has(nvidia, ": row ")) << nvidia;
  EXPECT_TRUE(has(nvidia, "has segment_ids 1") && has(nvidia, "\"type_vocab_size\"")) << nvidia;
  o.bert_binary_head = false;  // no segments read: trains
  EXPECT_EQ(error_of([&] { Trainer(o, log); }), "");
}

TEST(TrainerBertChecks, ConfigVocabSizeGivesTheWordRowsPaddedAsNvidia) {
  TempDir tmp;
  TrainOptions o = tiny_bert(tmp);
  o.num_layers = o.hidden_size = o.num_attention_heads = o.max_position_embeddings = 0;
  o.bert_config_file = bert_config(tmp, R"("type_vocab_size": 2, "vocab_size": 30522)");
  std::ostringstream log;
  Trainer t(o, log);
  // 30522 rounded up to a multiple of 8 (NVIDIA's run_pretraining.py), not the tokenizer's 30524 to 128 (30592).
  int64_t rows = -1;
  for (const auto& p : t.model().whole_table())
    if (p.name == "bert.embeddings.word_embeddings.weight") rows = p.shape[0];
  EXPECT_EQ(rows, 30528);
  EXPECT_TRUE(has(log.str(), "vocab_size 30522: 30528 word rows")) << log.str();
  // A vocab_size too small for the tokenizer is an error naming it.
  o.bert_config_file = bert_config(tmp, R"("type_vocab_size": 2, "vocab_size": 1000)");
  const std::string e = error_of([&] { Trainer(o, log); });
  EXPECT_TRUE(has(e, "\"vocab_size\": 1000 gives the model 1000 word rows")) << e;
}

}  // namespace

namespace {

TEST(TrainerBertChecks, ConfigFileThatIsADirectoryIsSaidToBeOne) {
  TempDir tmp;
  TrainOptions o = tiny_bert(tmp);
  o.num_layers = o.hidden_size = o.num_attention_heads = o.max_position_embeddings = 0;
  o.bert_config_file = tmp.file("bert_config.json");
  fs::create_directories(o.bert_config_file);
  std::ostringstream log;
  const std::string e = error_of([&] { Trainer(o, log); });
  EXPECT_TRUE(has(e, o.bert_config_file + ": is a directory, not a file")) << e;
}

}  // namespace
