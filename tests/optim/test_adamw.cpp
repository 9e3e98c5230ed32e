// defines: tests of AdamW and global-norm clipping against torch.optim.AdamW + clip_grad_norm_ (adamw_reference.py)
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "optim/adamw.h"
#include "optim_reference.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

using namespace lmforge::optim::testing;

TEST(AdamW, MatchesTorchWithClippingOverTwelveSteps) {
  const Reference& ref = reference("adamw");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const auto& norms = ref.at("norms");
  const double weight_decay = hyper[3], clip = hyper[4];
  const int steps = static_cast<int>(hyper[5]);
  Model m = make_model(ref);
  AdamW opt(m.spans, AdamWConfig{hyper[0], hyper[1], hyper[2]});
  int clipped_steps = 0;
  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    load_grads(m, ref, s);
    const double norm = clip_grad_norm(m.spans, clip);
    EXPECT_NEAR(norm, norms[s], 1e-6 * norms[s]) << "step " << s;
    clipped_steps += norm > clip;
    for (size_t i = 0; i < m.params.size(); ++i)
      EXPECT_LT(rel_error(m.grads[i].data(), ref.at("clipped" + std::to_string(i) + ".step" + std::to_string(s))),
                1e-6)
          << "clipped grad " << i << " step " << s;
    opt.step(lrs[s], weight_decay);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const double e =
          rel_error(m.params[i].data(), ref.at("param" + std::to_string(i) + ".step" + std::to_string(s)));
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-6) << "param " << i << " step " << s;
    }
  }
  std::printf("worst parameter relative error vs torch over %d steps: %.3g\n", steps, worst);
  EXPECT_GT(clipped_steps, 0);
  EXPECT_LT(clipped_steps, steps);
  EXPECT_EQ(opt.steps(), steps);
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_LT(rel_error(opt.exp_avg_of(i).data(), ref.at("exp_avg" + std::to_string(i))), 1e-6) << i;
    EXPECT_LT(rel_error(opt.exp_avg_sq_of(i).data(), ref.at("exp_avg_sq" + std::to_string(i))), 1e-6) << i;
  }
}

// A ZeRO-style split of the flat index space into slices (cutting through tensors) must give the same bits
// as one optimizer over everything, and each slice's state must be the matching piece of the whole.
TEST(AdamW, ShardedSlicesEqualTheWhole) {
  const Reference& ref = reference("adamw");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const AdamWConfig config{hyper[0], hyper[1], hyper[2]};
  Model whole = make_model(ref), split = make_model(ref);
  AdamW full(whole.spans, config);
  const size_t n = full.numel();
  const std::vector<size_t> cuts = {0, 1001, 22681 + 613 + 7, 22681 + 613 + 7 + 1, n};
  std::vector<AdamW> shards;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) shards.emplace_back(split.spans, config, cuts[k], cuts[k + 1]);
  for (int s = 0; s < 5; ++s) {
    load_grads(whole, ref, s);
    load_grads(split, ref, s);
    full.step(lrs[s], hyper[3]);
    for (AdamW& shard : shards) shard.step(lrs[s], hyper[3]);
  }
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_EQ(whole.params[i], split.params[i]) << i;
  // exp_avg() returns a copy of the whole state: taken once, not once per element (that was quadratic, 70 s under
  // AddressSanitizer).
  const std::vector<float> full_m = full.exp_avg(), full_v = full.exp_avg_sq();
  for (size_t k = 0; k < shards.size(); ++k) {
    const auto m = shards[k].exp_avg();
    const auto v = shards[k].exp_avg_sq();
    ASSERT_EQ(m.size(), cuts[k + 1] - cuts[k]);
    for (size_t j = 0; j < m.size(); ++j) {
      ASSERT_EQ(m[j], full_m[cuts[k] + j]);
      ASSERT_EQ(v[j], full_v[cuts[k] + j]);
    }
  }
  // A parameter that lies wholly outside a shard has no state there.
  EXPECT_TRUE(shards[3].exp_avg_of(0).empty());
  EXPECT_EQ(shards[0].exp_avg_of(0).size(), 1001u);
}

// A step over spans carrying their part of a bf16 working copy (ParamSpan::working, with and without an fp32 mirror)
// writes it in the same pass: bit for bit what the copy op (the parameter store's sync, which tests/kernels checks
// against an independent rounding) makes of the new parameters, and the mirror's widening. The spans sit at odd
// offsets of the copy, so the streamed stretches have unaligned heads and tails; the parameters equal a run without
// a working copy. An optimizer over spans of which one lacks its part writes none.
TEST(AdamW, WritesTheBf16WorkingCopyAndItsMirrorInTheSamePass) {
  const Reference& ref = reference("adamw");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const AdamWConfig config{hyper[0], hyper[1], hyper[2]};
  for (bool mirrored : {true, false}) {
    Model plain = make_model(ref), fused = make_model(ref);
    size_t total = 3;  // the working copy starts 3 elements in
    for (const ParamSpan& s : fused.spans) total += s.size + 5;
    std::vector<uint16_t> working(total, 0x7FC0);
    std::vector<float> mirror(total, -7.0f);
    size_t at = 3;
    for (ParamSpan& s : fused.spans) {
      s.working = kernels::make_view(working.data() + at, kernels::DType::BF16, {(int64_t)s.size});
      if (mirrored) s.working.widened = mirror.data() + at;
      at += s.size + 5;
    }
    AdamW without(plain.spans, config), with(fused.spans, config);
    EXPECT_FALSE(without.writes_working_copy());
    ASSERT_TRUE(with.writes_working_copy());
    for (int s = 0; s < 3; ++s) {
      load_grads(plain, ref, s);
      load_grads(fused, ref, s);
      without.step(lrs[s], hyper[3]);
      with.step(lrs[s], hyper[3]);
    }
    at = 3;
    for (size_t i = 0; i < fused.params.size(); ++i) {
      ASSERT_EQ(fused.params[i], plain.params[i]) << i;
      const size_t n = fused.params[i].size();
      std::vector<uint16_t> want(n);
      kernels::copy(kernels::make_view(want.data(), kernels::DType::BF16, {(int64_t)n}),
                    kernels::make_view(fused.params[i].data(), {(int64_t)n}));
      for (size_t j = 0; j < n; ++j) {
        ASSERT_EQ(working[at + j], want[j]) << "tensor " << i << " element " << j;
        const float widened = std::bit_cast<float>((uint32_t)want[j] << 16);
        ASSERT_EQ(std::bit_cast<uint32_t>(mirror[at + j]), std::bit_cast<uint32_t>(mirrored ? widened : -7.0f)) << j;
      }
      for (size_t j = n; j < n + 5 && at + j < total; ++j) ASSERT_EQ(working[at + j], 0x7FC0) << "gap after " << i;
      at += n + 5;
    }
  }
  Model partial = make_model(ref);
  std::vector<uint16_t> some(partial.spans[0].size);
  partial.spans[0].working = kernels::make_view(some.data(), kernels::DType::BF16, {(int64_t)some.size()});
  EXPECT_FALSE(AdamW(partial.spans, config).writes_working_copy());
}

// The multi-tensor ops refuse a working copy that only AdamW on the CPU writes (ops.h, MultiTensorItem::working):
// on another optimizer's runs, or not a bf16 view of the run's elements.
TEST(AdamW, OnlyAdamwTakesABf16WorkingCopyOfItsRun) {
  std::vector<float> p(8, 1.0f), g(8, 0.5f), m(8, 0.0f), v(8, 0.0f), f32(8);
  std::vector<uint16_t> w(8), short_w(7);
  kernels::MultiTensorItem run;
  run.param = kernels::make_view(p.data(), {8});
  run.grad = kernels::make_view(g.data(), {8});
  run.m = kernels::make_view(m.data(), {8});
  run.v = kernels::make_view(v.data(), {8});
  const kernels::AdamWScalars adam{1.0f, 0.9f, 0.1f, 0.999f, 0.001f, 1.0f, 1e-8f, -0.001f};
  const kernels::SgdScalars sgd{};
  for (const kernels::Tensor& bad : {kernels::make_view(f32.data(), {8}),
                                     kernels::make_view(short_w.data(), kernels::DType::BF16, {7})}) {
    run.working = bad;
    EXPECT_THROW(kernels::adamw_update_multi({&run, 1}, &adam, 1), Error) << bad.describe();
  }
  run.working = kernels::make_view(w.data(), kernels::DType::BF16, {8});
  kernels::MultiTensorItem sgd_run = run;
  sgd_run.v = kernels::Tensor{};
  EXPECT_THROW(kernels::sgd_update_multi({&sgd_run, 1}, &sgd, 1), Error);
  kernels::adamw_update_multi({&run, 1}, &adam, 1);
  std::vector<uint16_t> want(8);
  kernels::copy(kernels::make_view(want.data(), kernels::DType::BF16, {8}), kernels::make_view(p.data(), {8}));
  EXPECT_EQ(w, want);
}

TEST(ClipGradNorm, BelowThresholdOrDisabledLeavesGradientsUntouched) {
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  std::vector<float> pa(2), pb(1);
  std::vector<ParamSpan> spans = {{"a", pa.data(), a.data(), 2, true}, {"b", pb.data(), b.data(), 1, false}};
  EXPECT_DOUBLE_EQ(clip_grad_norm(spans, 5.0 + 1e-3), 5.0);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[0], 4.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(spans, 0.0), 5.0);
  EXPECT_EQ(b[0], 4.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(spans, 1.0), 5.0);
  EXPECT_NEAR(a[0], 3.0 / (5.0 + 1e-6), 1e-7);
  EXPECT_NEAR(b[0], 4.0 / (5.0 + 1e-6), 1e-7);
}

TEST(AdamW, RejectsBadShardAndBetas) {
  std::vector<float> p(4), g(4);
  std::vector<ParamSpan> spans = {{"p", p.data(), g.data(), 4, true}};
  EXPECT_THROW((void)AdamW(spans, AdamWConfig{}, 2, 5), Error);
  EXPECT_THROW((void)AdamW(spans, AdamWConfig{}, 3, 2), Error);
  EXPECT_THROW((void)AdamW(spans, AdamWConfig{1.0, 0.999, 1e-8}), Error);
}

}  // namespace
}  // namespace lmforge::optim
