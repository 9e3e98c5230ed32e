// defines: tests of Sgd against torch.optim.SGD with momentum 0.9 and 0, Megatron's param groups and clipping
// (sgd_reference.py), and of a sliced Sgd (ZeRO-1 shards cutting tensors) against the whole
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "optim/clip_grad.h"
#include "optim/factory.h"
#include "optim/sgd.h"
#include "optim_reference.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

using namespace lmforge::optim::testing;

void expect_matches_torch(double momentum, const std::string& prefix) {
  const Reference& ref = reference("sgd");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const int steps = static_cast<int>(hyper[5]);
  Model m = make_model(ref);
  Sgd opt(m.spans, SgdConfig{momentum});
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
  std::printf("momentum %g: worst parameter relative error vs torch.optim.SGD over %d steps: %.3g\n", momentum, steps,
              worst);
  EXPECT_EQ(opt.steps(), steps);
  if (momentum == 0.0) {
    EXPECT_TRUE(opt.state_names().empty());  // torch keeps no buffer either
    return;
  }
  ASSERT_EQ(opt.state_names(), std::vector<std::string>{"momentum_buffer"});
  for (size_t i = 0; i < m.params.size(); ++i)
    EXPECT_LT(rel_error(opt.state_values_of(0, i).data(), ref.at(prefix + "momentum_buffer" + std::to_string(i))), 1e-6)
        << i;
}

TEST(Sgd, MomentumMatchesTorchWithMegatronGroupsOverTenSteps) { expect_matches_torch(0.9, ""); }

TEST(Sgd, WithoutMomentumMatchesTorch) { expect_matches_torch(0.0, "m0."); }

TEST(Sgd, ShardsCuttingTensorsEqualTheWhole) {
  const Reference& ref = reference("sgd");
  const auto& lrs = ref.f64.at("lrs");
  Model whole = make_model(ref), split = make_model(ref);
  OptimizerConfig config;
  config.kind = "sgd";
  const auto full = make_optimizer(config, whole.spans);
  ASSERT_EQ(full->name(), "sgd");
  const size_t cut1 = 5000, cut2 = full->param_offset(2) + 123;
  std::vector<std::unique_ptr<Optimizer>> shards;
  shards.push_back(make_optimizer(config, split.spans, 0, cut1));
  shards.push_back(make_optimizer(config, split.spans, cut1, cut2));
  shards.push_back(make_optimizer(config, split.spans, cut2, Optimizer::kAll));
  for (int s = 0; s < 10; ++s) {
    load_grads(whole, ref, s);
    load_grads(split, ref, s);
    full->step(lrs[s], 0.1);
    for (auto& shard : shards) shard->step(lrs[s], 0.1);  // element-wise: no norms to reduce
  }
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_EQ(whole.params[i], split.params[i]) << "tensor " << i;
}

TEST(OptimizerFactory, BuildsEachKindAndRejectsBadFlags) {
  Model m = make_model(reference("sgd"));
  OptimizerConfig c;
  EXPECT_EQ(make_optimizer(c, m.spans)->name(), "adamw");
  EXPECT_EQ(make_optimizer(c, m.spans)->state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  c.kind = "lamb";
  EXPECT_EQ(make_optimizer(c, m.spans)->name(), "lamb");
  EXPECT_TRUE(make_optimizer(c, m.spans)->needs_tensor_norms());
  c.lamb_all_tensors = true;
  EXPECT_EQ(make_optimizer(c, m.spans)->hyperparameters().at("use_nvlamb"), "true");
  c.kind = "sgd";
  auto expect_error = [&](const OptimizerConfig& bad, const std::string& needle) {
    try {
      validate_optimizer_config(bad);
      ADD_FAILURE() << "no error; expected " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(c, "--lamb-all-tensors only applies to --optimizer lamb");
  c.lamb_all_tensors = false;
  c.sgd_momentum = -0.5;
  expect_error(c, "--sgd-momentum must be >= 0");
  c.sgd_momentum = 0.9;
  c.kind = "adagrad";
  expect_error(c, "--optimizer must be adam, lamb or sgd");
  c.kind = "lamb";
  c.beta2 = 1.0;
  expect_error(c, "--adam-beta2 must be in [0, 1)");
}

}  // namespace
}  // namespace lmforge::optim
