// Dropout under every layout: the parity tests of this folder run with Megatron's 0.1 (train_run_util.h); this
// checks that the dropout they run with is real — the first step's loss (same initial weights, same batch) moves
// when dropout is switched off, and a run without dropout still trains — and that 2 data-parallel ranks and a
// tensor-parallel pair with dropout draw the single process's masks (losses equal to float precision).
#include "train_run_util.h"

namespace {

using namespace train_runs;

TEST_F(TrainParallel, DropoutIsOnAndEveryLayoutDrawsTheSameMasks) {
  const TrainRun off = train(*dir_, "no-dropout", 0, {{"--hidden-dropout", "0"}, {"--attention-dropout", "0"}});
  ASSERT_EQ(off.status, 0) << off.output;
  ASSERT_EQ(single_->status, 0) << single_->output;
  ASSERT_FALSE(off.loss.empty());
  EXPECT_GT(std::fabs(off.loss[0] - single_->loss[0]), 1e-4 * std::fabs(off.loss[0]))
      << "the first step's loss does not depend on dropout: is it applied?";
  EXPECT_NE(single_->output.find("dropout hidden 0.1 attention 0.1"), std::string::npos) << single_->output;
  expect_parity(train(*dir_, "dropout-dp2", 2), *single_, 1e-6, "DP=2 with dropout 0.1");
  expect_parity(train(*dir_, "dropout-tp2", 2, {{"--tensor-model-parallel-size", "2"}}), *single_, 1e-5,
                "TP=2 with dropout 0.1");
}

}  // namespace
