// defines: dataset blending as Megatron M23's BlendedMegatronDatasetBuilder and BlendedDataset do it
#include "datasets/blending.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/error.h"
#include "util/strings.h"

namespace lmforge::datasets {

namespace {

double parse_weight(const std::string& text) {
  const std::string t = python_strip(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v))
    throw Error("--data-path: \"" + text + "\" is not a weight (expected \"w1 prefix1 w2 prefix2 ...\")");
  if (v < 0) throw Error("--data-path: weight " + text + " is negative");
  return v;
}

// numpy's pairwise_sum for float64 (PW_BLOCKSIZE 128, unrolled by 8).
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

double numpy_sum(std::span<const double> values) { return 0.0 + pairwise_sum(values.data(), values.size()); }

std::vector<double> normalize_weights(std::span<const double> weights) {
  const double sum = numpy_sum(weights);
  if (!(sum > 0.0)) throw Error("--data-path: the weights sum to " + std::to_string(sum) + "; they must be positive");
  std::vector<double> out(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) out[i] = weights[i] / sum;
  return out;
}

std::vector<BlendEntry> parse_data_path(const std::vector<std::string>& args) {
  if (args.empty()) throw Error("--data-path: no dataset given");
  if (args.size() == 1) return {BlendEntry{args[0], 1.0}};
  if (args.size() % 2 != 0)
    throw Error("--data-path: " + std::to_string(args.size()) +
                " values; a blend is pairs \"weight prefix\" (or a single prefix)");
  std::vector<double> raw;
  std::vector<BlendEntry> out;
  for (size_t i = 0; i < args.size(); i += 2) {
    raw.push_back(parse_weight(args[i]));
    out.push_back(BlendEntry{python_strip(args[i + 1]), 0.0});
  }
  const std::vector<double> w = normalize_weights(raw);
  for (size_t i = 0; i < out.size(); ++i) out[i].weight = w[i];
  return out;
}

std::vector<std::array<int64_t, 3>> blend_sizes(std::span<const double> weights, const std::array<int64_t, 3>& per_split) {
  std::vector<std::array<int64_t, 3>> out(weights.size());
  for (size_t d = 0; d < weights.size(); ++d)
    for (int s = 0; s < 3; ++s)
      // Python evaluates target · weight · 1.005 left to right in float64.
      out[d][size_t(s)] = int64_t(std::ceil(double(per_split[size_t(s)]) * weights[d] * 1.005));
  return out;
}

void build_blending_indices(std::span<const double> weights, int64_t size, std::vector<int16_t>& dataset_index,
                            std::vector<int64_t>& dataset_sample_index) {
  if (weights.empty() || weights.size() >= 32767)
    throw Error("blending needs between 1 and 32766 datasets, got " + std::to_string(weights.size()));
  dataset_index.assign(size_t(size), 0);
  dataset_sample_index.assign(size_t(size), 0);
  std::vector<int64_t> current(weights.size(), 0);
  for (int64_t s = 0; s < size; ++s) {
    // Megatron uses max(s, 1) (not s + 1): samples 0 and 1 see the same targets.
    const double sd = std::max(double(s), 1.0);
    size_t best = 0;
    double best_error = weights[0] * sd - double(current[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * sd - double(current[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    dataset_index[size_t(s)] = int16_t(best);
    dataset_sample_index[size_t(s)] = current[best];
    ++current[best];
  }
}

}  // namespace lmforge::datasets
