// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR through OptimizerParamScheduler (as the trainer steps it:
// lr() for the step, then step(global batch)) against an independent Python re-statement driven as DeepSpeed's
// engine drives its scheduler (deepspeed_lr_reference.py): every step's learning rate to 1e-15 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optim/deepspeed_lr.h"
#include "optim/lr_schedule.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::optim::DeepSpeedLr;

std::vector<double> reference(const std::string& args, int steps, const std::string& type) {
  const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                          "/tests/optim/deepspeed_lr_reference.py " + type + " " + std::to_string(steps) + " " + args;
  const auto r = lmforge::testing::run_command(cmd);
  EXPECT_EQ(r.status, 0) << r.output;
  std::vector<double> out;
  std::istringstream in(r.output);
  for (double v; in >> v;) out.push_back(v);
  return out;
}

std::vector<double> ours(const DeepSpeedLr& s, int steps, int64_t global_batch) {
  lmforge::optim::LrScheduleArgs a;
  a.lr = s.type == "WarmupCosineLR" ? s.optimizer_lr : s.warmup_max_lr;
  a.train_iters = steps;
  a.global_batch_size = global_batch;
  a.deepspeed_lr = s;
  lmforge::optim::OptimizerParamScheduler sched(a);
  std::vector<double> out;
  for (int k = 0; k < steps; k++) {
    out.push_back(sched.lr());
    sched.step(global_batch);
  }
  return out;
}

void expect_same(const DeepSpeedLr& s, const std::string& args, int steps) {
  const std::vector<double> want = reference(args, steps, s.type), got = ours(s, steps, 8);
  ASSERT_EQ(want.size(), (size_t)steps) << args;
  for (int k = 0; k < steps; k++)
    EXPECT_NEAR(got[k], want[k], 1e-15 * std::max(1e-30, std::fabs(want[k]))) << s.type << " " << args << " step " << k;
  // The schedule moves: many distinct values, not a constant that any formula would match.
  EXPECT_GE(std::set<double>(want.begin(), want.end()).size(), 3u) << s.type << " " << args;
}

TEST(DeepSpeedLr, WarmupLrLogAndLinear) {
  DeepSpeedLr s;
  s.type = "WarmupLR";
  s.warmup_min_lr = 1e-5;
  s.warmup_max_lr = 3e-4;
  s.warmup_num_steps = 7;
  expect_same(s, "warmup_min_lr=1e-05 warmup_max_lr=0.0003 warmup_num_steps=7", 15);
  s.warmup_type = "linear";
  expect_same(s, "warmup_min_lr=1e-05 warmup_max_lr=0.0003 warmup_num_steps=7 warmup_type=linear", 15);
  s.warmup_num_steps = 1;  // DeepSpeed warms up over max(2, steps)
  expect_same(s, "warmup_min_lr=1e-05 warmup_max_lr=0.0003 warmup_num_steps=1 warmup_type=linear", 5);
}

TEST(DeepSpeedLr, WarmupDecayLrGoesToZeroAndStays) {
  DeepSpeedLr s;
  s.type = "WarmupDecayLR";
  s.warmup_max_lr = 1e-3;
  s.warmup_num_steps = 5;
  s.total_num_steps = 20;
  expect_same(s, "warmup_max_lr=0.001 warmup_num_steps=5 total_num_steps=20", 25);
  EXPECT_EQ(ours(s, 25, 4).back(), 0.0);
}

TEST(DeepSpeedLr, WarmupCosineLrScalesTheOptimizerLr) {
  DeepSpeedLr s;
  s.type = "WarmupCosineLR";
  s.optimizer_lr = 6e-4;
  s.warmup_num_steps = 4;
  s.total_num_steps = 30;
  s.warmup_min_ratio = 0.1;
  s.cos_min_ratio = 0.05;
  expect_same(s, "lr=0.0006 warmup_num_steps=4 total_num_steps=30 warmup_min_ratio=0.1 cos_min_ratio=0.05", 32);
  s.warmup_type = "linear";
  expect_same(s, "lr=0.0006 warmup_num_steps=4 total_num_steps=30 warmup_min_ratio=0.1 cos_min_ratio=0.05 "
                 "warmup_type=linear", 32);
}

TEST(DeepSpeedLr, RefusesWhatDeepSpeedCannotMean) {
  DeepSpeedLr s;
  s.type = "OneCycle";
  EXPECT_THROW(lmforge::optim::validate_deepspeed_lr(s), lmforge::Error);
  s.type = "WarmupLR";
  s.warmup_type = "exp";
  EXPECT_THROW(lmforge::optim::validate_deepspeed_lr(s), lmforge::Error);
  s.warmup_type = "log";
  s.type = "WarmupCosineLR";
  s.warmup_num_steps = 10;
  s.total_num_steps = 10;  // DeepSpeed would divide by zero after warm-up
  EXPECT_THROW(lmforge::optim::validate_deepspeed_lr(s), lmforge::Error);
  s.type = "WarmupDecayLR";
  s.total_num_steps = 0;
  EXPECT_THROW(lmforge::optim::validate_deepspeed_lr(s), lmforge::Error);
}

}  // namespace
