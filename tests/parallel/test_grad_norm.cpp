// defines: tests of parallel::GradNorm (the one gradient-norm implementation) on one rank: with the tensors as its
//          pieces it is optim::clip_grad_norm bitwise (scale by 1/M, norm, clip); with data-parallel buckets as
//          pieces every piece is scaled and clipped alike; tensors another stage counts or another tensor-parallel
//          rank counts are left out of the norm but clipped all the same
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "optim/clip_grad.h"
#include "parallel/grad_buckets.h"
#include "parallel/grad_norm.h"

namespace lmforge::parallel {
namespace {

struct Grads {
  std::vector<float> params, grads;
  std::vector<optim::ParamSpan> spans;
  Grads(const std::vector<size_t>& sizes, uint32_t seed) {
    size_t n = 0;
    for (size_t s : sizes) n += s;
    params.assign(n, 0.0f);
    grads.resize(n);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& g : grads) g = normal(rng);
    size_t at = 0;
    for (size_t i = 0; i < sizes.size(); i++) {
      spans.push_back({"t" + std::to_string(i), params.data() + at, grads.data() + at, sizes[i], true});
      at += sizes[i];
    }
  }
};

// Host arrays as the flat CPU device view the gradient passes take.
kernels::Tensor flat(std::vector<float>& v) { return kernels::make_view(v.data(), {(int64_t)v.size()}); }

// Sizes with a tensor over the omp threshold (65536), so the parallel reduction is exercised too.
const std::vector<size_t> kSizes = {1000, 70001, 3, 4096, 129};

TEST(GradNorm, OneRankIsClipGradNormBitwise) {
  for (const double max_norm : {0.0, 1.0, 1e9}) {
    Grads a(kSizes, 1), b(kSizes, 1);
    const int64_t M = 4;
    optim::scale_grads(a.spans, 1.0f / (float)M);
    const double want = optim::clip_grad_norm(a.spans, max_norm);
    const std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
    GradBuckets buckets(*one, b.spans, flat(b.grads), false);
    GradNorm norm(b.spans);
    buckets.reduce();
    const double got = norm.scale_and_clip(flat(b.grads), buckets.owned(), *one, gradient_scale(M, 1.0), true,
                                           max_norm);
    EXPECT_EQ(got, want) << "max_norm " << max_norm;
    EXPECT_EQ(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)), 0) << max_norm;
  }
}

TEST(GradNorm, BucketPiecesScaleAndClipEveryElementAlike) {
  // One rank with the distributed optimizer owns whole buckets (small ones here): the norm is the same sum grouped
  // by bucket, so equal to a float64 reference to rounding, and every element is scaled by the same factors.
  Grads a(kSizes, 2), b(kSizes, 2);
  double sq = 0.0;
  for (float g : a.grads) sq += (double)(g * 0.5f) * (double)(g * 0.5f);
  const std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
  GradBuckets buckets(*one, b.spans, flat(b.grads), true, 5000);
  ASSERT_EQ(buckets.owned().size(), (b.grads.size() + 4999) / 5000);
  GradNorm norm(b.spans);
  const double got = norm.scale_and_clip(flat(b.grads), buckets.owned(), *one, gradient_scale(2, 1.0), true, 1.0);
  EXPECT_NEAR(got, std::sqrt(sq), 1e-12 * std::sqrt(sq));
  const float coef = optim::clip_coefficient(got, 1.0);
  ASSERT_LT(coef, 1.0f);
  for (size_t i = 0; i < a.grads.size(); i++) ASSERT_EQ(b.grads[i], (a.grads[i] * 0.5f) * coef) << i;
}

TEST(GradNorm, CopiesAndOtherRanksReplicasAreLeftOutOfTheNorm) {
  Grads a(kSizes, 3), b(kSizes, 3);
  // The reference: the norm of tensors 0, 2 and 4 only.
  double sq = 0.0;
  for (size_t i : {0, 2, 4}) sq += optim::sum_of_squares(a.spans[i].grad);
  const std::unique_ptr<dist::Communicator> one = dist::make_local_communicator();
  GradBuckets buckets(*one, b.spans, flat(b.grads), false);
  GradNorm norm(b.spans);
  norm.set_tensor_parallel(one.get(), {true, false, true, true, true});  // tensor 1: another rank counts it
  norm.set_pipeline(one.get(), {false, false, false, true, false});      // tensor 3: another stage's copy
  const double got = norm.scale_and_clip(flat(b.grads), buckets.owned(), *one, 1.0f, false, 0.0);
  EXPECT_EQ(got, std::sqrt(sq));
  EXPECT_EQ(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)), 0);  // no clipping
  // Clipping reaches the tensors left out of the norm too.
  const double clipped = norm.scale_and_clip(flat(b.grads), buckets.owned(), *one, 1.0f, false, 1.0);
  EXPECT_EQ(clipped, got);
  const float coef = optim::clip_coefficient(got, 1.0);
  for (size_t i = 0; i < a.grads.size(); i++) ASSERT_EQ(b.grads[i], a.grads[i] * coef) << i;
}

}  // namespace
}  // namespace lmforge::parallel
