// defines: tests of mixed precision and activation recomputation in `lmforge train bert` and `lmforge train t5`
//          (tiny models on Megatron's sentence-level sample with a 2,996-word vocabulary, dropout on): every recomputation setting gives
//          bit-identical fp32 losses and gradient norms; --bf16 and --fp16 track the fp32 losses within stated
//          tolerances without being fp32 in disguise; a forced fp16 overflow skips the iteration and halves the scale
#include <algorithm>
#include <cstring>
#include <sstream>

#include "train/bert_t5_run_util.h"

namespace {

using namespace train_runs;
using namespace bert_t5_runs;

// The tiny models on the sample with 2,996 words (bert_t5_runs::tiny_vocab(): these tests compare runs with one
// another).
ModelRun run_tiny(const TempDir& dir, const std::string& model, const std::string& name, int np, const Flags& flags = {}) {
  return run(dir, model, name, np, tiny_vocab(flags));
}

std::vector<std::string> tags_of(const std::string& model) {
  if (model == "bert") return {"lm loss", "sop loss", "grad-norm", "lm loss validation", "sop loss validation"};
  return {"lm loss", "grad-norm", "lm loss validation"};
}

void expect_bit_identical(const ModelRun& got, const ModelRun& want, const std::string& model,
                          const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(want.status, 0) << want.output;
  EXPECT_NE(got.output.find("activation recomputation:"), std::string::npos) << got.output;
  for (const std::string& tag : tags_of(model)) {
    const auto g = got.scalars.find(tag), w = want.scalars.find(tag);
    ASSERT_NE(w, want.scalars.end()) << tag;
    ASSERT_NE(g, got.scalars.end()) << what << " " << tag;
    ASSERT_EQ(g->second.size(), w->second.size()) << what << " " << tag;
    ASSERT_FALSE(w->second.empty()) << tag;
    EXPECT_EQ(std::memcmp(g->second.data(), w->second.data(), w->second.size() * sizeof(float)), 0)
        << what << " " << tag;
  }
}

// Two layers: uniform chunks of two hold the whole stack, block 1 recomputes one layer and keeps the other.
void expect_recomputation_is_exact(const std::string& model) {
  TempDir dir;
  const ModelRun plain = run_tiny(dir, model, "plain", 0);
  expect_bit_identical(run_tiny(dir, model, "selective", 0, {{"--recompute-activations", ""}}), plain, model, "selective");
  expect_bit_identical(run_tiny(dir, model, "uniform", 0,
                           {{"--recompute-granularity", "full"}, {"--recompute-method", "uniform"},
                            {"--recompute-num-layers", "2"}}),
                       plain, model, "full uniform 2");
  expect_bit_identical(run_tiny(dir, model, "block", 0,
                           {{"--recompute-granularity", "full"}, {"--recompute-method", "block"},
                            {"--recompute-num-layers", "1"}}),
                       plain, model, "full block 1");
  const ModelRun v1 = run_tiny(dir, model, "v1", 0, {{"--checkpoint-activations", ""}});
  expect_bit_identical(v1, plain, model, "--checkpoint-activations");
  EXPECT_NE(v1.output.find("activation recomputation: full, uniform, 1 layer per chunk"), std::string::npos)
      << v1.output;
}

TEST(TrainBertRecompute, EverySettingGivesTheSameLossesBitForBit) { expect_recomputation_is_exact("bert"); }
TEST(TrainT5Recompute, EverySettingGivesTheSameLossesBitForBit) { expect_recomputation_is_exact("t5"); }

// Within `tolerance` of fp32 (relative, every logged value of the training losses; the gradient norm within 20x
// that) and further from it than fp32 reduction-order noise in the loss (1e-6) or the gradient norm (1e-5) — the
// parallel layouts agree with one process that closely (test_train_bert_t5_cli) — so the low precision is at work.
void expect_tracks(const ModelRun& got, const ModelRun& fp32, const std::string& model, double tolerance,
                   const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  double loss_diff = 0.0, grad_diff = 0.0;
  for (const std::string& tag : tags_of(model)) {
    if (tag.find("validation") != std::string::npos) continue;
    const std::vector<float>& g = got.scalars.at(tag);
    const std::vector<float>& w = fp32.scalars.at(tag);
    ASSERT_EQ(g.size(), w.size()) << what << " " << tag;
    ASSERT_EQ(g.size(), 10u) << tag;
    const double d = max_relative_difference(g, w);
    std::printf("[ precision ] %s %s: max relative difference from fp32 over %zu steps %.3g (last %.4f vs %.4f)\n",
                what.c_str(), tag.c_str(), g.size(), d, g.back(), w.back());
    if (tag == "grad-norm") {
      EXPECT_LT(d, 20 * tolerance) << what << " " << tag;
      grad_diff = d;
    } else {
      EXPECT_LT(d, tolerance) << what << " " << tag;
      loss_diff = std::max(loss_diff, d);
    }
  }
  EXPECT_GT(std::max(loss_diff / 1e-6, grad_diff / 1e-5), 3.0) << what << " is fp32 in disguise";
}

// bf16 (8 significant bits): the tiny models' losses (near log V ≈ 10) move by ~5e-5 relative over 10 steps and
// their gradient norms by ~3e-3; 1e-3 bounds the losses. fp16 (11 bits) with a scale that does not overflow: ten
// times closer (1e-4).
void expect_mixed_precision_tracks(const std::string& model) {
  TempDir dir;
  const ModelRun fp32 = run_tiny(dir, model, "fp32", 0);
  const ModelRun bf16 = run_tiny(dir, model, "bf16", 0, {{"--bf16", ""}});
  EXPECT_NE(bf16.output.find("precision: bf16"), std::string::npos) << bf16.output;
  expect_tracks(bf16, fp32, model, 1e-3, model + " bf16");
  const ModelRun fp16 = run_tiny(dir, model, "fp16", 0, {{"--fp16", ""}, {"--initial-loss-scale", "1024"}});
  EXPECT_NE(fp16.output.find("precision: fp16"), std::string::npos) << fp16.output;
  EXPECT_EQ(fp16.output.find("number of skipped iterations:   1"), std::string::npos) << fp16.output;
  expect_tracks(fp16, fp32, model, 1e-4, model + " fp16");
}

TEST(TrainBertMixedPrecision, Bf16AndFp16TrackFp32) { expect_mixed_precision_tracks("bert"); }
TEST(TrainT5MixedPrecision, Bf16AndFp16TrackFp32) { expect_mixed_precision_tracks("t5"); }

// A loss scale of 2^24 overflows fp16 at once: with --hysteresis 1 each overflowing iteration is skipped (no loss
// logged) and halves the scale, until the gradients fit.
void expect_overflow_skips(const std::string& model) {
  TempDir dir;
  const ModelRun r =
      run_tiny(dir, model, "overflow", 0, {{"--fp16", ""}, {"--initial-loss-scale", "16777216"}, {"--hysteresis", "1"}});
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream in(r.output);
  int skipped = 0, lines = 0;
  double previous = 16777216.0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(" iteration ", 0) != 0) continue;
    lines++;
    const size_t at = line.find("loss scale: ");
    ASSERT_NE(at, std::string::npos) << line;
    const double scale = std::stod(line.substr(at + 12));
    if (line.find("number of skipped iterations:   1") != std::string::npos) {
      skipped++;
      EXPECT_EQ(scale, previous / 2) << line;
      EXPECT_EQ(line.find("lm loss:"), std::string::npos) << line;
    } else {
      EXPECT_EQ(scale, previous) << line;
    }
    previous = scale;
  }
  EXPECT_EQ(lines, 10) << r.output;
  EXPECT_GE(skipped, 1) << r.output;
  EXPECT_LT(skipped, 10) << r.output;
}

TEST(TrainBertMixedPrecision, Fp16OverflowSkipsTheIterationAndHalvesTheScale) { expect_overflow_skips("bert"); }
TEST(TrainT5MixedPrecision, Fp16OverflowSkipsTheIterationAndHalvesTheScale) { expect_overflow_skips("t5"); }

}  // namespace
