// defines: tests of `--optimizer lamb|sgd` through the trainer: a run stopped, saved and resumed logs bit-identical
// losses and ends with bit-identical weights to the uninterrupted run (the named optimizer state and its step count
// travel through the checkpoint), and a checkpoint trained with one optimizer refuses to resume with another
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "test_util.h"
#include "train/trainer.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::train::Trainer;
using lmforge::train::TrainOptions;

const std::string kData = shared_path("data/sample/sample_gpt2_text_document");

// A tiny GPT on the sample dataset, 6 iterations of 2 micro-batches of 2, evaluation every 3 (as test_trainer.cpp).
TrainOptions tiny_options(const TempDir& tmp, const std::string& optimizer) {
  TrainOptions o;
  o.num_layers = 2;
  o.hidden_size = 32;
  o.num_attention_heads = 2;
  o.seq_length = 32;
  o.max_position_embeddings = 48;
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  o.data_path = {kData};
  o.split = "949,50,1";
  o.data_cache_path = tmp.file("cache");
  o.micro_batch_size = 2;
  o.global_batch_size = 4;
  o.schedule.lr = optimizer == "sgd" ? 0.5 : 0.02;
  o.schedule.min_lr = o.schedule.lr / 10;
  o.schedule.lr_decay_style = "cosine";
  o.schedule.lr_warmup_iters = 1;
  o.schedule.train_iters = 6;
  o.schedule.weight_decay = 0.01;
  o.optimizer.kind = optimizer;
  o.optimizer.beta2 = 0.95;
  o.clip_grad = 1.0;
  o.log_interval = 1;
  o.eval_interval = 3;
  o.eval_iters = 1;
  return o;
}

// The log's loss-bearing text: iteration lines from "| learning rate:" on (the time varies) and validation lines.
std::vector<std::string> loss_lines(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t p = line.find("| learning rate:");
    if (line.rfind(" iteration ", 0) == 0 && p != std::string::npos) out.push_back(line.substr(p));
    if (line.find("validation loss at") != std::string::npos) out.push_back(line);
  }
  return out;
}

// 6 iterations straight, against 3 + save + exit, then --load and 3 more.
void expect_resume_bit_identical(TrainOptions options) {
  ASSERT_TRUE(fs::exists(kData + ".bin")) << "shared sample dataset missing";
  TempDir tmp;
  options.data_cache_path = tmp.file("cache");
  std::ostringstream log_a, log_b1, log_b2;
  Trainer full(options, log_a);
  full.run();

  TrainOptions b = options;
  b.save = tmp.file("ckpt");
  b.exit_interval = 3;
  {
    Trainer first(b, log_b1);
    first.run();
    ASSERT_EQ(first.iteration(), 3);
  }
  ASSERT_TRUE(fs::exists(tmp.file("ckpt/iter_0000003/optimizer.safetensors")));
  b.load = b.save;
  Trainer second(b, log_b2);
  ASSERT_EQ(second.iteration(), 3);
  second.run();
  ASSERT_EQ(second.iteration(), 6);

  std::vector<std::string> resumed = loss_lines(log_b1.str());
  for (const std::string& l : loss_lines(log_b2.str())) resumed.push_back(l);
  const std::vector<std::string> uninterrupted = loss_lines(log_a.str());
  // 6 iterations; validation at 3, 6 and the end of training; the test split at the end.
  EXPECT_EQ(uninterrupted.size(), 6u + 4u) << log_a.str();
  EXPECT_EQ(uninterrupted, resumed) << log_a.str() << "\n---\n" << log_b1.str() << log_b2.str();
  ASSERT_EQ(full.model().num_parameters(), second.model().num_parameters());
  EXPECT_EQ(std::memcmp(full.model().params(), second.model().params(),
                        full.model().num_parameters() * sizeof(float)),
            0);
  // Training moved: the last loss is below the first.
  ASSERT_EQ(full.history().size(), 6u);
  EXPECT_LT(full.history().back().loss, full.history().front().loss);
}

TEST(OptimizerResume, LambResumesBitIdentically) { expect_resume_bit_identical(tiny_options(TempDir(), "lamb")); }

TEST(OptimizerResume, LambOnAllTensorsResumesBitIdentically) {
  TrainOptions o = tiny_options(TempDir(), "lamb");
  o.optimizer.lamb_all_tensors = true;
  expect_resume_bit_identical(o);
}

TEST(OptimizerResume, SgdWithMomentumResumesBitIdentically) {
  expect_resume_bit_identical(tiny_options(TempDir(), "sgd"));
}

TEST(OptimizerResume, SgdWithoutMomentumHasNoStateAndResumesBitIdentically) {
  TrainOptions o = tiny_options(TempDir(), "sgd");
  o.optimizer.sgd_momentum = 0.0;
  expect_resume_bit_identical(o);
}

TEST(OptimizerResume, LambCheckpointRefusesToResumeWithAdam) {
  TempDir tmp;
  TrainOptions lamb = tiny_options(tmp, "lamb");
  lamb.save = tmp.file("ckpt");
  lamb.exit_interval = 3;
  std::ostringstream log;
  {
    Trainer first(lamb, log);
    first.run();
  }
  TrainOptions adam = tiny_options(tmp, "adam");
  adam.load = lamb.save;
  try {
    Trainer second(adam, log);
    ADD_FAILURE() << "a lamb checkpoint loaded into adam";
  } catch (const lmforge::Error& e) {
    const std::string what = e.what();
    for (const char* needle : {"iter_0000003/optimizer.safetensors", "holds 'lamb' optimizer state, but this run "
                               "uses 'adamw'", "--optimizer", "--finetune"})
      EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
  // The weights alone still start a new AdamW run.
  adam.finetune = true;
  Trainer tuned(adam, log);
  EXPECT_EQ(tuned.iteration(), 0);
}

}  // namespace
