// defines: tests of ELECTRA's host-side step pieces (model/electra_masking.h) on the reference's traps
//          (electra-reference-notes §3, §5): float32 product rounded half to even, N from the mask probability,
//          positions drawn with replacement, 85 % [MASK] / 15 % unchanged, scatter_update's floor average of
//          duplicated positions, position 0 ignored, a sample equal to the original labelled real
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/electra_masking.h"
#include "util/error.h"

namespace lmforge::model {
namespace {

TEST(ElectraMasking, PredictionCountsFollowTheReference) {
  EXPECT_EQ(electra_max_predictions(0.15, 128), 19);
  EXPECT_EQ(electra_max_predictions(0.15, 512), 79);
  EXPECT_EQ(electra_max_predictions(0.25, 512), 130);
  EXPECT_EQ(electra_num_to_predict(10, 0.25, 19), 2);   // 2.5 rounds half to even
  EXPECT_EQ(electra_num_to_predict(14, 0.25, 19), 4);   // 3.5 rounds half to even
  EXPECT_EQ(electra_num_to_predict(73, 0.15, 19), 11);  // 10.95
  EXPECT_EQ(electra_num_to_predict(2, 0.15, 19), 1);    // at least one
  EXPECT_EQ(electra_num_to_predict(512, 0.15, 19), 19); // at most N
}

TEST(ElectraMasking, DrawsPickCandidatesWithReplacementAndMaskAtEightyFivePercent) {
  // [CLS] 7 8 [SEP] 9 [SEP] pad pad: candidates are positions 1, 2, 4.
  const std::vector<int32_t> ids{101, 7, 8, 102, 9, 102, 0, 0}, mask{1, 1, 1, 1, 1, 1, 0, 0};
  const int N = 3;
  // num = round(6·0.5) = 3: slots pick candidates ⌊u·3⌋ = 2, 2, 0 → positions 4, 4, 1.
  const std::vector<double> pos_u{0.9, 0.7, 0.1}, keep_u{0.9, 0.5, 0.95};
  const ElectraMasked m = electra_mask(ids.data(), mask.data(), 1, 8, N, 0.5, {}, pos_u.data(), keep_u.data());
  EXPECT_EQ(m.positions, (std::vector<int32_t>{4, 4, 1}));
  EXPECT_EQ(m.labels, (std::vector<int32_t>{9, 9, 7}));
  EXPECT_EQ(m.weights, (std::vector<float>{1, 1, 1}));
  // Position 4 is masked by its second slot; position 1 stays (0.95 ≥ 0.85).
  EXPECT_EQ(m.masked_ids, (std::vector<int32_t>{101, 7, 8, 102, 103, 102, 0, 0}));
}

TEST(ElectraMasking, SlotsBeyondTheCountPointAtPositionZeroWithWeightZero) {
  const std::vector<int32_t> ids{101, 7, 102, 0}, mask{1, 1, 1, 0};
  const std::vector<double> pos_u{0.5, 0.5}, keep_u{0.1, 0.1};
  const ElectraMasked m = electra_mask(ids.data(), mask.data(), 1, 4, 2, 0.15, {}, pos_u.data(), keep_u.data());
  EXPECT_EQ(m.positions, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(m.labels, (std::vector<int32_t>{7, 0}));
  EXPECT_EQ(m.weights, (std::vector<float>{1, 0}));
  EXPECT_EQ(m.masked_ids, (std::vector<int32_t>{101, 103, 102, 0}));
}

TEST(ElectraMasking, ARowWithoutCandidatesOrADrawOutsideTheUnitIntervalIsAnError) {
  const std::vector<int32_t> ids{101, 102}, mask{1, 1};
  const std::vector<double> u{0.5};
  EXPECT_THROW(electra_mask(ids.data(), mask.data(), 1, 2, 1, 0.15, {}, u.data(), u.data()), Error);
  const std::vector<int32_t> ids2{101, 7, 102}, mask2{1, 1, 1};
  const std::vector<double> bad{1.0};
  EXPECT_THROW(electra_mask(ids2.data(), mask2.data(), 1, 3, 1, 0.15, {}, bad.data(), u.data()), Error);
}

TEST(ElectraMasking, GumbelArgmaxAddsTheNoiseToTheScaledLogits) {
  // Equal logits: the largest u gives the largest g = −log(−log u).
  const std::vector<float> logits{0, 0, 0, 5, 0, 0};
  const std::vector<double> u{0.2, 0.9, 0.5, 0.01, 0.3, 0.999};
  auto rows = [&](int64_t m, double* out) { std::copy(u.begin() + 3 * m, u.begin() + 3 * (m + 1), out); };
  const std::vector<int32_t> s = electra_gumbel_sample(logits.data(), 2, 3, 1.0, rows);
  // Row 1: 5 − log(−log 0.01) = 3.47 < −log(−log 0.999) = 6.9.
  EXPECT_EQ(s, (std::vector<int32_t>{1, 2}));
  // A low temperature lets the logit win.
  EXPECT_EQ(electra_gumbel_sample(logits.data(), 2, 3, 0.1, rows)[1], 0);
}

// The sampler skips the logarithms of draws that cannot win (electra_gumbel_sample); its choices must be the plain
// argmax over every draw: rows of flat, spread and peaked logits, temperatures below and above 1, uniforms near 0
// and 1 (u + 1e-9 rounding to 1 and above), exact ties (the first wins), and on a team of threads.
TEST(ElectraMasking, GumbelSamplingEqualsThePlainArgmaxOverEveryDraw) {
  const int64_t M = 64, V = 3001;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits((size_t)(M * V));
  std::vector<double> u((size_t)(M * V));
  for (int64_t m = 0; m < M; m++) {
    const float spread = m % 4 == 0 ? 0.02f : m % 4 == 1 ? 1.0f : m % 4 == 2 ? 8.0f : 0.0f;
    for (int64_t v = 0; v < V; v++) {
      logits[(size_t)(m * V + v)] = spread * normal(rng);
      double x = unit(rng);
      if (m % 8 == 5 && v % 97 == 0) x = 1.0 - std::ldexp(1.0, -53) * (double)(1 + v % 5);  // u + 1e-9 >= 1
      if (m % 8 == 6 && v % 89 == 0) x = std::ldexp(1.0, -40) * (double)(v % 3);             // near and at 0
      u[(size_t)(m * V + v)] = x;
    }
  }
  // Row 7: two equal best draws on equal logits; the first must win.
  std::fill(logits.begin() + 7 * V, logits.begin() + 8 * V, 0.0f);
  u[(size_t)(7 * V + 100)] = u[(size_t)(7 * V + 2000)] = 0.9999999;
  const auto rows = [&](int64_t m, double* out) { std::copy_n(u.begin() + m * V, V, out); };
  for (double T : {1.0, 0.25, 3.0}) {
    const std::vector<int32_t> got = electra_gumbel_sample(logits.data(), M, V, T, rows);
    for (int64_t m = 0; m < M; m++) {
      double best = -INFINITY;
      int32_t arg = 0;
      for (int64_t v = 0; v < V; v++) {
        const size_t i = (size_t)(m * V + v);
        const double x = (double)logits[i] / T - std::log(-std::log(u[i] + 1e-9) + 1e-9);
        if (x > best) best = x, arg = (int32_t)v;
      }
      ASSERT_EQ(got[(size_t)m], arg) << "row " << m << ", temperature " << T;
    }
    EXPECT_EQ(got[7], 100);
  }
}

TEST(ElectraMasking, DuplicatedPositionsGetTheFloorAverageAndEqualSamplesAreReal) {
  const std::vector<int32_t> ids{101, 20, 30, 40, 102};
  // Slots: position 1 twice (samples 10 and 13 → ⌊23/2⌋ = 11), position 2 with its own id (real), position 0
  // (a weight-0 slot: ignored).
  const std::vector<int32_t> positions{1, 1, 2, 0}, sampled{10, 13, 30, 55};
  const ElectraFake f = electra_fake_data(ids.data(), 1, 5, 4, positions.data(), sampled.data());
  EXPECT_EQ(f.ids, (std::vector<int32_t>{101, 11, 30, 40, 102}));
  EXPECT_EQ(f.labels, (std::vector<int32_t>{0, 1, 0, 0, 0}));
  EXPECT_EQ(f.replaced, 1);
}

}  // namespace
}  // namespace lmforge::model
