// defines: tests of activation recomputation in `lmforge train gpt`: selective, full uniform, full block and the
//          v1 --checkpoint-activations give bit-identical losses and gradient norms to a run that keeps every
//          activation (fp32 and bf16, with dropout, so the recomputed forward must redraw the same masks); the flag
//          rules are Megatron's
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "train_run_util.h"
#include "trainer_test_util.h"

namespace {

using namespace train_runs;

void expect_identical(const TrainRun& got, const TrainRun& want, const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(want.status, 0) << want.output;
  ASSERT_EQ(got.loss.size(), 6u) << got.output;
  ASSERT_EQ(got.loss.size(), want.loss.size());
  EXPECT_EQ(std::memcmp(got.loss.data(), want.loss.data(), got.loss.size() * sizeof(float)), 0) << what;
  ASSERT_EQ(got.grad_norm.size(), want.grad_norm.size());
  EXPECT_EQ(std::memcmp(got.grad_norm.data(), want.grad_norm.data(), got.grad_norm.size() * sizeof(float)), 0)
      << what;
  EXPECT_EQ(got.valid, want.valid) << what;
  EXPECT_NE(got.output.find("activation recomputation:"), std::string::npos) << got.output;
}

// Three layers, so uniform chunks of two leave a short last chunk and block recomputes some layers but not all.
// Six iterations (evaluated at 3 and 6), not the 20 of the layout tests: every iteration draws new dropout masks
// that the recomputed forward must redraw, so bit-identical losses and gradient norms over 6 make the same claim
// (a mask or activation recomputed differently shows in the first iteration's gradient norm) in a third of the time.
const Flags kThreeLayers = {{"--num-layers", "3"}, {"--train-iters", "6"}, {"--eval-interval", "3"}};

Flags with(Flags extra) {
  Flags f = kThreeLayers;
  for (const auto& [k, v] : extra) f[k] = v;
  return f;
}

TEST(Recompute, EveryGranularityAndMethodGivesTheSameLossesBitForBit) {
  TempDir dir;
  const TrainRun plain = train(dir, "plain", 0, kThreeLayers);
  expect_identical(train(dir, "selective", 0, with({{"--recompute-activations", ""}})), plain, "selective");
  expect_identical(train(dir, "full-uniform", 0,
                         with({{"--recompute-granularity", "full"}, {"--recompute-method", "uniform"},
                               {"--recompute-num-layers", "2"}})),
                   plain, "full uniform 2");
  expect_identical(train(dir, "full-block", 0,
                         with({{"--recompute-granularity", "full"}, {"--recompute-method", "block"},
                               {"--recompute-num-layers", "2"}})),
                   plain, "full block 2");
  const TrainRun v1 = train(dir, "v1", 0, with({{"--checkpoint-activations", ""}}));
  expect_identical(v1, plain, "--checkpoint-activations");
  EXPECT_NE(v1.output.find("activation recomputation: full, uniform, 1 layer per chunk"), std::string::npos)
      << v1.output;
}

TEST(Recompute, Bf16FullRecomputationIsBitIdenticalToo) {
  TempDir dir;
  const TrainRun plain = train(dir, "bf16", 0, with({{"--bf16", ""}}));
  expect_identical(train(dir, "bf16-full", 0, with({{"--bf16", ""}, {"--checkpoint-activations", ""},
                                                   {"--checkpoint-num-layers", "2"}})),
                   plain, "bf16 --checkpoint-activations 2");
}

TEST(Recompute, TensorParallelSelectiveAndFullAreBitIdentical) {
  TempDir dir;
  const TrainRun plain = train(dir, "tp", 2, with({{"--tensor-model-parallel-size", "2"}}));
  expect_identical(train(dir, "tp-full", 2, with({{"--tensor-model-parallel-size", "2"},
                                                 {"--checkpoint-activations", ""}})),
                   plain, "TP=2 full");
  expect_identical(train(dir, "tp-selective", 2, with({{"--tensor-model-parallel-size", "2"},
                                                      {"--recompute-activations", ""}})),
                   plain, "TP=2 selective");
}

TEST(Recompute, FlagRulesAreMegatrons) {
  TempDir tmp;
  auto refused = [&](auto set, const std::string& message) {
    lmforge::train::TrainOptions o = trainer_tests::tiny_vocab_options(tmp);
    set(o);
    try {
      lmforge::train::validate_train_options(o);
      ADD_FAILURE() << "accepted; expected: " << message;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  using O = lmforge::train::TrainOptions;
  refused([](O& o) { o.recompute_granularity = "full"; }, "needs --recompute-method");
  refused([](O& o) { o.recompute_activations = true, o.recompute_method = "block"; }, "not supported");
  refused([](O& o) { o.recompute_granularity = "everything"; }, "full or selective");
  refused([](O& o) { o.recompute_granularity = "full", o.recompute_method = "uniform", o.recompute_num_layers = 9; },
          "--recompute-num-layers");
  // (Megatron v1's --checkpoint-activations / --checkpoint-num-layers: tests/cli/test_flag_aliases.cpp.)
}

}  // namespace
