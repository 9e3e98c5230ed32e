// defines: tests of the fp16 grad scaler (optim/grad_scaler.h) against Megatron's rules
//          (megatron/core/optimizer/grad_scaler.py, DynamicGradScaler.update): hysteresis, halving down to the
//          minimum, doubling after a clean window, a static scale, and its state round-tripping exactly
#include <gtest/gtest.h>

#include <exception>

#include "optim/grad_scaler.h"

namespace {

using lmforge::optim::LossScaleOptions;
using lmforge::optim::LossScaler;

TEST(LossScaler, FollowsMegatronsDynamicRules) {
  LossScaleOptions o;
  o.enabled = true;
  o.initial_loss_scale = 1024;
  o.min_loss_scale = 256;
  o.loss_scale_window = 3;
  o.hysteresis = 2;
  LossScaler s(o);
  ASSERT_TRUE(s.active());
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);  // hysteresis 2 → 1: the scale stays
  EXPECT_EQ(s.scale(), 1024);
  s.update(true);  // 1 → 0: halves
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // the tracker is not refilled by a halving: halves again
  EXPECT_EQ(s.scale(), 256);
  s.update(true);  // not below --min-loss-scale
  EXPECT_EQ(s.scale(), 256);
  s.update(false), s.update(false);
  EXPECT_EQ(s.scale(), 256);
  s.update(false);  // the window's third clean step doubles and refills the hysteresis
  EXPECT_EQ(s.scale(), 512);
  s.update(true);  // one overflow is tolerated again
  EXPECT_EQ(s.scale(), 512);
  s.update(false), s.update(true);  // an overflow resets the growth tracker; the hysteresis is now used up
  EXPECT_EQ(s.scale(), 256);
  // The state round-trips exactly.
  LossScaler t(o);
  t.load(s.save());
  EXPECT_EQ(t.save(), s.save());
  EXPECT_THROW(t.load("garbage"), std::exception);
  // Static scale: never changes; not enabled (bf16 and fp32): inactive.
  o.loss_scale = 4096;
  LossScaler fixed(o);
  fixed.update(true);
  EXPECT_EQ(fixed.scale(), 4096);
  EXPECT_FALSE(LossScaler(LossScaleOptions{}).active());
}

}  // namespace

namespace {

// A scaler that cannot make progress says so: a static scale after kMaxConsecutiveSkips overflows in a row (a clean
// step resets the count), a dynamic one when an overflow would halve a scale already at its minimum (DeepSpeed).
TEST(LossScaler, SaysWhenTrainingCannotProgress) {
  LossScaleOptions o;
  o.enabled = true;
  o.loss_scale = 8;
  LossScaler fixed(o);
  for (int i = 1; i < LossScaler::kMaxConsecutiveSkips; i++) fixed.update(true);
  fixed.update(false);
  for (int i = 1; i < LossScaler::kMaxConsecutiveSkips; i++) fixed.update(true);
  EXPECT_EQ(fixed.stalled(), "");
  fixed.update(true);
  EXPECT_NE(fixed.stalled().find("100 iterations in a row were skipped"), std::string::npos) << fixed.stalled();

  o.loss_scale = 0;
  o.initial_loss_scale = 4;
  o.min_loss_scale = 2;
  o.hysteresis = 1;
  LossScaler dynamic(o);
  dynamic.update(true);  // 4 -> 2, the minimum
  EXPECT_EQ(dynamic.scale(), 2);
  EXPECT_EQ(dynamic.stalled(), "");
  dynamic.update(true);  // would halve 2
  EXPECT_NE(dynamic.stalled().find("at its minimum 2 (--min-loss-scale)"), std::string::npos) << dynamic.stalled();
  dynamic.update(false);
  EXPECT_EQ(dynamic.stalled(), "");
}

}  // namespace
