// defines: NumpyRandomState — numpy's legacy RandomState (MT19937 seeded by init_genrand) and the draws Megatron uses
// Megatron shuffles its GPT indices with numpy.random.RandomState(seed).shuffle; reproducing its sample order bit for
// bit needs the same generator, the same bounded draw and the same Fisher–Yates order (megatron-data-format.md §6.2).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace lmforge::datasets {

class NumpyRandomState {
 public:
  // RandomState(seed) with an integer seed: MT19937 init_genrand(seed), as numpy's mt19937_seed.
  explicit NumpyRandomState(uint32_t seed);

  uint32_t next_uint32();
  // numpy's next_uint64 for MT19937: two 32-bit outputs, the first in the high half.
  uint64_t next_uint64();
  // Uniform in [0, max] by masked rejection: mask = smallest 2^k−1 ≥ max; 32-bit draws while max fits 32 bits,
  // 64-bit draws above (numpy's legacy random_interval).
  uint64_t random_interval(uint64_t max);
  // RandomState.shuffle of a 1-D array: for i = n−1 … 1 swap x[i] with x[random_interval(i)].
  // The element type does not change the draws, so int32, uint32 and int64 arrays shuffle alike.
  template <typename T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) {
      const uint64_t j = random_interval(i);
      const T t = x[i];
      x[i] = x[j];
      x[j] = t;
    }
  }
  // random_sample(): 53-bit double in [0, 1) from two draws: ((a>>5)·2^26 + (b>>6)) / 2^53.
  double random_sample();
  // randint(low, high) for the default int64 dtype: low + masked draw in [0, high−1−low] (high > low).
  // high − low = 1 returns low without a draw (mask 0).
  int64_t randint(int64_t low, int64_t high);
  // choice(values, p=p) with one uniform draw: the index of the first cdf entry > u (searchsorted side "right"),
  // where cdf is choice_cdf(p). Pass the cdf, computed once, so a hot loop allocates nothing.
  int64_t choice_index(std::span<const double> cdf);
  // numpy 1.24 legacy geometric(p), 0 < p ≤ 1: for p ≥ 1/3 a sequential search over the pmf, else inversion
  // ceil(log(1 − u) / log(1 − p)) — the formula numpy 1.24 ships (later numpy changed it; T5 spans depend on it).
  int64_t geometric(double p);

 private:
  void twist();
  std::array<uint32_t, 624> key_{};
  int pos_ = 624;
};

// numpy choice's cdf: cdf = cumsum(p) (sequential), then cdf /= cdf[-1]. p is used as given (numpy checks that it
// sums to 1 within its tolerance; callers pass normalised weights).
std::vector<double> choice_cdf(std::span<const double> p);

}  // namespace lmforge::datasets
