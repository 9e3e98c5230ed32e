// defines: the CPU erf GELU's accuracy over a dense sweep against erfc in double: the forward to a unit or two of
//          fp32 everywhere and with its relative accuracy in the lower tail, the gradient to 4e-7
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

// x·Φ(x) and Φ(x) + x·φ(x) in double, Φ through erfc (no cancellation in the lower tail).
double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_grad_ref(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// 400,001 points over [-10, 10] (both sides of every branch of the kernel's Φ: |x/√2| < 1, < 4, ≥ 4), above the
// kernels' parallel threshold so the parallel loop runs.
std::vector<float> sweep() {
  const int n = 400001;
  std::vector<float> x((size_t)n);
  for (int i = 0; i < n; i++) x[(size_t)i] = -10.0f + 20.0f * (float)i / (float)(n - 1);
  return x;
}

TEST(GeluErfCpu, ForwardWithinTwoUnitsOfFp32) {
  std::vector<float> x = sweep(), y(x.size());
  const int64_t n = (int64_t)x.size();
  gelu_forward(make_view(y.data(), {n}), make_view(x.data(), {n}), GeluKind::ERF);
  for (size_t i = 0; i < x.size(); i++) {
    const double want = gelu_ref(x[i]);
    // two units of the last place of the result, or 4e-7 where the result is below 1 in magnitude
    // (ilogb(0) is INT_MIN: a zero result takes the absolute bound alone)
    const double tol = want == 0 ? 4e-7 : std::max(4e-7, 2.0 * std::ldexp(1.0, std::ilogb(std::fabs(want)) - 23));
    ASSERT_LE(std::fabs(y[i] - want), tol) << "x = " << x[i] << ": " << y[i] << ", expected " << want;
  }
}

// Below x = -1 the GELU is x times the normal's small lower tail; 0.5·x·(1 + erf(x/√2)) loses it to cancellation
// (at x = -5, 1 + erf is 5.7e-7, a few units of erf's last place near -1: several percent of error). The kernel
// computes the tail as erfc directly: relative error within 4e-6 down to x = -5.5 (Φ = 1.9e-8).
TEST(GeluErfCpu, LowerTailKeepsRelativeAccuracy) {
  std::vector<float> x = sweep(), y(x.size());
  const int64_t n = (int64_t)x.size();
  gelu_forward(make_view(y.data(), {n}), make_view(x.data(), {n}), GeluKind::ERF);
  for (size_t i = 0; i < x.size(); i++) {
    if (x[i] > -1.0f || x[i] < -5.5f) continue;
    const double want = gelu_ref(x[i]);
    ASSERT_LE(std::fabs(y[i] - want), 4e-6 * std::fabs(want)) << "x = " << x[i] << ": " << y[i] << ", expected " << want;
  }
}

TEST(GeluErfCpu, GradientWithin4e7) {
  std::vector<float> x = sweep(), dout(x.size(), 1.0f), dx(x.size(), 0.0f);
  const int64_t n = (int64_t)x.size();
  gelu_backward(make_view(dx.data(), {n}), make_view(x.data(), {n}), make_view(dout.data(), {n}), GeluKind::ERF);
  for (size_t i = 0; i < x.size(); i++) {
    const double want = gelu_grad_ref(x[i]);
    ASSERT_LE(std::fabs(dx[i] - want), 4e-7) << "x = " << x[i] << ": " << dx[i] << ", expected " << want;
  }
}

// A NaN goes through (a non-finite activation must not turn into a finite one), and the saturated ends are exact
// (the gradient's x·φ(x) far out is x·e^{-87}-small: fast_exp's clamp, as before).
TEST(GeluErfCpu, NanPropagatesAndEndsSaturate) {
  std::vector<float> x = {NAN, 30.0f, -30.0f, 0.0f}, y(4), dx(4, 0.0f), d(4, 1.0f);
  gelu_forward(make_view(y.data(), {4}), make_view(x.data(), {4}), GeluKind::ERF);
  gelu_backward(make_view(dx.data(), {4}), make_view(x.data(), {4}), make_view(d.data(), {4}), GeluKind::ERF);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(dx[0]));
  EXPECT_EQ(y[1], 30.0f);
  EXPECT_EQ(y[2], -0.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(dx[1], 1.0f);
  EXPECT_LE(std::fabs(dx[2]), 1e-30f);
  EXPECT_EQ(dx[3], 0.5f);
}

}  // namespace
}  // namespace lmforge::kernels
