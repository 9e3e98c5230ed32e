// defines: PythonRandom's seeding (CPython's random_seed -> init_by_array), block regeneration (and tempering)
//          and _randbelow
#include "prep/python_random.h"

#include <algorithm>
#include <bit>

namespace lmforge::prep {

PythonRandom::PythonRandom(int64_t seed) {
  // CPython: key = the 32-bit words of abs(seed), least significant first; 0 gives the key [0].
  uint64_t magnitude = seed < 0 ? uint64_t(0) - static_cast<uint64_t>(seed) : static_cast<uint64_t>(seed);
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(magnitude));
    magnitude >>= 32;
  } while (magnitude != 0);

  // init_genrand(19650218)
  state_[0] = 19650218u;
  for (int i = 1; i < kN; ++i)
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  // init_by_array(key)
  int i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(kN, key.size()); k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000u;  // MSB set: the state is never all zero
  index_ = kN;
}

void PythonRandom::regenerate() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7FFFFFFFu, kMatrix = 0x9908B0DFu;
  int k = 0;
  for (; k < kN - kM; ++k) {
    const uint32_t y = (state_[k] & kUpper) | (state_[k + 1] & kLower);
    state_[k] = state_[k + kM] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  }
  for (; k < kN - 1; ++k) {
    const uint32_t y = (state_[k] & kUpper) | (state_[k + 1] & kLower);
    state_[k] = state_[k + (kM - kN)] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  }
  const uint32_t y = (state_[kN - 1] & kUpper) | (state_[0] & kLower);
  state_[kN - 1] = state_[kM - 1] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
  for (int i = 0; i < kN; ++i) {  // tempering
    uint32_t t = state_[i];
    t ^= t >> 11;
    t ^= (t << 7) & 0x9D2C5680u;
    t ^= (t << 15) & 0xEFC60000u;
    t ^= t >> 18;
    tempered_[i] = t;
  }
  index_ = 0;
}

uint64_t PythonRandom::randbelow_wide(uint64_t n, int bits) {
  // getrandbits(k > 32): words least significant first, the last one shifted to the remaining bits.
  for (;;) {
    uint64_t r = next32();
    r |= static_cast<uint64_t>(next32() >> (64 - bits)) << 32;
    if (r < n) return r;
  }
}

}  // namespace lmforge::prep
