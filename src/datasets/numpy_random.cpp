// defines: NumpyRandomState (MT19937 as numpy's legacy RandomState runs it)
#include "datasets/numpy_random.h"

#include <cmath>

#include "util/error.h"

namespace lmforge::datasets {

namespace {
constexpr int kN = 624;
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpper = 0x80000000U;
constexpr uint32_t kLower = 0x7fffffffU;
}  // namespace

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  // init_genrand: key[i] = 1812433253·(key[i−1] ^ (key[i−1] >> 30)) + i (mod 2^32).
  key_[0] = seed;
  for (int i = 1; i < kN; ++i) key_[i] = 1812433253U * (key_[i - 1] ^ (key_[i - 1] >> 30)) + uint32_t(i);
  pos_ = kN;
}

void NumpyRandomState::twist() {
  // The reference recurrence, split into three loops so no index needs a modulo.
  auto mix = [](uint32_t upper, uint32_t lower, uint32_t far) {
    const uint32_t y = (upper & kUpper) | (lower & kLower);
    return far ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
  };
  int i = 0;
  for (; i < kN - kM; ++i) key_[i] = mix(key_[i], key_[i + 1], key_[i + kM]);
  for (; i < kN - 1; ++i) key_[i] = mix(key_[i], key_[i + 1], key_[i + kM - kN]);
  key_[kN - 1] = mix(key_[kN - 1], key_[0], key_[kM - 1]);
  pos_ = 0;
}

uint32_t NumpyRandomState::next_uint32() {
  if (pos_ == kN) twist();
  uint32_t y = key_[pos_++];
  // Tempering.
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t NumpyRandomState::next_uint64() {
  const uint64_t hi = next_uint32();
  return (hi << 32) | next_uint32();
}

uint64_t NumpyRandomState::random_interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (next_uint32() & mask)) > max) {
    }
  } else {
    while ((value = (next_uint64() & mask)) > max) {
    }
  }
  return value;
}

double NumpyRandomState::random_sample() {
  const int32_t a = int32_t(next_uint32() >> 5);
  const int32_t b = int32_t(next_uint32() >> 6);
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

int64_t NumpyRandomState::randint(int64_t low, int64_t high) {
  if (high <= low) throw Error("randint: high (" + std::to_string(high) + ") must exceed low (" + std::to_string(low) + ")");
  // numpy computes the range as unsigned high−1−low and draws with the same masked rejection (32-bit draws when it
  // fits), so random_interval is the same draw.
  const uint64_t rng = uint64_t(high) - 1 - uint64_t(low);
  return int64_t(uint64_t(low) + random_interval(rng));
}

int64_t NumpyRandomState::choice_index(std::span<const double> cdf) {
  const double u = random_sample();
  int64_t index = 0;
  for (const double c : cdf) index += c <= u ? 1 : 0;  // searchsorted(u, side="right") on a sorted cdf
  return index;
}

int64_t NumpyRandomState::geometric(double p) {
  if (!(p > 0 && p <= 1)) throw Error("geometric: p = " + std::to_string(p) + " outside (0, 1]");
  if (p >= 0.333333333333333333333333) {
    // random_geometric_search: X = 1, sum = prod = p; while u > sum: prod *= q, sum += prod, X++.
    const double u = random_sample();
    const double q = 1.0 - p;
    double sum = p, prod = p;
    int64_t x = 1;
    while (u > sum) {
      prod *= q;
      sum += prod;
      ++x;
    }
    return x;
  }
  // random_geometric_inversion (numpy 1.24): P(X > k) = q^k, so X = ceil(log(1 − u) / log(q)).
  return int64_t(std::ceil(std::log(1.0 - random_sample()) / std::log(1.0 - p)));
}

std::vector<double> choice_cdf(std::span<const double> p) {
  std::vector<double> cdf(p.size());
  double running = 0;
  for (size_t i = 0; i < p.size(); ++i) cdf[i] = running += p[i];
  const double last = cdf.empty() ? 1.0 : cdf.back();
  for (double& c : cdf) c /= last;
  return cdf;
}

}  // namespace lmforge::datasets
