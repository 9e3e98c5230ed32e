// defines: tests of model::Electra's counter-based draws (model/electra_draws.h): uniform, a pure function of their
//          key, the same for a sample whatever micro-batch carries it, and the same step as the draws given as arrays
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "model/electra.h"
#include "model/electra_draws.h"

namespace lmforge::model {
namespace {

TEST(ElectraDraws, UniformAndAPureFunctionOfSeedIterationSampleSiteAndElement) {
  const ElectraDrawKey key{1234, 7};
  double sum = 0.0;
  const int n = 200000;
  std::vector<double> row(n);
  electra_uniform_row(key, 3, ElectraDrawSite::GUMBEL, 0, n, row.data());
  for (int i = 0; i < n; i++) {
    ASSERT_GE(row[i], 0.0);
    ASSERT_LT(row[i], 1.0);
    sum += row[i];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.003);
  EXPECT_EQ(row[12345], electra_uniform(key, 3, ElectraDrawSite::GUMBEL, 12345));
  const double u = electra_uniform(key, 3, ElectraDrawSite::KEEP, 5);
  EXPECT_NE(u, electra_uniform(key, 4, ElectraDrawSite::KEEP, 5));
  EXPECT_NE(u, electra_uniform(key, 3, ElectraDrawSite::POSITIONS, 5));
  EXPECT_NE(u, electra_uniform({1234, 8}, 3, ElectraDrawSite::KEEP, 5));
  EXPECT_NE(u, electra_uniform({1235, 7}, 3, ElectraDrawSite::KEEP, 5));
}

// A row is drawn eight elements at a time (electra_draws.cpp): it must equal its elements drawn one by one, wherever
// it starts and ends and across the counter's high word.
TEST(ElectraDraws, ARowEqualsItsElementsDrawnOneByOne) {
  const ElectraDrawKey key{0x123456789abcdefull, 42};
  for (const uint64_t first : {uint64_t(0), uint64_t(3), (uint64_t(1) << 32) - 5}) {
    for (const uint64_t n : {uint64_t(1), uint64_t(7), uint64_t(8), uint64_t(29)}) {
      std::vector<double> row(n);
      electra_uniform_row(key, 9, ElectraDrawSite::GUMBEL, first, n, row.data());
      for (uint64_t j = 0; j < n; j++)
        ASSERT_EQ(row[j], electra_uniform(key, 9, ElectraDrawSite::GUMBEL, first + j)) << first << " + " << j;
    }
  }
}

ElectraConfig small_config() {
  ElectraConfig c;
  c.vocab_size = 300;
  c.embedding_size = 16;
  c.hidden = 32, c.heads = 2, c.num_layers = 2;
  c.gen_hidden = 16, c.gen_heads = 1, c.gen_layers = 1;
  c.max_positions = 64;
  c.hidden_dropout = c.attention_dropout = 0.0f;
  c.mask_prob = 0.25;
  return c;
}

struct Examples {
  int B = 4, L = 24;
  std::vector<int32_t> ids, mask, types;
  Examples() : ids(B * L, 0), mask(B * L, 0), types(B * L, 0) {
    std::mt19937 rng(5);
    for (int b = 0; b < B; b++) {
      const int n = L - 3 * b;
      for (int p = 0; p < n; p++) ids[b * L + p] = 104 + (int32_t)(rng() % 196), mask[b * L + p] = 1;
      ids[b * L] = 101, ids[b * L + n / 2] = 102, ids[b * L + n - 1] = 102;
      for (int p = n / 2 + 1; p < n; p++) types[b * L + p] = 1;
    }
  }
  ElectraInputs rows(int first, int count) const {
    return {count, L, ids.data() + first * L, mask.data() + first * L, types.data() + first * L};
  }
};

TEST(ElectraDraws, ASampleDrawsTheSameWhateverMicroBatchCarriesIt) {
  const ElectraConfig c = small_config();
  Electra whole(c, kernels::cpu_backend()), halves(c, kernels::cpu_backend());
  whole.init_weights(11);
  halves.init_weights(11);
  const Examples ex;
  const ElectraDrawKey key{99, 3};
  whole.forward(ex.rows(0, 4), {nullptr, nullptr, nullptr, &key, 40});
  const ElectraStepRecord all = whole.record();
  const int N = c.predictions(ex.L);
  for (int half = 0; half < 2; half++) {
    halves.forward(ex.rows(2 * half, 2), {nullptr, nullptr, nullptr, &key, 40 + 2 * (uint64_t)half});
    const ElectraStepRecord& r = halves.record();
    const auto part = [&](const std::vector<int32_t>& v, int width) {
      return std::vector<int32_t>(v.begin() + 2 * half * width, v.begin() + (2 * half + 2) * width);
    };
    EXPECT_EQ(r.masked.masked_ids, part(all.masked.masked_ids, ex.L)) << half;
    EXPECT_EQ(r.masked.positions, part(all.masked.positions, N)) << half;
    EXPECT_EQ(r.sampled, part(all.sampled, N)) << half;
    EXPECT_EQ(r.fake.ids, part(all.fake.ids, ex.L)) << half;
    EXPECT_EQ(r.fake.labels, part(all.fake.labels, ex.L)) << half;
  }
  // Another iteration draws other positions.
  const ElectraDrawKey next{99, 4};
  whole.forward(ex.rows(0, 4), {nullptr, nullptr, nullptr, &next, 40});
  EXPECT_NE(whole.record().masked.positions, all.masked.positions);
}

TEST(ElectraDraws, TheGeneratorsDrawsGivenAsArraysMakeTheSameStep) {
  const ElectraConfig c = small_config();
  Electra a(c, kernels::cpu_backend()), b(c, kernels::cpu_backend());
  a.init_weights(21);
  b.init_weights(21);
  const Examples ex;
  const int N = c.predictions(ex.L), V = c.vocab_size;
  const ElectraDrawKey key{7, 1};
  std::vector<double> pos(ex.B * N), keep(ex.B * N), gumbel((size_t)ex.B * N * V);
  for (int s = 0; s < ex.B; s++) {
    electra_uniform_row(key, 100 + s, ElectraDrawSite::POSITIONS, 0, N, pos.data() + s * N);
    electra_uniform_row(key, 100 + s, ElectraDrawSite::KEEP, 0, N, keep.data() + s * N);
    electra_uniform_row(key, 100 + s, ElectraDrawSite::GUMBEL, 0, (uint64_t)N * V, gumbel.data() + (size_t)s * N * V);
  }
  const ElectraLosses la = a.forward(ex.rows(0, 4), {nullptr, nullptr, nullptr, &key, 100});
  const ElectraLosses lb = b.forward(ex.rows(0, 4), {pos.data(), keep.data(), gumbel.data()});
  EXPECT_EQ(la.total, lb.total);
  EXPECT_EQ(a.record().fake.ids, b.record().fake.ids);
  EXPECT_GT(a.record().fake.replaced, 0);
  a.backward();
  b.backward();
  std::vector<float> ga(a.num_parameters()), gb(b.num_parameters());
  kernels::cpu_backend().copy_to_host(ga.data(), a.grads(), ga.size() * sizeof(float));
  kernels::cpu_backend().copy_to_host(gb.data(), b.grads(), gb.size() * sizeof(float));
  EXPECT_EQ(ga, gb);
}

}  // namespace
}  // namespace lmforge::model

namespace lmforge::model {
namespace {

// Training forwards: dropout masks are a pure function of the step (the same step gives the same loss and gradients,
// another micro-batch index other masks), and bf16 compute stays close to fp32.
TEST(ElectraTraining, DropoutIsAPureFunctionOfTheStepAndBf16StaysCloseToFp32) {
  ElectraConfig c = small_config();
  c.hidden_dropout = c.attention_dropout = 0.1f;
  Electra m(c, kernels::cpu_backend());
  m.init_weights(3);
  const Examples ex;
  const ElectraDrawKey key{5, 2};
  const ElectraDraws draws{nullptr, nullptr, nullptr, &key, 0};
  const ElectraLosses eval = m.forward(ex.rows(0, 4), draws);
  layers::ForwardStep step{true, 17, 2, 0};
  const ElectraLosses t1 = m.forward(ex.rows(0, 4), draws, &step);
  m.zero_grad();
  m.backward();
  std::vector<float> g1(m.num_parameters()), g2(m.num_parameters());
  kernels::cpu_backend().copy_to_host(g1.data(), m.grads(), g1.size() * sizeof(float));
  const ElectraLosses t2 = m.forward(ex.rows(0, 4), draws, &step);
  m.zero_grad();
  m.backward();
  kernels::cpu_backend().copy_to_host(g2.data(), m.grads(), g2.size() * sizeof(float));
  EXPECT_EQ(t1.total, t2.total);
  EXPECT_EQ(g1, g2);
  EXPECT_NE(t1.disc, eval.disc);
  step.micro_batch = 1;
  EXPECT_NE(m.forward(ex.rows(0, 4), draws, &step).disc, t1.disc);

  Electra half(small_config(), kernels::cpu_backend());
  half.set_compute_dtype(kernels::DType::BF16);
  half.init_weights(3);
  half.params_updated();
  const ElectraLosses bf16 = half.forward(ex.rows(0, 4), draws);
  half.backward();
  Electra full(small_config(), kernels::cpu_backend());
  full.init_weights(3);
  const ElectraLosses fp32 = full.forward(ex.rows(0, 4), draws);
  EXPECT_NEAR(bf16.mlm, fp32.mlm, 0.02 * fp32.mlm);
  EXPECT_NEAR(bf16.disc, fp32.disc, 0.02 * fp32.disc);
}

}  // namespace
}  // namespace lmforge::model
