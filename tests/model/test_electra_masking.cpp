// defines: tests of ELECTRA's host-side step pieces (model/electra_masking.h) on the reference's traps
//          (electra-reference-notes §3, §5): float32 product rounded half to even, N from the mask probability,
//          positions drawn with replacement, 85 % [MASK] / 15 % unchanged, scatter_update's floor average of
//          duplicated positions, position 0 ignored, a sample equal to the original labelled real
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
