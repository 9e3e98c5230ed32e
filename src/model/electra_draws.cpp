// defines: ELECTRA's counter-based draws (electra_uniform, electra_uniform_row)
#include "model/electra_draws.h"

// The CPU kernels' Philox4x32-10 (the one dropout masks come from); a pure function, usable on the host whatever
// the run's device.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/philox_lanes.h"

namespace lmforge::model {
namespace {

// splitmix64's finaliser (as dropout's stream derivation): distinct (iteration, sample, site) give distinct streams
// with overwhelming probability.
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Stream {
  uint32_t key[2];
  uint64_t stream;
  Stream(const ElectraDrawKey& k, uint64_t sample, ElectraDrawSite site)
      : key{(uint32_t)k.seed, (uint32_t)(k.seed >> 32)},
        stream(mix(mix(mix(k.iteration) ^ sample) ^ (0x454c4543ull << 8 | (uint64_t)site))) {}
  // Elements [i, i + kPhiloxLanes) at once (the lanes' Philox: a sampling step draws [B·N, vocab] of these, ~18.5M
  // at ELECTRA-Small's batch 32).
  void block(uint64_t i, double* out) const {
    uint32_t w[4][kernels::cpu::kPhiloxLanes];
    kernels::cpu::philox4x32_10_lanes(i, stream, key[0], key[1], w);
#pragma omp simd
    for (int l = 0; l < kernels::cpu::kPhiloxLanes; l++) {
      out[l] = kernels::cpu::philox_uniform53(w[0][l], w[1][l]);
    }
  }
  double at(uint64_t i) const {
    const uint32_t counter[4] = {(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    uint32_t w[4];
    kernels::cpu::philox4x32_10(counter, key, w);
    const uint64_t bits = ((uint64_t)(w[0] >> 5) << 26) + (w[1] >> 6);  // 53 bits
    return (double)bits * (1.0 / 9007199254740992.0);                   // · 2⁻⁵³
  }
};

}  // namespace

double electra_uniform(const ElectraDrawKey& key, uint64_t sample, ElectraDrawSite site, uint64_t i) {
  return Stream(key, sample, site).at(i);
}

void electra_uniform_row(const ElectraDrawKey& key, uint64_t sample, ElectraDrawSite site, uint64_t first,
                         uint64_t n, double* out) {
  const Stream s(key, sample, site);
  uint64_t j = 0;
  for (; j + kernels::cpu::kPhiloxLanes <= n; j += kernels::cpu::kPhiloxLanes) s.block(first + j, out + j);
  for (; j < n; j++) out[j] = s.at(first + j);
}

}  // namespace lmforge::model
