// defines: ELECTRA's counter-based draws (electra_uniform, electra_uniform_row)
#include "model/electra_draws.h"

// The CPU kernels' Philox4x32-10 (the one dropout masks come from); a pure function, usable on the host whatever
// the run's device.
#include "kernels/cpu/cpu_ops.h"

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
  // Elements [i, i + kLanes) at once: the same Philox4x32-10 rounds as kernels::cpu::philox4x32_10 written over
  // lanes, which the compiler vectorises (the 32 x 32 → 64-bit products as packed multiplies); a sampling step draws
  // [B·N, vocab] of these (~18.5M at ELECTRA-Small's batch 32), one scalar Philox block each.
  static constexpr int kLanes = 8;
  void block(uint64_t i, double* out) const {
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int l = 0; l < kLanes; l++)
      c0[l] = (uint32_t)(i + l), c1[l] = (uint32_t)((i + l) >> 32), c2[l] = (uint32_t)stream,
      c3[l] = (uint32_t)(stream >> 32);
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
      if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
#pragma omp simd
      for (int l = 0; l < kLanes; l++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32),
                       lo1 = (uint32_t)p1;
        c0[l] = hi1 ^ c1[l] ^ k0;
        c1[l] = lo1;
        c2[l] = hi0 ^ c3[l] ^ k1;
        c3[l] = lo0;
      }
    }
#pragma omp simd
    for (int l = 0; l < kLanes; l++) {
      const uint64_t bits = ((uint64_t)(c0[l] >> 5) << 26) + (c1[l] >> 6);
      out[l] = (double)bits * (1.0 / 9007199254740992.0);
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
  for (; j + Stream::kLanes <= n; j += Stream::kLanes) s.block(first + j, out + j);
  for (; j < n; j++) out[j] = s.at(first + j);
}

}  // namespace lmforge::model
