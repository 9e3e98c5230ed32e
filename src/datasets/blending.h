// defines: Megatron (M23) dataset blending: --data-path parsing, weight normalisation, per-dataset sample counts
//   (ceil(w·n·1.005)) and helpers.cpp build_blending_indices
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lmforge::datasets {

struct BlendEntry {
  std::string prefix;  // as given (M23 strips surrounding whitespace from blended prefixes only)
  double weight = 1.0;  // normalised
};
// "--data-path p" (one prefix, weight 1, used as is) or "w1 p1 w2 p2 …" (weights parsed as Python float, prefixes
// stripped, weights normalised). Error for an odd count, a bad weight, a negative weight or a zero sum.
std::vector<BlendEntry> parse_data_path(const std::vector<std::string>& args);

// numpy's float64 sum (pairwise, blocks of 8, as np.sum does for a contiguous array) — the summation order decides the
// last bit of the normalised weights, and those bits decide the greedy blending order.
double numpy_sum(std::span<const double> values);
// Megatron's normalize(): w / numpy.sum(w).
std::vector<double> normalize_weights(std::span<const double> weights);

// Samples asked of each dataset for each split: int(math.ceil(n_split · w · 1.005)) (0.5% margin, as M23).
std::vector<std::array<int64_t, 3>> blend_sizes(std::span<const double> weights, const std::array<int64_t, 3>& per_split);

// helpers.cpp build_blending_indices: for sample s, pick the dataset with the largest w_d·max(s, 1) − count_d (first
// one on ties); dataset_sample_index is that dataset's running count.
void build_blending_indices(std::span<const double> weights, int64_t size, std::vector<int16_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index);

}  // namespace lmforge::datasets
