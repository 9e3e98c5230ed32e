// `lmforge train gpt --pipeline-model-parallel-size`: P = 2, P = 4, T = 2 × P = 2, P = 2 × D = 2 and
// T = 2 × P = 2 × D = 2 (8 ranks), with and without the distributed optimizer, and uneven first/last stages,
// reproduce the single-process losses, gradient norms and validation losses of a 4-layer GPT over 10 iterations
// (relative difference < 1e-5); a checkpoint written by one layout resumes under another and in one process and
// continues the uninterrupted run; a stage that dies ends the job within 30 s; two hosts (network namespaces)
// run one stage each over TCP; layouts that do not fit fail before any work; --bf16 and --fp16 stages track the
// one-process mixed-precision run (fp16 skipping the same overflowing iterations), and recomputation inside the
// stages is bitwise the same as none.
#include "train_run_util.h"

namespace {

using namespace train_runs;

// Every run here trains the 4-layer model (so that 4 stages have a layer each).
Flags four(Flags flags) {
  flags["--num-layers"] = "4";
  return flags;
}

class PipelineParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    single_ = new TrainRun(train_reference(*dir_, "single", four({})));
  }
  static void TearDownTestSuite() {
    delete single_;
    delete dir_;
  }
  static inline TempDir* dir_ = nullptr;
  static inline TrainRun* single_ = nullptr;
};

TEST_F(PipelineParallel, TwoAndFourStagesReproduceOneProcess) {
  const TrainRun p2 = train(*dir_, "p2", 2, four({{"--pipeline-model-parallel-size", "2"}}));
  expect_parity(p2, *single_, 1e-5, "P=2");
  // The last rank logs (Megatron's print_rank_last), with the rank map and each stage's bubble.
  EXPECT_NE(p2.output.find("pipeline parallel: 2 stages (layers per stage: 2 2), 1F1B schedule"), std::string::npos)
      << p2.output;
  EXPECT_NE(p2.output.find("stage 0: [0]; stage 1: [1]"), std::string::npos) << p2.output;
  EXPECT_NE(p2.output.find("pipeline stage 1: per step busy"), std::string::npos) << p2.output;
  const TrainRun p4 = train(*dir_, "p4", 4, four({{"--pipe-parallel-size", "4"}}));
  expect_parity(p4, *single_, 1e-5, "P=4 (--pipe-parallel-size)");
  const TrainRun uneven = train(*dir_, "uneven", 2,
                                four({{"--pipeline-model-parallel-size", "2"},
                                      {"--decoder-first-pipeline-num-layers", "1"},
                                      {"--decoder-last-pipeline-num-layers", "3"}}));
  expect_parity(uneven, *single_, 1e-5, "P=2, layers 1 + 3");
  EXPECT_NE(uneven.output.find("layers per stage: 1 3"), std::string::npos) << uneven.output;
}

TEST_F(PipelineParallel, PipelineWithTensorAndDataParallelReproducesOneProcess) {
  const TrainRun tp2pp2 = train(*dir_, "tp2pp2", 4,
                                four({{"--pipeline-model-parallel-size", "2"}, {"--tensor-model-parallel-size", "2"}}));
  expect_parity(tp2pp2, *single_, 1e-5, "T=2 x P=2");
  const TrainRun pp2dp2 = train(*dir_, "pp2dp2", 4, four({{"--pipeline-model-parallel-size", "2"}}));
  expect_parity(pp2dp2, *single_, 1e-5, "P=2 x D=2");
  const TrainRun pp2dp2z = train(*dir_, "pp2dp2z", 4,
                                 four({{"--pipeline-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""}}));
  expect_parity(pp2dp2z, *single_, 1e-5, "P=2 x D=2, distributed optimizer");
  const Flags three_d = four({{"--pipeline-model-parallel-size", "2"}, {"--tensor-model-parallel-size", "2"},
                              {"--global-batch-size", "8"}});
  Flags single_8 = four({{"--global-batch-size", "8"}});
  const TrainRun want = train(*dir_, "single-gb8", 0, single_8);
  const TrainRun t2p2d2 = train(*dir_, "t2p2d2", 8, three_d);
  expect_parity(t2p2d2, want, 1e-5, "T=2 x P=2 x D=2 (8 ranks)");
  EXPECT_NE(t2p2d2.output.find("stage 0: [0 1] [2 3]; stage 1: [4 5] [6 7]"), std::string::npos) << t2p2d2.output;
  Flags zero = three_d;
  zero["--use-distributed-optimizer"] = "";
  const TrainRun t2p2d2z = train(*dir_, "t2p2d2z", 8, zero);
  expect_parity(t2p2d2z, want, 1e-5, "T=2 x P=2 x D=2 (8 ranks), distributed optimizer");
}

TEST_F(PipelineParallel, CheckpointFromOneLayoutResumesUnderAnother) {
  const std::string ckpt = dir_->file("ckpt");
  // P = 2 × D = 2 with a sharded optimizer stops at 4; one process resumes to 7; T = 2 × P = 2 resumes to 10.
  const TrainRun first = train(*dir_, "first", 4,
                               four({{"--pipeline-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""},
                                     {"--save", ckpt}, {"--exit-interval", "4"}}));
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(first.loss.size(), 4u) << first.output;
  const TrainRun second = train(*dir_, "second", 0, four({{"--save", ckpt}, {"--load", ckpt}, {"--exit-interval", "7"}}));
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("loaded checkpoint"), std::string::npos) << second.output;
  const TrainRun third = train(*dir_, "third", 4,
                               four({{"--save", ckpt}, {"--load", ckpt}, {"--pipeline-model-parallel-size", "2"},
                                     {"--tensor-model-parallel-size", "2"}}));
  ASSERT_EQ(third.status, 0) << third.output;
  TrainRun resumed = first;
  for (const TrainRun* r : {&second, &third}) {
    resumed.loss.insert(resumed.loss.end(), r->loss.begin(), r->loss.end());
    resumed.grad_norm.insert(resumed.grad_norm.end(), r->grad_norm.begin(), r->grad_norm.end());
    resumed.valid.insert(resumed.valid.end(), r->valid.begin(), r->valid.end());
  }
  expect_parity(resumed, *single_, 1e-5, "P=2 x D=2 ZeRO -> 1 process -> T=2 x P=2, resumed");
  // Every saved model is one whole Hugging Face model (each tensor once), whatever the layout that wrote it.
  for (const char* iter : {"iter_0000004", "iter_0000007", "iter_0000010"}) {
    const std::string model = read_file(ckpt + "/" + iter + "/model.safetensors");
    uint64_t header_bytes = 0;  // safetensors: a little-endian u64 length, then the JSON header
    ASSERT_GE(model.size(), 8u) << iter;
    std::memcpy(&header_bytes, model.data(), 8);
    const std::string header = model.substr(8, header_bytes);
    for (const char* name : {"\"transformer.wte.weight\":{\"dtype\":\"F32\",\"shape\":[1024,32]",
                             "\"transformer.h.0.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[32,96]",
                             "\"transformer.h.3.mlp.c_proj.weight\":{\"dtype\":\"F32\",\"shape\":[128,32]",
                             "\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[32]"}) {
      const size_t at = header.find(name);
      EXPECT_NE(at, std::string::npos) << iter << ": " << name;
      EXPECT_EQ(header.find(name, at + 1), std::string::npos) << iter << ": twice: " << name;
    }
  }
}

// Stages exchange fp32 copies of bf16/fp16 activations (exact), so a mixed-precision pipeline tracks the one-process
// mixed-precision run; only the tied embedding's gradient is summed in another order (first + last stage).
TEST_F(PipelineParallel, Bf16AndFp16StagesTrackOneProcess) {
  const TrainRun one = train(*dir_, "bf16-single", 0, four({{"--bf16", ""}}));
  const TrainRun p2 = train(*dir_, "bf16-p2", 2, four({{"--bf16", ""}, {"--pipeline-model-parallel-size", "2"}}));
  ASSERT_EQ(p2.status, 0) << p2.output;
  ASSERT_EQ(one.status, 0) << one.output;
  ASSERT_EQ(p2.loss.size(), one.loss.size());
  const double d = max_relative_difference(p2.loss, one.loss);
  std::printf("[ parity ] bf16 P=2 against one bf16 process: max relative loss difference %.3g\n", d);
  EXPECT_LT(d, 1e-3) << p2.output;
  EXPECT_GT(max_relative_difference(p2.loss, single_->loss), 1e-6) << "bf16 ran as fp32";
  // fp16 from a scale that overflows: both stages skip the same iterations (the global norm, summed over the
  // pipeline, is inf on every stage when any stage overflowed), and the scale follows the one-process run's.
  const Flags fp16 = four({{"--fp16", ""}, {"--initial-loss-scale", "16777216"}, {"--hysteresis", "1"}});
  Flags staged = fp16;
  staged["--pipeline-model-parallel-size"] = "2";
  const TrainRun want = train(*dir_, "fp16", 0, fp16), got = train(*dir_, "fp16-p2", 2, staged);
  ASSERT_EQ(want.status, 0) << want.output;
  ASSERT_EQ(got.status, 0) << got.output;
  const auto s1 = read_scalars(dir_->file("tb-fp16")), s2 = read_scalars(dir_->file("tb-fp16-p2"));
  ASSERT_TRUE(s1.count("loss-scale") && s2.count("loss-scale"));
  EXPECT_EQ(s2.at("loss-scale"), s1.at("loss-scale"));
  EXPECT_LT(s1.at("loss-scale").back(), 16777216.0f) << "no overflow was forced";
  ASSERT_EQ(got.loss.size(), want.loss.size());
  const double d16 = max_relative_difference(got.loss, want.loss);
  std::printf("[ parity ] fp16 P=2 against one fp16 process: max relative loss difference %.3g\n", d16);
  EXPECT_LT(d16, 1e-5) << got.output;
}

// Megatron's recomputation inside each stage (full: chunks of the stage's own layers; selective: the attention
// core) recomputes bit for bit what the forward computed. Over 6 iterations (each drawing new dropout masks that
// the recomputed forward must redraw): a bitwise claim that 20 would only repeat.
TEST_F(PipelineParallel, RecomputationInsideStagesIsBitwiseTheSame) {
  const Flags p2 = four({{"--pipeline-model-parallel-size", "2"}, {"--train-iters", "6"}, {"--eval-interval", "3"}});
  const TrainRun plain = train(*dir_, "rc-plain", 2, p2);
  ASSERT_EQ(plain.status, 0) << plain.output;
  for (const Flags& extra : {Flags{{"--recompute-granularity", "full"}, {"--recompute-method", "uniform"},
                                   {"--recompute-num-layers", "1"}},
                             Flags{{"--recompute-granularity", "full"}, {"--recompute-method", "block"},
                                   {"--recompute-num-layers", "1"}},
                             Flags{{"--recompute-activations", ""}}}) {
    Flags flags = p2;
    flags.insert(extra.begin(), extra.end());
    const TrainRun r = train(*dir_, "rc", 2, flags);
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_EQ(r.loss.size(), 6u) << r.output;
    EXPECT_EQ(r.loss, plain.loss) << r.output;
    EXPECT_EQ(r.grad_norm, plain.grad_norm) << r.output;
    EXPECT_NE(r.output.find("activation recomputation:"), std::string::npos) << r.output;
  }
}

TEST_F(PipelineParallel, TwoHostsAsNetworkNamespacesRunOneStageEach) {
  NetnsPair hosts(*dir_, 234);
  LMFORGE_REQUIRE_NETNS(hosts);
  // Ranks are filled host by host (one slot each): stage 0 on the first host, stage 1 on the second.
  const TrainRun run = train(*dir_, "netns", 2, four({{"--pipeline-model-parallel-size", "2"}}), hosts.mpirun(1));
  expect_parity(run, *single_, 1e-5, "P=2 across 2 hosts over TCP");
}

TEST(PipelineFaults, AKilledStageEndsTheJobWithin30Seconds) {
  TempDir dir;
  const std::string log = dir.file("run.log");
  const Flags flags = four({{"--pipeline-model-parallel-size", "2"}, {"--train-iters", "100000"},
                            {"--eval-iters", "0"}});
  const std::string cmd = "exec env OMP_NUM_THREADS=1 " + mpirun_prefix(2) + train_args(dir, flags) + " > " + log +
                          " 2>&1";
  // Stage 0 dies while stage 1 waits for its activations.
  KilledRun killed;
  ASSERT_NO_FATAL_FAILURE(kill_rank_mid_run(cmd, log, 2,
                                            [](std::vector<pid_t>& ranks) {
                                              std::sort(ranks.begin(), ranks.end());
                                              return ranks.front();
                                            },
                                            "a stage", killed));
  const int status = killed.status;
  const double seconds = killed.seconds;
  std::printf("[ fault ] pipeline job ended %.2f s after stage 0 was SIGKILLed\n", seconds);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << read_file(log);
  EXPECT_NE(read_file(log).find("signal 9"), std::string::npos) << read_file(log);
}

TEST(PipelineFaults, AnErrorOnTheLastStageEndsTheJobWithItsReason) {
  TempDir dir;
  // Only the last rank writes TensorBoard: a regular file where its directory should be fails it alone.
  lmforge::testing::write_file(dir.file("not-a-dir"), "x");
  auto r = run_command("timeout 60 env OMP_NUM_THREADS=1 " + mpirun_prefix(2) +
                       train_args(dir, four({{"--pipeline-model-parallel-size", "2"},
                                             {"--tensorboard-dir", dir.file("not-a-dir")}})));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("lmforge train: error: rank 1 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not-a-dir"), std::string::npos) << r.output;
}

TEST(PipelineLayout, LayoutsThatDoNotFitFailAtOnce) {
  TempDir dir;
  auto r = run_command("timeout 60 " + mpirun_prefix(3) +
                       train_args(dir, four({{"--pipeline-model-parallel-size", "2"}})));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the world size 3 is not divisible by --tensor-model-parallel-size 1 × "
                          "--pipeline-model-parallel-size 2"),
            std::string::npos)
      << r.output;
  r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, four({{"--pipeline-model-parallel-size", "3"}})));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--num-layers 4 cannot be split over --pipeline-model-parallel-size 3: 4 layers do not "
                          "split evenly over 3 stages"),
            std::string::npos)
      << r.output;
  r = run_command("timeout 60 " + train_args(dir, four({{"--pipe-parallel-size", "2"},
                                                        {"--pipeline-model-parallel-size", "4"}})));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--pipe-parallel-size 2 and --pipeline-model-parallel-size 4 disagree"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "work started before the layout was checked";
}

}  // namespace
