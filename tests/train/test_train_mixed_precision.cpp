// defines: tests of mixed precision in `lmforge train gpt`: --bf16 and --fp16 training of a tiny GPT tracks the fp32
//          losses (within a stated tolerance) without being fp32 in disguise; bf16 under data and tensor
//          parallelism; fp16 loss scaling as Megatron's DynamicGradScaler (a forced overflow skips the iteration
//          and halves the scale, logged as Megatron logs it); the scaler's state resumes exactly from a checkpoint;
//          the start-up line naming the path of bf16 matrix products and why
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

#include "kernels/ops.h"
#include "train/mixed_precision.h"
#include "train_run_util.h"
#include "trainer_test_util.h"

namespace {

using namespace train_runs;
using lmforge::optim::LossScaler;
using lmforge::train::MixedPrecisionOptions;
using lmforge::train::TrainOptions;

// ---- the start-up log ---------------------------------------------------------------------------------------------

// A --bf16 run's log says what runs its matrix products on the CPU and why (kernels/cpu/lowp.h's choice: oneDNN's
// bf16 matmul where the CPU has AVX512-BF16 or AMX, else fp32 products of the widened bf16 operands).
TEST(PrecisionLog, Bf16NamesTheMatrixProductPathAndWhy) {
  MixedPrecisionOptions o;
  o.bf16 = true;
  const std::string log = lmforge::train::precision_summary(o, lmforge::train::bf16_gemm_description(
                                                                   lmforge::kernels::Device::CPU));
  EXPECT_NE(log.find("\nbf16 matrix products: " + lmforge::kernels::bf16_gemm_cpu_path() + "\n"), std::string::npos)
      << log;
  const bool forced = std::getenv("LMFORGE_CPU_BF16_GEMM") != nullptr;
  if (!forced && !lmforge::kernels::bf16_gemm_native()) {
    EXPECT_NE(log.find(std::string("bf16 matrix products: fp32 products of widened bf16 operands (this CPU has no "
                                   "AVX512-BF16/AMX); ") +
                       lmforge::kernels::kWidenedWeightsNote + "; " + lmforge::kernels::kWidenedSpeedNote + "\n"),
              std::string::npos)
        << log;
  }
  std::printf("[ precision ] %s", log.c_str());
  o.bf16 = false;
  EXPECT_EQ(lmforge::train::precision_summary(o, "x").find("bf16 matrix products"), std::string::npos);
}

// ---- the flags as the grad scaler's settings (the scaler's rules: tests/optim/test_grad_scaler.cpp) ------------

TEST(LossScaleOptions, Fp16AloneScalesUnderTheFlagsValues) {
  MixedPrecisionOptions o;
  o.fp16 = true;
  o.loss_scale = 4096;
  o.initial_loss_scale = 1024;
  o.min_loss_scale = 256;
  o.loss_scale_window = 3;
  o.hysteresis = 5;
  const lmforge::optim::LossScaleOptions s = lmforge::train::loss_scale_options(o);
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.loss_scale, 4096);
  EXPECT_EQ(s.initial_loss_scale, 1024);
  EXPECT_EQ(s.min_loss_scale, 256);
  EXPECT_EQ(s.loss_scale_window, 3);
  EXPECT_EQ(s.hysteresis, 5);
  // bf16 and fp32: inactive.
  MixedPrecisionOptions bf;
  bf.bf16 = true;
  EXPECT_FALSE(LossScaler(lmforge::train::loss_scale_options(bf)).active());
  EXPECT_FALSE(LossScaler(lmforge::train::loss_scale_options(MixedPrecisionOptions{})).active());
}

// ---- training runs through the executable ------------------------------------------------------------------------

// The runs here take 20 iterations, not the layout tests' 10: the precisions' bounds below are over 20 steps, and
// the fp16 runs from an overflowing scale need iterations left to train after their skips.
Flags twenty(Flags flags) {
  flags["--train-iters"] = "20";
  flags["--eval-interval"] = "10";
  return flags;
}
TrainRun train20(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {},
                 const std::string& launcher = "") {
  return train(dir, name, np, twenty(overrides), launcher);
}

// One fp32 run shared by the tests (20 iterations, dropout 0.1).
class MixedPrecisionRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    fp32_ = new TrainRun(train_reference(*dir_, "fp32", twenty({})));
  }
  static void TearDownTestSuite() {
    delete fp32_;
    delete dir_;
  }
  static inline TempDir* dir_ = nullptr;
  static inline TrainRun* fp32_ = nullptr;
};

// Tracks fp32 within `tolerance` (relative, every iteration) and differs from it by more than fp32 reduction-order
// noise: the fp32 data- and tensor-parallel runs agree with one process within 1e-6 in the loss and 1e-5 in the
// gradient norm (test_train_parallel), so a larger difference in either is the low precision at work.
void expect_tracks(const TrainRun& got, const TrainRun& fp32, double tolerance, const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  ASSERT_EQ(got.loss.size(), fp32.loss.size()) << what << ":\n" << got.output;
  ASSERT_EQ(got.loss.size(), 20u);
  const double d = max_relative_difference(got.loss, fp32.loss);
  const double g = max_relative_difference(got.grad_norm, fp32.grad_norm);
  std::printf("[ precision ] %s: max relative difference from fp32 over %zu steps: loss %.3g, grad norm %.3g "
              "(final loss %.4f vs %.4f)\n",
              what.c_str(), got.loss.size(), d, g, got.loss.back(), fp32.loss.back());
  EXPECT_LT(d, tolerance) << what;
  EXPECT_LT(g, 20 * tolerance) << what;
  EXPECT_GT(std::max(d / 1e-6, g / 1e-5), 3.0) << what << " is fp32 in disguise";
  EXPECT_LT(got.loss.back(), got.loss.front() - 0.1f) << what << " did not train";
}

// bf16 (8 significant bits) moves the losses of this tiny model by ~1e-4 relative over 20 steps (they sit near
// log V); 1e-3 is the bound.
TEST_F(MixedPrecisionRuns, Bf16TracksFp32) {
  const TrainRun bf16 = train20(*dir_, "bf16", 0, {{"--bf16", ""}});
  EXPECT_NE(bf16.output.find("precision: bf16"), std::string::npos) << bf16.output;
  EXPECT_NE(bf16.output.find("loss scale: 1.0 |"), std::string::npos) << bf16.output;
  EXPECT_NE(bf16.output.find("\nbf16 matrix products: " + lmforge::kernels::bf16_gemm_cpu_path() + "\n"),
            std::string::npos)
      << bf16.output;
  expect_tracks(bf16, *fp32_, 1e-3, "bf16");
}

// The other CPU path of the bf16 products, forced: fp32 products of widened operands (with the weights' fp32
// mirror) where this CPU has native bf16 products, else oneDNN's (which it has wherever it has AVX-512). Both
// track fp32 within bf16's bound, and they agree with each other as closely (the order of the fp32 sums differs).
TEST_F(MixedPrecisionRuns, Bf16BothProductPathsTrackFp32) {
  const bool native = lmforge::kernels::bf16_gemm_native();
  const TrainRun plain = train20(*dir_, "bf16-plain", 0, {{"--bf16", ""}});
  const TrainRun other = train20(*dir_, "bf16-other", 0, {{"--bf16", ""}},
                                 std::string("env LMFORGE_CPU_BF16_GEMM=") + (native ? "widen " : "native "));
  if (!native && other.status != 0 && other.output.find("bf16") != std::string::npos &&
      other.output.find("AVX-512") != std::string::npos)
    GTEST_SKIP() << "no native bf16 matmul on this CPU: " << other.output.substr(0, 400);
  const TrainRun& widened = native ? other : plain;
  EXPECT_NE(widened.output.find(std::string("fp32 products of widened bf16 operands")), std::string::npos)
      << widened.output;
  EXPECT_NE(widened.output.find(lmforge::kernels::kWidenedWeightsNote), std::string::npos) << widened.output;
  EXPECT_NE(widened.output.find(lmforge::kernels::kWidenedSpeedNote), std::string::npos) << widened.output;
  expect_tracks(plain, *fp32_, 1e-3, "bf16");
  expect_tracks(other, *fp32_, 1e-3, native ? "bf16, widened products" : "bf16, native products");
  ASSERT_EQ(plain.loss.size(), other.loss.size());
  const double d = max_relative_difference(other.loss, plain.loss);
  std::printf("[ precision ] bf16 native against widened products: max relative loss difference %.3g\n", d);
  EXPECT_LT(d, 1e-3);
}

// fp16 (11 significant bits) with a loss scale that never overflows here: closer to fp32 than bf16, no skips.
TEST_F(MixedPrecisionRuns, Fp16WithoutOverflowTracksFp32) {
  const TrainRun fp16 = train20(*dir_, "fp16", 0, {{"--fp16", ""}, {"--initial-loss-scale", "1024"}});
  EXPECT_NE(fp16.output.find("precision: fp16"), std::string::npos) << fp16.output;
  EXPECT_EQ(fp16.output.find("number of skipped iterations:   1"), std::string::npos) << fp16.output;
  expect_tracks(fp16, *fp32_, 1e-4, "fp16");
}

// bf16 under data parallelism (fp32 reductions) and tensor parallelism (bf16 activations summed in fp32) tracks
// the single-process bf16 run; the order of sums differs, which bf16 rounding can amplify a little.
TEST_F(MixedPrecisionRuns, Bf16DataAndTensorParallel) {
  const TrainRun single = train20(*dir_, "bf16-single", 0, {{"--bf16", ""}});
  ASSERT_EQ(single.status, 0) << single.output;
  const TrainRun dp = train20(*dir_, "bf16-dp2", 2, {{"--bf16", ""}});
  const TrainRun tp = train20(*dir_, "bf16-tp2", 2, {{"--bf16", ""}, {"--tensor-model-parallel-size", "2"}});
  for (const auto* r : {&dp, &tp}) {
    ASSERT_EQ(r->status, 0) << r->output;
    ASSERT_EQ(r->loss.size(), single.loss.size());
    const double d = max_relative_difference(r->loss, single.loss);
    std::printf("[ precision ] bf16 %s: max relative loss difference from one bf16 process %.3g\n",
                r == &dp ? "DP=2" : "TP=2", d);
    EXPECT_LT(d, 1e-2) << r->output;
  }
}

// A loss scale of 2^24 overflows fp16 at once: with --hysteresis 1 every such iteration is skipped and halves the
// scale until the gradients fit; the skipped iterations leave the weights and schedule alone.
TEST_F(MixedPrecisionRuns, Fp16OverflowSkipsTheIterationAndHalvesTheScale) {
  const TrainRun r = train20(*dir_, "fp16-overflow", 0,
                           {{"--fp16", ""}, {"--initial-loss-scale", "16777216"}, {"--hysteresis", "1"}});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream in(r.output);
  int skipped = 0, line_no = 0;
  double previous_scale = 16777216.0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(" iteration ", 0) != 0) continue;
    line_no++;
    const size_t at = line.find("loss scale: ");
    ASSERT_NE(at, std::string::npos) << line;
    const double scale = std::stod(line.substr(at + 12));
    const bool was_skipped = line.find("number of skipped iterations:   1") != std::string::npos;
    if (was_skipped) {
      skipped++;
      EXPECT_EQ(scale, previous_scale / 2) << line;  // halved by this iteration's overflow
      EXPECT_EQ(line.find("lm loss:"), std::string::npos) << "a skipped iteration reports no loss: " << line;
    } else {
      EXPECT_EQ(scale, previous_scale) << line;  // a 1000-iteration window: no growth in this run
    }
    previous_scale = scale;
  }
  EXPECT_EQ(line_no, 20);
  EXPECT_GE(skipped, 1) << r.output;
  EXPECT_LT(skipped, 20) << "the scale never came down far enough:\n" << r.output;
  std::printf("[ precision ] fp16 from scale 2^24: %d skipped iterations, final scale %.1f\n", skipped,
              previous_scale);
}

// fp16 on two data-parallel ranks, from a scale that overflows at first: the gradients are rounded to fp16 storage
// bucket by bucket before each bucket's reduction starts. Rounding them after the overlapped reductions had started
// (while MPI still read the buffer) made the same command skip different iterations from run to run; two runs must
// now print identical iteration lines (losses, grad norms, skips, scales) and still train.
TEST_F(MixedPrecisionRuns, Fp16DataParallelIsDeterministic) {
  const Flags flags = {{"--fp16", ""}, {"--initial-loss-scale", "16777216"}, {"--hysteresis", "1"}};
  const TrainRun a = train20(*dir_, "fp16-dp2-a", 2, flags), b = train20(*dir_, "fp16-dp2-b", 2, flags);
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  auto iteration_lines = [](const std::string& out) {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(" iteration ", 0) == 0) lines.push_back(line.substr(line.find("learning rate")));  // (not the timings)
    return lines;
  };
  const std::vector<std::string> la = iteration_lines(a.output), lb = iteration_lines(b.output);
  ASSERT_EQ(la.size(), 20u) << a.output;
  EXPECT_EQ(la, lb) << "run 1:\n" << a.output << "\nrun 2:\n" << b.output;
  EXPECT_NE(a.output.find("number of skipped iterations:   1"), std::string::npos) << a.output;
  ASSERT_FALSE(a.loss.empty());
  EXPECT_LT(a.loss.back(), a.loss.front() - 0.1f) << a.output;
}

// A resumed fp16 run continues with the saved scale and trackers: bit-identical to an uninterrupted one, with the
// scale changing during the run (window 2 doubles it every other clean step until it overflows).
TEST(MixedPrecisionResume, Fp16ScalerStateResumesExactly) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_vocab_options(tmp);
  o.precision.fp16 = true;
  o.precision.initial_loss_scale = 65536;
  o.precision.loss_scale_window = 2;
  o.precision.hysteresis = 1;
  const auto history = trainer_tests::expect_resume_bit_identical(o);
  bool changed = false;
  for (const auto& h : history) changed |= h.loss_scale != 65536;
  EXPECT_TRUE(changed) << "the scale never moved: the test would not see a lost scaler state";
}

// bf16: the same resume, the working copy rebuilt from the loaded fp32 weights.
TEST(MixedPrecisionResume, Bf16ResumesExactly) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_vocab_options(tmp);
  o.precision.bf16 = true;
  trainer_tests::expect_resume_bit_identical(o);
}

TEST(MixedPrecisionFlags, Fp16AndBf16ExcludeEachOther) {
  TempDir tmp;
  TrainOptions o = trainer_tests::tiny_vocab_options(tmp);
  o.precision.fp16 = o.precision.bf16 = true;
  std::ostringstream log;
  EXPECT_THROW(lmforge::train::Trainer(o, log), std::exception);
}

}  // namespace
