// defines: tests of OptimizerParamScheduler against a Python transcription of Megatron's schedule (lr_schedule_reference.py)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "optim/lr_schedule.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

struct Case {
  std::string line;
  LrScheduleArgs args;
  bool error = false;
  struct Row { int64_t num_steps; double lr, wd; };
  std::vector<Row> rows;
};

LrScheduleArgs parse_args(const std::string& spec) {
  LrScheduleArgs a;
  std::istringstream in(spec);
  std::string kv;
  in >> kv;  // "case"
  while (in >> kv) {
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "lr") a.lr = std::stod(v);
    else if (k == "min_lr") a.min_lr = std::stod(v);
    else if (k == "lr_warmup_init") a.lr_warmup_init = std::stod(v);
    else if (k == "lr_decay_style") a.lr_decay_style = v;
    else if (k == "train_iters") a.train_iters = std::stoll(v);
    else if (k == "train_samples") a.train_samples = std::stoll(v);
    else if (k == "global_batch_size") a.global_batch_size = std::stoll(v);
    else if (k == "lr_decay_iters") a.lr_decay_iters = std::stoll(v);
    else if (k == "lr_decay_samples") a.lr_decay_samples = std::stoll(v);
    else if (k == "lr_warmup_fraction") a.lr_warmup_fraction = std::stod(v);
    else if (k == "lr_warmup_iters") a.lr_warmup_iters = std::stoll(v);
    else if (k == "lr_warmup_samples") a.lr_warmup_samples = std::stoll(v);
    else if (k == "weight_decay") a.weight_decay = std::stod(v);
    else if (k == "start_weight_decay") a.start_weight_decay = std::stod(v);
    else if (k == "end_weight_decay") a.end_weight_decay = std::stod(v);
    else if (k == "weight_decay_incr_style") a.weight_decay_incr_style = v;
    else throw std::runtime_error("unknown key in reference case: " + k);
  }
  return a;
}

std::vector<Case> reference_cases() {
  // Per process: ctest runs each test case as its own process, possibly in parallel.
  const std::string path =
      std::string(LMFORGE_BINARY_DIR) + "/test-data/optim_lr_schedule." + std::to_string(::getpid()) + ".txt";
  std::filesystem::create_directories(std::string(LMFORGE_BINARY_DIR) + "/test-data");
  const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                          "/tests/optim/lr_schedule_reference.py " + path;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("reference script failed: " + cmd);
  std::ifstream in(path);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("case ", 0) == 0) {
      cases.push_back(Case{line, parse_args(line), false, {}});
    } else if (line == "error") {
      cases.back().error = true;
    } else {
      std::istringstream row(line);
      Case::Row r{};
      row >> r.num_steps >> r.lr >> r.wd;
      cases.back().rows.push_back(r);
    }
  }
  std::filesystem::remove(path);
  return cases;
}

bool close(double a, double b) { return std::fabs(a - b) <= 1e-15 * std::max(std::fabs(b), 1e-300); }

TEST(LrSchedule, MatchesMegatronTranscription) {
  const std::vector<Case> cases = reference_cases();
  ASSERT_GE(cases.size(), 29u);
  int errors = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    if (c.error) {
      ++errors;
      EXPECT_THROW(OptimizerParamScheduler{c.args}, Error);
      continue;
    }
    ASSERT_FALSE(c.rows.empty());
    OptimizerParamScheduler sched(c.args);
    // Megatron's loop: use lr()/weight_decay(), then step by the global batch size.
    for (const Case::Row& r : c.rows) {
      ASSERT_EQ(sched.num_steps(), r.num_steps);
      EXPECT_TRUE(close(sched.lr(), r.lr)) << "num_steps " << r.num_steps << ": " << sched.lr() << " vs " << r.lr;
      EXPECT_TRUE(close(sched.weight_decay(), r.wd)) << "num_steps " << r.num_steps;
      sched.step(c.args.global_batch_size);
    }
  }
  EXPECT_EQ(errors, 8);
}

TEST(LrSchedule, FirstStepWithWarmupHasZeroLr) {
  LrScheduleArgs a;
  a.lr = 1e-3;
  a.train_iters = 10;
  a.lr_warmup_iters = 2;
  a.global_batch_size = 4;
  OptimizerParamScheduler sched(a);
  EXPECT_EQ(sched.lr(), 0.0);
  sched.step(4);
  EXPECT_DOUBLE_EQ(sched.lr(), 5e-4);
}

TEST(LrSchedule, StateRoundTripAndCheckpointMismatch) {
  LrScheduleArgs a;
  a.lr = 6e-4;
  a.min_lr = 6e-5;
  a.lr_decay_style = "cosine";
  a.train_iters = 100;
  a.lr_warmup_iters = 10;
  a.global_batch_size = 8;
  OptimizerParamScheduler sched(a);
  for (int i = 0; i < 37; ++i) sched.step(8);
  const SchedulerState saved = sched.state();
  EXPECT_EQ(saved.num_steps, 37 * 8);
  EXPECT_EQ(saved.lr_decay_steps, 800);
  EXPECT_EQ(saved.lr_warmup_steps, 80.0);

  OptimizerParamScheduler resumed(a);
  resumed.load_state(saved);
  EXPECT_EQ(resumed.lr(), sched.lr());

  LrScheduleArgs b = a;
  b.lr = 1e-3;
  OptimizerParamScheduler other(b);
  EXPECT_THROW(other.load_state(saved), Error);
  other.load_state(saved, OptimizerParamScheduler::LoadMode::kOverride);
  EXPECT_EQ(other.num_steps(), saved.num_steps);
  EXPECT_NE(other.lr(), sched.lr());
  other.load_state(saved, OptimizerParamScheduler::LoadMode::kUseCheckpoint);
  EXPECT_EQ(other.lr(), sched.lr());
}

TEST(LrSchedule, RejectsUnknownStylesAndMissingLength) {
  LrScheduleArgs a;
  a.lr = 1e-3;
  a.global_batch_size = 2;
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);  // neither train_iters nor train_samples
  a.train_iters = 5;
  a.lr_decay_style = "exponential";
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);
}

// NVIDIA's phase-1 recipe (lr 6e-3, warm-up 0.2843 of 7,038 steps): the first step already has lr > 0, the warm-up
// climbs to just under the peak, and the next step drops to (1 − 0.2843)^0.5 ≈ 0.846 of it; the last step has 0.
TEST(LrSchedule, NvidiaPolyWarmupStepsDownAtTheEndOfWarmupAndEndsAtZero) {
  LrScheduleArgs a;
  a.lr = 6e-3;
  a.lr_decay_style = "nvidia-poly-warmup";
  a.train_iters = 7038;
  a.lr_warmup_fraction = 0.2843;
  a.global_batch_size = 65536;
  OptimizerParamScheduler sched(a);
  EXPECT_DOUBLE_EQ(sched.lr(), 6e-3 * (1.0 / 7038) / 0.2843);  // step k = 1
  const int64_t last_warmup = 2000;  // 2000/7038 = 0.28417 < 0.2843 ≤ 2001/7038
  for (int64_t k = 1; k < last_warmup; ++k) sched.step(a.global_batch_size);
  const double top = sched.lr();
  sched.step(a.global_batch_size);
  const double after = sched.lr();
  EXPECT_GT(top, 0.999 * 6e-3);
  EXPECT_NEAR(after / 6e-3, std::sqrt(1.0 - 2001.0 / 7038), 1e-15);
  EXPECT_LT(after, 0.85 * top);
  for (int64_t k = last_warmup + 1; k < 7038; ++k) sched.step(a.global_batch_size);
  EXPECT_EQ(sched.lr(), 0.0);  // k = T
  EXPECT_GT(sched.lr_at(sched.num_steps() - a.global_batch_size), 0.0);

  // A checkpoint's schedule taken over keeps the samples per step (the lr depends on it).
  const SchedulerState saved = sched.state();
  LrScheduleArgs b = a;
  b.lr_decay_style = "linear";
  OptimizerParamScheduler other(b);
  other.load_state(saved, OptimizerParamScheduler::LoadMode::kUseCheckpoint);
  EXPECT_EQ(other.lr_at(100 * 65536), sched.lr_at(100 * 65536));

  a.min_lr = 1e-5;  // the decay ends at 0, so --min-lr would be ignored: refused
  EXPECT_THROW(OptimizerParamScheduler{a}, Error);
}

}  // namespace
}  // namespace lmforge::optim
