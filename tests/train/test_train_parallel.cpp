// `lmforge train gpt` with data parallelism as users launch it (mpirun, as root, more ranks than cores): 2 and 4
// ranks, with gradient accumulation, and the distributed optimizer (ZeRO-1) reproduce the single-process losses
// of the same global batch (every iteration's loss at float precision from the TensorBoard file, relative
// difference < 1e-6 over 10 steps), the distributed optimizer bitwise equal to replicated AdamW with 1/N state;
// and --optimizer lamb / sgd under the distributed optimizer with shard boundaries inside tensors.
#include "train_run_util.h"

namespace {

using namespace train_runs;

TEST_F(TrainParallel, TwoAndFourDataParallelRanksReproduceOneProcess) {
  const TrainRun dp2 = train(*dir_, "dp2", 2);
  expect_parity(dp2, *single_, 1e-6, "DP=2");
  EXPECT_NE(dp2.output.find("data parallel: 2 ranks (mpi)"), std::string::npos) << dp2.output;
  const TrainRun dp4 = train(*dir_, "dp4", 4);
  expect_parity(dp4, *single_, 1e-6, "DP=4");
  // Gradient accumulation inside each rank as well: 8 samples, 2 micro-batches per rank.
  const TrainRun single8 = train(*dir_, "single8", 0, {{"--global-batch-size", "8"}});
  const TrainRun dp4x2 = train(*dir_, "dp4x2", 4, {{"--global-batch-size", "8"}});
  expect_parity(dp4x2, single8, 1e-6, "DP=4, 2 micro-batches per rank");
  // Small buckets: those inside the transformer blocks start reducing during the backward pass.
  const TrainRun small = train(*dir_, "dp2-small-buckets", 2, {{"--ddp-bucket-size", "5000"}});
  expect_parity(small, *single_, 1e-6, "DP=2, 5000-element buckets");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(small.output, m,
                                std::regex("data parallel: ([0-9]+) of ([0-9]+) bucket reductions started during")))
      << small.output;
  EXPECT_GT(std::stol(m[1]), 0) << small.output;
  EXPECT_EQ(std::stol(m[2]), 10 * 12) << small.output;  // 59,264 parameters in 5000-element buckets, 10 steps
}

// "optimizer state: X MB on this rank" from rank 0's log.
double optimizer_megabytes(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("optimizer: state ([0-9.]+) MB on this rank"))) return -1;
  return std::stod(m[1]);
}

TEST_F(TrainParallel, DistributedOptimizerEqualsDataParallelWithAQuarterOfTheState) {
  const TrainRun plain = train(*dir_, "plain4", 4);
  const TrainRun zero = train(*dir_, "zero4", 4, {{"--use-distributed-optimizer", ""}});
  expect_parity(zero, *single_, 1e-6, "DP=4 distributed optimizer");
  // Same reduction, same norm, same per-element update: bitwise the losses of replicated AdamW.
  EXPECT_EQ(zero.loss, plain.loss);
  EXPECT_EQ(zero.grad_norm, plain.grad_norm);
  const double full = optimizer_megabytes(plain.output), shard = optimizer_megabytes(zero.output);
  ASSERT_GT(full, 0) << plain.output;
  // (the log prints 3 decimals of ~0.5 and ~0.12 MB: the ratio is known to 0.005)
  EXPECT_NEAR(shard / full, 0.25, 0.005) << plain.output << zero.output;
  // One process with the flag: the whole state, same losses.
  const TrainRun zero1 = train(*dir_, "zero1", 0, {{"--use-distributed-optimizer", ""}});
  expect_parity(zero1, *single_, 1e-6, "1 rank distributed optimizer");
}


// LAMB's trust ratio needs each tensor's whole norms. With 5000-element buckets each of the 2 ranks owns half of
// every bucket, so shard boundaries fall inside wte (1024 x 32), every matrix and most vectors: the partial sums
// of p² and u² must be all-reduced for the losses to match one process. Dropout stays on (masks are keyed by the
// global micro-batch, so any layout drops the same elements) and is off in the --lamb-all-tensors run.
TEST_F(TrainParallel, LambWithTheDistributedOptimizerCuttingTensorsReproducesOneProcess) {
  const Flags lamb = {{"--optimizer", "lamb"}, {"--lr", "0.05"}};  // LAMB steps are relative: a larger lr
  const TrainRun single = train(*dir_, "lamb-single", 0, lamb);
  Flags zero = lamb;
  zero["--use-distributed-optimizer"] = "";
  zero["--ddp-bucket-size"] = "5000";
  const TrainRun zero2 = train(*dir_, "lamb-zero2", 2, zero);
  expect_parity(zero2, single, 1e-6, "DP=2 distributed LAMB, 5000-element buckets");
  EXPECT_NE(zero2.output.find("distributed lamb optimizer"), std::string::npos) << zero2.output;
  // Replicated LAMB under data parallelism: the same norms from whole tensors.
  Flags plain = lamb;
  plain["--ddp-bucket-size"] = "5000";
  const TrainRun plain2 = train(*dir_, "lamb-plain2", 2, plain);
  expect_parity(plain2, single, 1e-6, "DP=2 replicated LAMB");
  EXPECT_LT(max_relative_difference(zero2.loss, plain2.loss), 1e-6);

  // The trust ratio on every tensor, without dropout, default buckets (one bucket: the boundary cuts wte).
  Flags all = lamb;
  all["--lamb-all-tensors"] = "";
  all["--hidden-dropout"] = "0";
  all["--attention-dropout"] = "0";
  const TrainRun all_single = train(*dir_, "lamb-all-single", 0, all);
  all["--use-distributed-optimizer"] = "";
  const TrainRun all_zero2 = train(*dir_, "lamb-all-zero2", 2, all);
  expect_parity(all_zero2, all_single, 1e-6, "DP=2 distributed LAMB on all tensors, no dropout");
  EXPECT_NE(all_single.loss, single.loss);  // the flag changes the run
}

TEST_F(TrainParallel, SgdWithTheDistributedOptimizerReproducesOneProcess) {
  const Flags sgd = {{"--optimizer", "sgd"}, {"--lr", "1.0"}, {"--sgd-momentum", "0.9"}};
  const TrainRun single = train(*dir_, "sgd-single", 0, sgd);
  Flags zero = sgd;
  zero["--use-distributed-optimizer"] = "";
  zero["--ddp-bucket-size"] = "5000";
  const TrainRun zero2 = train(*dir_, "sgd-zero2", 2, zero);
  expect_parity(zero2, single, 1e-6, "DP=2 distributed SGD with momentum");
  // The distributed momentum buffers are half the replicated ones (4 bytes per parameter in all).
  EXPECT_NEAR(optimizer_megabytes(zero2.output), 59264 * 4 / 2 / 1e6, 0.001) << zero2.output;
}

}  // namespace
