// defines: lmforge::model::ElectraDrawSite, ElectraDrawKey, electra_uniform(), electra_uniform_row() — ELECTRA's
//          masking and sampling draws from the counter-based generator dropout uses (Philox4x32-10), a pure function
//          of (seed, iteration, global sample index, site, element)
#pragma once
#include <cstdint>

namespace lmforge::model {

// Which of a step's random numbers: pretrain_helpers.mask's position draws [N] and 85/15 draws [N] per sample, and
// sample_from_softmax's uniforms [N, vocab] per sample.
enum class ElectraDrawSite : uint32_t { POSITIONS = 0, KEEP = 1, GUMBEL = 2 };

// What the draws of a step depend on: the run's seed and the optimizer step. A sample's draws are keyed by its
// GLOBAL index in the run's sample order, so they are the same on every data-parallel layout, micro-batch split and
// resume point (as dropout masks are keyed by the global micro-batch).
struct ElectraDrawKey {
  uint64_t seed = 0;
  uint64_t iteration = 0;
};

// Element i of a sample's draws at `site`: u ∈ [0, 1) with 53 random bits, from Philox4x32-10 keyed by the seed
// (low, high 32 bits), counter (i low, i high, stream low, stream high), stream = splitmix64 mix of (iteration,
// sample, site); u = ((w0 >> 5)·2²⁶ + (w1 >> 6))·2⁻⁵³ from the block's first two words (numpy's random_double rule).
double electra_uniform(const ElectraDrawKey& key, uint64_t sample, ElectraDrawSite site, uint64_t i);
// Elements [first, first + n) of the same into out.
void electra_uniform_row(const ElectraDrawKey& key, uint64_t sample, ElectraDrawSite site, uint64_t first,
                         uint64_t n, double* out);

}  // namespace lmforge::model
