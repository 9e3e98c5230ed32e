// defines: grid(), operands for tests with exact references: n values k·scale, k uniform in [-kmax, kmax], so that
//          with few significant bits every product and sum the test forms is exact in fp32 (exact in f16 for
//          kmax < 2048, in bf16 for kmax <= 255)
#pragma once
#include <random>
#include <vector>

namespace lmforge::kernels::testing {

inline std::vector<float> grid(size_t n, int kmax, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(-kmax, kmax);
  std::vector<float> v(n);
  for (float& x : v) x = (float)k(rng) * scale;
  return v;
}

}  // namespace lmforge::kernels::testing
