// ClassificationHead (BERT's pooler + sentence-order head as kernel ops): the loss against a double-precision
// re-statement of its formula (mean over the labelled rows of lse(z) − z[label], z = tanh(x₀·Pᵀ + p)·Cᵀ + c), and
// its backward against central finite differences of its own forward, an ignored row (label −1) included.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "layers/classification_head.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"
#include "layers/workspace.h"

namespace {

using namespace lmforge;
using kernels::Tensor;

constexpr int B = 3, T = 2;
constexpr int64_t H = 5, K = 2, N = B * T;

struct Head {
  kernels::Backend& be = kernels::cpu_backend();
  layers::TensorParallel tp;
  layers::ParameterStore store{be, 0, 1};
  layers::Workspace ws{be};
  std::unique_ptr<layers::ClassificationHead> head;
  size_t pooler_w = 0, pooler_b = 0, cls_w = 0, cls_b = 0;

  Head() {
    auto linear = [&](const char* name, int64_t in, int64_t out) {
      layers::LinearSpec s;
      s.name = name;
      s.in = in;
      s.out = out;
      s.layout = kernels::WeightLayout::OUT_IN;
      s.init_std = 0.5;
      return std::make_unique<layers::Linear>(store, tp, ws, s);
    };
    auto pooler = linear("pooler", H, H);
    auto cls = linear("cls", H, K);
    head = std::make_unique<layers::ClassificationHead>(std::move(pooler), std::move(cls), be);
    store.allocate();
    store.init(5);
    // Nonzero biases, so their gradients are checked too.
    std::mt19937 rng(2);
    std::normal_distribution<float> normal(0.0f, 0.3f);
    for (const char* b : {"pooler.bias", "cls.bias"}) {
      const param::Parameter& p = store.table().find(b);
      for (size_t i = 0; i < p.numel; i++) store.values()[p.offset + i] = normal(rng);
    }
  }
  float value(const char* name, size_t i) const {
    return store.values()[store.table().find(name).offset + i];
  }
};

TEST(ClassificationHead, LossIsTheMeanCrossEntropyOfTheLabelledRowsAndTheBackwardMatchesFiniteDifferences) {
  Head h;
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x((size_t)(N * H));
  for (float& v : x) v = normal(rng);
  const int32_t labels[B] = {1, -1, 0};
  layers::ClassificationHead::Saved saved;
  auto loss = [&]() { return h.head->forward(kernels::make_view(x.data(), {N, H}), B, T, labels, saved); };

  // The formula in double from the same weights (OUT_IN: W[out][in]).
  double want = 0.0;
  int count = 0;
  for (int b = 0; b < B; b++) {
    if (labels[b] < 0) continue;
    std::vector<double> pooled((size_t)H), z((size_t)K);
    for (int64_t o = 0; o < H; o++) {
      double s = h.value("pooler.bias", (size_t)o);
      for (int64_t i = 0; i < H; i++)
        s += (double)h.value("pooler.weight", (size_t)(o * H + i)) * x[(size_t)((int64_t)b * T * H + i)];
      pooled[(size_t)o] = std::tanh(s);
    }
    double m = -1e300;
    for (int64_t k = 0; k < K; k++) {
      double s = h.value("cls.bias", (size_t)k);
      for (int64_t i = 0; i < H; i++) s += (double)h.value("cls.weight", (size_t)(k * H + i)) * pooled[(size_t)i];
      z[(size_t)k] = s;
      m = std::max(m, s);
    }
    double se = 0.0;
    for (double v : z) se += std::exp(v - m);
    want += m + std::log(se) - z[(size_t)labels[b]];
    count++;
  }
  want /= count;
  EXPECT_NEAR(loss(), want, 1e-5 * std::fabs(want));

  h.store.zero_grads();
  std::vector<float> dx((size_t)(N * H), 0.0f);
  h.head->backward(kernels::make_view(dx.data(), {N, H}), 1.0f, saved);
  const std::vector<float> grads(h.store.grads(), h.store.grads() + h.store.local_numel());
  // Rows other than each sequence's first get no gradient.
  for (int b = 0; b < B; b++)
    for (int64_t i = 0; i < H; i++) EXPECT_EQ(dx[(size_t)(((int64_t)b * T + 1) * H + i)], 0.0f);
  const float eps = 1e-2f;
  auto probe = [&](float* v, double analytic, const char* what, size_t i) {
    const float keep = *v;
    *v = keep + eps;
    const double up = loss();
    *v = keep - eps;
    const double down = loss();
    *v = keep;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(numeric, analytic, 2e-2 * std::max(1e-1, std::fabs(numeric))) << what << " " << i;
  };
  for (size_t i = 0; i < x.size(); i++) probe(&x[i], dx[i], "input", i);
  for (size_t i = 0; i < h.store.local_numel(); i++) probe(h.store.values() + i, grads[i], "parameter", i);
}

TEST(ClassificationHead, NoLabelledRowGivesNaNAndNoGradient) {
  Head h;
  std::vector<float> x((size_t)(N * H), 0.5f), dx((size_t)(N * H), 0.0f);
  const int32_t labels[B] = {-1, -1, -1};
  layers::ClassificationHead::Saved saved;
  EXPECT_TRUE(std::isnan(h.head->forward(kernels::make_view(x.data(), {N, H}), B, T, labels, saved)));
  h.store.zero_grads();
  h.head->backward(kernels::make_view(dx.data(), {N, H}), 1.0f, saved);
  for (float v : dx) EXPECT_EQ(v, 0.0f);
  for (size_t i = 0; i < h.store.local_numel(); i++) EXPECT_EQ(h.store.grads()[i], 0.0f);
}

}  // namespace
