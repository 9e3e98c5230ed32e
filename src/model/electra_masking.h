// defines: lmforge::model::ElectraTokens, ElectraMasked, electra_max_predictions(), electra_num_to_predict(),
//          electra_mask() (pretrain_helpers.mask from given uniform draws), electra_gumbel_sample()
//          (sample_from_softmax from given draws), ElectraFake, electra_fake_data() (_get_fake_data with
//          scatter_update's duplicate rule) — the host-side steps of one ELECTRA step (electra-reference-notes §3)
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace lmforge::model {

// The special ids masking looks at (bert-base-uncased: [CLS] 101, [SEP] 102, [MASK] 103).
struct ElectraTokens {
  int32_t cls = 101, sep = 102, mask = 103;
};

// N = int((mask_prob + 0.005) · L) (19 at L 128 with 0.15), as configure_pretraining.py computes
// max_predictions_per_seq.
int electra_max_predictions(double mask_prob, int seq_length);
// num = max(1, min(N, round_half_even(float32(#tokens) · float32(mask_prob)))) — TF's float32 product and round.
int electra_num_to_predict(int tokens, double mask_prob, int N);

// pretrain_helpers.mask over B rows of L ids, its random numbers given: pos_u [B, N] picks slot j's position as
// candidate ⌊u·C⌋ of the row's C candidates in ascending order (a draw with replacement, uniform over the
// candidates: input_mask 1 and not [CLS]/[SEP]/[MASK]); keep_u [B, N] < 0.85 sends the slot's position to [MASK].
struct ElectraMasked {
  int B = 0, L = 0, N = 0;
  std::vector<int32_t> masked_ids;  // [B, L]: the generator's input
  std::vector<int32_t> positions;   // [B, N]: slot j < num: its position; else 0
  std::vector<int32_t> labels;      // [B, N]: slot j < num: the original id there; else 0
  std::vector<float> weights;       // [B, N]: 1 for slots < num, else 0
  std::vector<int32_t> num;         // [B]: the slots that predict
};
// Throws lmforge::Error when a row has no candidate, or a draw lies outside [0, 1).
ElectraMasked electra_mask(const int32_t* ids, const int32_t* input_mask, int B, int L, int N, double mask_prob,
                           const ElectraTokens& tokens, const double* pos_u, const double* keep_u);

// sample_from_softmax: argmax_v(logits[m, v] / T + g), g = −log(−log(u + 1e-9) + 1e-9), in double, over M rows of
// V logits; the first maximum wins (as tf.argmax). logits fp32 [M, V]; gumbel_row(m, u) writes row m's V uniforms
// into u (one row at a time: a step's [B·N, V] uniforms are never held at once). Rows are sampled on the OpenMP
// team, so gumbel_row is called from several threads at once (for different rows): it must be safe to be, and must
// not throw (an exception cannot leave the parallel region).
std::vector<int32_t> electra_gumbel_sample(const float* logits, int64_t M, int64_t V, double temperature,
                                           const std::function<void(int64_t m, double* u)>& gumbel_row);

// _get_fake_data: the original ids with the samples scattered in at the positions through scatter_update (updates to
// position 0 ignored; a position written by c slots gets ⌊Σ updates / c⌋); label 1 where a position was written
// and its id changed.
struct ElectraFake {
  std::vector<int32_t> ids;     // [B, L]: the discriminator's input
  std::vector<int32_t> labels;  // [B, L]: 1 replaced, 0 original
  int replaced = 0;
};
ElectraFake electra_fake_data(const int32_t* ids, int B, int L, int N, const int32_t* positions,
                              const int32_t* sampled);

}  // namespace lmforge::model
