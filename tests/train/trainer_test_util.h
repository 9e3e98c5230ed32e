// defines: helpers of the trainer tests: tiny_options() (a tiny GPT on the shared sample dataset),
//          tiny_vocab_options() (the same on the sample with 1,001 ids, for tests comparing runs with each other) and
//          expect_resume_bit_identical() (an uninterrupted run against a stopped, saved and resumed one)
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "train/tiny_vocab_data.h"
#include "train/trainer.h"

namespace trainer_tests {

namespace fs = std::filesystem;
using lmforge::testing::loss_lines;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::train::Trainer;
using lmforge::train::TrainOptions;

inline const std::string kData = shared_path("data/sample/sample_gpt2_text_document");

// A tiny GPT on the sample dataset: 2 micro-batches of 2 per step, warm-up then cosine decay, evaluation every 3.
inline TrainOptions tiny_options(const TempDir& tmp) {
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
  o.schedule.lr = 3e-3;
  o.schedule.min_lr = 3e-4;
  o.schedule.lr_decay_style = "cosine";
  o.schedule.lr_warmup_iters = 1;
  o.schedule.train_iters = 6;
  o.schedule.weight_decay = 0.01;
  o.optimizer.beta2 = 0.95;
  o.clip_grad = 1.0;
  o.log_interval = 1;
  o.eval_interval = 3;
  o.eval_iters = 1;
  return o;
}

// tiny_options() on the GPT-2 sample with 1,001 ids (NullTokenizer; train/tiny_vocab_data.h): the same model with a
// 1,024-column LM head, for the tests that compare runs with one another (devices, resumes, precisions).
inline TrainOptions tiny_vocab_options(const TempDir& tmp) {
  TrainOptions o = tiny_options(tmp);
  o.tokenizer = {};
  o.tokenizer.type = "NullTokenizer";
  o.tokenizer.vocab_size = lmforge::testing::kTinyVocabSize;
  o.data_path = {lmforge::testing::tiny_vocab_data()};
  return o;
}

// 6 iterations straight, against 3 + save + exit, then --load and 3 more.
// Returns the uninterrupted run's iteration records.
inline std::vector<lmforge::train::IterationRecord> expect_resume_bit_identical(TrainOptions options) {
  EXPECT_TRUE(fs::exists(options.data_path.at(0) + ".bin")) << "dataset missing";
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
    EXPECT_EQ(first.iteration(), 3);
  }
  EXPECT_TRUE(fs::exists(tmp.file("ckpt/iter_0000003/optimizer.safetensors")));
  b.load = b.save;
  Trainer second(b, log_b2);
  EXPECT_EQ(second.iteration(), 3);
  second.run();
  EXPECT_EQ(second.iteration(), 6);

  std::vector<std::string> resumed = loss_lines(log_b1.str());
  for (const std::string& l : loss_lines(log_b2.str())) resumed.push_back(l);
  const std::vector<std::string> uninterrupted = loss_lines(log_a.str());
  // 6 iterations; validation at 3, 6 and the end of training; the test split at the end.
  EXPECT_EQ(uninterrupted.size(), 6u + 4u) << log_a.str();
  EXPECT_EQ(uninterrupted, resumed) << log_a.str() << "\n---\n" << log_b1.str() << log_b2.str();
  EXPECT_EQ(full.gpt().num_parameters(), second.gpt().num_parameters());
  if (full.gpt().num_parameters() == second.gpt().num_parameters()) {
    EXPECT_EQ(std::memcmp(full.gpt().params(), second.gpt().params(),
                          full.gpt().num_parameters() * sizeof(float)),
              0);
  }
  // Training moved: the last loss is below the first.
  EXPECT_EQ(full.history().size(), 6u);
  if (!full.history().empty()) {
    EXPECT_LT(full.history().back().loss, full.history().front().loss);
  }
  return full.history();
}

// tiny_options() trained for 2 iterations and saved to tmp/ckpt, returned with --load pointing there: the start of
// the tests of what a resume accepts and refuses.
inline TrainOptions saved_after_two_iterations(const TempDir& tmp) {
  TrainOptions o = tiny_options(tmp);
  o.schedule.train_iters = 2;
  o.eval_iters = 0;
  o.save = tmp.file("ckpt");
  std::ostringstream log;
  Trainer(o, log).run();
  o.load = o.save;
  return o;
}

}  // namespace trainer_tests
