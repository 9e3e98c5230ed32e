// `lmforge train gpt --tensor-model-parallel-size`: TP = 2 and TP = 2 x DP = 2 (replicated and distributed
// optimizer) reproduce the single-process losses (relative difference < 1e-5 over 20 steps); sizes that do not
// fit the world or the heads fail before any work.
#include "train_run_util.h"

namespace {

using namespace train_runs;

TEST_F(TrainParallel, TensorParallelTwoAndTwoByTwoReproduceOneProcess) {
  const TrainRun tp2 = train(*dir_, "tp2", 2, {{"--tensor-model-parallel-size", "2"}});
  expect_parity(tp2, *single_, 1e-5, "TP=2");
  EXPECT_NE(tp2.output.find("tensor parallel: 2 ranks per group (30368 of 59264 parameters on each)"),
            std::string::npos)
      << tp2.output;
  const TrainRun tp2dp2 = train(*dir_, "tp2dp2", 4, {{"--tensor-model-parallel-size", "2"}});
  expect_parity(tp2dp2, *single_, 1e-5, "TP=2 x DP=2");
  const TrainRun tp2dp2z = train(*dir_, "tp2dp2z", 4,
                                 {{"--tensor-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""}});
  expect_parity(tp2dp2z, *single_, 1e-5, "TP=2 x DP=2, distributed optimizer");
}

TEST(TrainParallelLayout, TensorParallelSizeThatDoesNotFitFailsAtOnce) {
  TempDir dir;
  auto r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {{"--tensor-model-parallel-size", "2"}}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the world size 3 is not divisible by --tensor-model-parallel-size 2"), std::string::npos)
      << r.output;
  r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {{"--tensor-model-parallel-size", "3"}}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--tensor-model-parallel-size 3 does not divide --num-attention-heads 2"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "work started before the layout was checked";
}


}  // namespace
