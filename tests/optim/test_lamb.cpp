// defines: tests of Lamb against apex FusedLAMB arithmetic transcribed in PyTorch (lamb_reference.py)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "optim/lamb.h"
#include "optim_reference.h"
#include "util/error.h"

namespace lmforge::optim {
namespace {

using namespace lmforge::optim::testing;

TEST(Lamb, MatchesApexArithmeticAfterClippingOverTenSteps) {
  const Reference& ref = reference("lamb");
  const auto& hyper = ref.f64.at("hyper");
  const auto& lrs = ref.f64.at("lrs");
  const int steps = static_cast<int>(hyper[5]);
  Model m = make_model(ref);
  LambConfig config;
  config.beta1 = hyper[0];
  config.beta2 = hyper[1];
  config.eps = hyper[2];
  Lamb opt(m.spans, config);
  double worst = 0.0;
  for (int s = 0; s < steps; ++s) {
    load_grads(m, ref, s);
    clip_grad_norm(m.spans, hyper[4]);
    opt.step(lrs[s], hyper[3]);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const double e =
          rel_error(m.params[i].data(), ref.at("param" + std::to_string(i) + ".step" + std::to_string(s)));
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-6) << "param " << i << " step " << s;
    }
  }
  std::printf("worst parameter relative error vs the LAMB reference over %d steps: %.3g\n", steps, worst);
  for (size_t i = 0; i < m.params.size(); ++i) {
    EXPECT_LT(rel_error(opt.exp_avg_of(i).data(), ref.at("exp_avg" + std::to_string(i))), 1e-6) << i;
    EXPECT_LT(rel_error(opt.exp_avg_sq_of(i).data(), ref.at("exp_avg_sq" + std::to_string(i))), 1e-6) << i;
  }
}

TEST(Lamb, ShardsOnTensorBoundariesEqualTheWhole) {
  const Reference& ref = reference("lamb");
  const auto& lrs = ref.f64.at("lrs");
  Model whole = make_model(ref), split = make_model(ref);
  Lamb full(whole.spans, LambConfig{});
  const size_t cut = whole.params[0].size() + whole.params[1].size();
  Lamb a(split.spans, LambConfig{}, 0, cut), b(split.spans, LambConfig{}, cut, Lamb::kAll);
  for (int s = 0; s < 4; ++s) {
    load_grads(whole, ref, s);
    load_grads(split, ref, s);
    full.step(lrs[s], 0.01);
    a.step(lrs[s], 0.01);
    b.step(lrs[s], 0.01);
  }
  for (size_t i = 0; i < whole.params.size(); ++i) EXPECT_EQ(whole.params[i], split.params[i]) << i;
  EXPECT_THROW(Lamb(split.spans, LambConfig{}, 1, cut), Error);
}

}  // namespace
}  // namespace lmforge::optim
