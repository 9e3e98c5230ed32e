// defines: tests of `--optimizer lamb|sgd` through the trainer: a run stopped, saved and resumed logs bit-identical
// losses and ends with bit-identical weights to the uninterrupted run (the named optimizer state and its step count
// travel through the checkpoint), and a checkpoint trained with one optimizer refuses to resume with another
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "test_util.h"
#include "train/trainer.h"
#include "trainer_test_util.h"
#include "util/error.h"

namespace {

using lmforge::testing::TempDir;
using lmforge::train::Trainer;
using lmforge::train::TrainOptions;

// The trainer tests' tiny GPT with another optimizer (SGD wants a larger learning rate).
TrainOptions tiny_options(const TempDir& tmp, const std::string& optimizer) {
  TrainOptions o = trainer_tests::tiny_vocab_options(tmp);
  o.schedule.lr = optimizer == "sgd" ? 0.5 : 0.02;
  o.schedule.min_lr = o.schedule.lr / 10;
  o.optimizer.kind = optimizer;
  return o;
}

using trainer_tests::expect_resume_bit_identical;

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
