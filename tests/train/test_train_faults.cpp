// Distributed `lmforge train gpt` across layouts and failures: a checkpoint written by TP = 2 x DP = 2 with the
// distributed optimizer resumes under DP = 2 and then TP = 2 and continues the uninterrupted run, every saved
// model one whole Hugging Face model; a world size that does not fit the batch fails at once; a rank that errors
// or is SIGKILLed ends the job non-zero within seconds (then another layout resumes); and a run across two
// network namespaces over TCP reproduces one process.
#include "train_run_util.h"

namespace {

using namespace train_runs;

TEST_F(TrainParallel, CheckpointFromOneLayoutResumesUnderAnother) {
  const std::string ckpt = dir_->file("ckpt");
  // TP = 2 × DP = 2 with a sharded optimizer stops at iteration 4; 2 replicated data-parallel ranks (TP = 1)
  // resume to 7; then TP = 2 alone resumes to 10. Losses continue the uninterrupted single-process run.
  const TrainRun first = train(*dir_, "first", 4,
                          {{"--use-distributed-optimizer", ""}, {"--tensor-model-parallel-size", "2"},
                           {"--save", ckpt}, {"--exit-interval", "4"}});
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(first.loss.size(), 4u) << first.output;
  const TrainRun second = train(*dir_, "second", 2, {{"--save", ckpt}, {"--load", ckpt}, {"--exit-interval", "7"}});
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("loaded checkpoint"), std::string::npos) << second.output;
  const TrainRun third = train(*dir_, "third", 2, {{"--save", ckpt}, {"--load", ckpt}, {"--tensor-model-parallel-size", "2"}});
  ASSERT_EQ(third.status, 0) << third.output;
  TrainRun resumed = first;
  resumed.loss.insert(resumed.loss.end(), second.loss.begin(), second.loss.end());
  resumed.loss.insert(resumed.loss.end(), third.loss.begin(), third.loss.end());
  resumed.grad_norm.insert(resumed.grad_norm.end(), second.grad_norm.begin(), second.grad_norm.end());
  resumed.grad_norm.insert(resumed.grad_norm.end(), third.grad_norm.begin(), third.grad_norm.end());
  resumed.valid.insert(resumed.valid.end(), second.valid.begin(), second.valid.end());
  resumed.valid.insert(resumed.valid.end(), third.valid.begin(), third.valid.end());
  expect_parity(resumed, *single_, 1e-5, "TP=2 x DP=2 ZeRO -> DP=2 -> TP=2, resumed");
  // Every saved model is one whole Hugging Face model, whatever the layout that wrote it.
  for (const char* iter : {"iter_0000004", "iter_0000007", "iter_0000010"}) {
    const std::string model = read_file(ckpt + "/" + iter + "/model.safetensors");
    EXPECT_NE(model.find("\"transformer.wte.weight\":{\"dtype\":\"F32\",\"shape\":[1024,32]"), std::string::npos)
        << iter << ": " << model.substr(0, 300);
    EXPECT_NE(model.find("\"transformer.h.1.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[32,96]"),
              std::string::npos)
        << iter;
  }
}

TEST(TrainParallelLayout, WorldSizeThatDoesNotFitTheBatchFailsAtOnce) {
  TempDir dir;
  auto r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--global-batch-size 4 is not divisible by --micro-batch-size 1 × data-parallel size 3 "
                          "(world size 3)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "work started before the layout was checked";
}

TEST(TrainParallelFaults, ErrorOnOneRankEndsTheJobWithItsReason) {
  TempDir dir;
  // Only rank 0 writes checkpoints; --save names a regular file, so rank 0 fails at iteration 2 while the others
  // wait for it in a collective.
  lmforge::testing::write_file(dir.file("not-a-dir"), "x");
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command("timeout 60 " + mpirun_prefix(2) +
                       train_args(dir, {{"--save", dir.file("not-a-dir")}, {"--save-interval", "2"}}));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_LT(seconds, 30);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("lmforge train: error: rank 0 of 2 \\([^)]*\\): .*not-a-dir")))
      << r.output;
}

TEST(TrainParallelFaults, SigkilledRankEndsTheJobNonZeroWithin30SecondsThenAnotherLayoutResumes) {
  TempDir dir;
  const std::string log = dir.file("run.log"), ckpt = dir.file("ckpt");
  const Flags flags = {{"--global-batch-size", "6"}, {"--train-iters", "100000"}, {"--save", ckpt},
                       {"--save-interval", "2"}, {"--eval-iters", "0"}};
  const std::string cmd = "exec env OMP_NUM_THREADS=1 " + mpirun_prefix(3) + train_args(dir, flags) + " > " + log +
                          " 2>&1";
  // Once training runs (a few iterations logged), SIGKILL one rank.
  KilledRun killed;
  ASSERT_NO_FATAL_FAILURE(kill_rank_mid_run(cmd, log, 3, [](std::vector<pid_t>& ranks) { return ranks.back(); },
                                            "a rank", killed));
  const int status = killed.status;
  const double seconds = killed.seconds;
  std::printf("[ fault ] job ended %.2f s after a rank was SIGKILLed\n", seconds);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << read_file(log);
  EXPECT_LT(seconds, 30);
  // No rank outlives the job (a zombie awaiting its reaper counts as gone).
  auto alive = [](pid_t p) {
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const size_t close = s.rfind(')');
    return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z' && s[close + 2] != 'X';
  };
  for (pid_t p : killed.ranks) {
    const auto t = std::chrono::steady_clock::now();
    while (alive(p) && seconds_since(t) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(alive(p)) << "rank " << p << " still running 5 s after mpirun ended";
  }

  // 2 ranks with the distributed optimizer resume from the last checkpoint the 3 ranks wrote and go on.
  const std::string pointer = read_file(ckpt + "/latest_checkpointed_iteration.txt");
  const long saved = std::stol(pointer);
  EXPECT_GE(saved, 2) << pointer;
  Flags resume = flags;
  resume["--load"] = ckpt;
  resume["--exit-interval"] = "1";
  resume["--use-distributed-optimizer"] = "";
  auto r = run_command("timeout 60 env OMP_NUM_THREADS=1 " + mpirun_prefix(2) + train_args(dir, resume));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("at iteration " + std::to_string(saved) + " (consumed samples: train " +
                          std::to_string(saved * 6)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("exiting at iteration " + std::to_string(saved + 1)), std::string::npos) << r.output;
}

TEST_F(TrainParallel, TwoHostsAsNetworkNamespacesOverTcpReproduceOneProcess) {
  NetnsPair hosts(*dir_, 232);
  LMFORGE_REQUIRE_NETNS(hosts);
  const TrainRun run = train(*dir_, "netns", 4, {{"--use-distributed-optimizer", ""}}, hosts.mpirun(2));
  expect_parity(run, *single_, 1e-6, "2 hosts x 2 ranks over TCP, distributed optimizer");
}


}  // namespace
