// defines: tests of Lamb against apex FusedLAMB arithmetic transcribed in PyTorch (lamb_reference.py), with and
// without the trust ratio on tensors without decay (use_nvlamb / --lamb-all-tensors), with zero tensors for the
// zero-norm rule; and of the two-phase step: shards cutting tensors anywhere, their norm sums added, equal the whole;
// the one-process step equals the two phases
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "optim/lamb.h"
#include "optim_reference.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

using namespace lmforge::optim::testing;

// 10 steps of Lamb after clipping against the reference's arrays under `prefix` ("" or "nv.").
void expect_matches_reference(bool use_nvlamb, const std::string& prefix) {
  const Reference& ref = reference("lamb");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const int steps = static_cast<int>(hyper[5]);
  Model m = make_model(ref);
  LambConfig config;
  config.beta1 = hyper[0];
  config.beta2 = hyper[1];
  config.eps = hyper[2];
  config.use_nvlamb = use_nvlamb;
  Lamb opt(m.spans, config);
  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    load_grads(m, ref, s);
    clip_grad_norm(m.spans, hyper[4]);
    opt.step(lrs[s], hyper[3]);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const double e = rel_error(m.params[i].data(),
                                 ref.at(prefix + "param" + std::to_string(i) + ".step" + std::to_string(s)));
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-6) << prefix << "param " << i << " step " << s;
    }
  }
  std::printf("use_nvlamb %d: worst parameter relative error vs the LAMB reference over %d steps: %.3g\n", use_nvlamb,
              steps, worst);
  EXPECT_EQ(opt.steps(), steps);
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_LT(rel_error(opt.exp_avg_of(i).data(), ref.at(prefix + "exp_avg" + std::to_string(i))), 1e-6) << i;
    EXPECT_LT(rel_error(opt.exp_avg_sq_of(i).data(), ref.at(prefix + "exp_avg_sq" + std::to_string(i))), 1e-6) << i;
  }
  // The tensor without gradient or decay never moves: u = 0, so the zero-norm rule (ratio 1) leaves it finite.
  EXPECT_EQ(m.params[7], ref.at("param7.init"));
}

TEST(Lamb, MatchesApexArithmeticAfterClippingOverTenSteps) { expect_matches_reference(false, ""); }

TEST(Lamb, AllTensorsVariantMatchesApexUseNvlamb) { expect_matches_reference(true, "nv."); }

// The reference's tensors cut into 3 shards at points inside tensors (and one shard spanning several): phase 1 on
// each, the partial sums added (as parallel::DistributedOptimizer adds them over buckets and ranks), phase 2 on
// each. Bitwise the unsharded optimizer's parameters and state, since the norms only differ in the order of a
// double sum.
void expect_shards_equal_whole(bool use_nvlamb) {
  const Reference& ref = reference("lamb");
  const auto& lrs = ref.f64.at("lrs");
  Model whole = make_model(ref), split = make_model(ref);
  LambConfig config;
  config.use_nvlamb = use_nvlamb;
  Lamb full(whole.spans, config);
  const size_t n = full.numel();
  const size_t a_end = full.param_offset(0) + 10007;      // inside tensor 0 (37 x 613)
  const size_t b_end = full.param_offset(5) + 777;        // inside tensor 5 (40001): b covers tensors 0..5
  std::vector<std::unique_ptr<Lamb>> shards;
  shards.push_back(std::make_unique<Lamb>(split.spans, config, 0, a_end));
  shards.push_back(std::make_unique<Lamb>(split.spans, config, a_end, b_end));
  shards.push_back(std::make_unique<Lamb>(split.spans, config, b_end, n));
  for (const auto& s : shards) EXPECT_TRUE(s->cuts_a_tensor());
  for (int s = 0; s < 10; ++s) {
    load_grads(whole, ref, s);
    load_grads(split, ref, s);
    clip_grad_norm(whole.spans, 1.0);
    clip_grad_norm(split.spans, 1.0);
    full.step(lrs[s], 0.01);
    std::vector<double> sums(2 * split.spans.size(), 0.0), part(sums.size());
    for (auto& shard : shards) {
      shard->begin_step(lrs[s], 0.01, part);
      for (size_t k = 0; k < sums.size(); ++k) sums[k] += part[k];
    }
    for (auto& shard : shards) shard->finish_step(lrs[s], 0.01, sums);
  }
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_EQ(whole.params[i], split.params[i]) << "tensor " << i;
  for (size_t k = 0; k < 2; ++k) {
    std::vector<float> joined;
    for (const auto& shard : shards) {
      const std::vector<float> mine = shard->state_values(k);
      joined.insert(joined.end(), mine.begin(), mine.end());
    }
    const std::vector<float> want = full.state_values(k);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), joined.begin(), joined.end())) << full.state_names()[k];
  }
}

TEST(Lamb, ShardsCuttingTensorsEqualTheWholeWithReducedNorms) {
  expect_shards_equal_whole(false);
  expect_shards_equal_whole(true);
}

// step() on whole tensors (one multi-tensor op: on a GPU the norms and rates never leave it) gives the bits of the
// two phases with the sums on the host, with and without the trust ratio on tensors without decay.
TEST(Lamb, OneProcessStepEqualsTheTwoPhases) {
  const Reference& ref = reference("lamb");
  const auto& lrs = ref.f64.at("lrs");
  for (bool nv : {false, true}) {
    Model a = make_model(ref), b = make_model(ref);
    LambConfig config;
    config.use_nvlamb = nv;
    Lamb one(a.spans, config), two(b.spans, config);
    for (int s = 0; s < 4; ++s) {
      load_grads(a, ref, s);
      load_grads(b, ref, s);
      one.step(lrs[s], 0.01);
      std::vector<double> sums(2 * b.spans.size(), 0.0);
      two.begin_step(lrs[s], 0.01, sums);
      two.finish_step(lrs[s], 0.01, sums);
    }
    for (size_t i = 0; i < a.params.size(); ++i) EXPECT_EQ(a.params[i], b.params[i]) << "tensor " << i << " nv " << nv;
    for (size_t k = 0; k < 2; ++k) EXPECT_EQ(one.state_values(k), two.state_values(k)) << one.state_names()[k];
  }
}

TEST(Lamb, OneProcessStepRefusesASliceThatCutsATensor) {
  const Reference& ref = reference("lamb");
  Model m = make_model(ref);
  const size_t cut = m.params[0].size() + m.params[1].size();  // on a tensor boundary: step() is whole-tensor
  Lamb on_boundary(m.spans, LambConfig{}, 0, cut);
  EXPECT_FALSE(on_boundary.cuts_a_tensor());
  EXPECT_NO_THROW(on_boundary.step(1e-3, 0.01));
  Lamb inside(m.spans, LambConfig{}, 1, cut);
  EXPECT_THROW(inside.step(1e-3, 0.01), std::logic_error);
  EXPECT_THROW(Lamb(m.spans, LambConfig{}, 0, cut + 1000000000), Error);
}

}  // namespace
}  // namespace lmforge::optim
