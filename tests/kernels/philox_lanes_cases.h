// defines: the cases of philox4x32_10_lanes() and philox_uniform53() (kernels/cpu/philox_lanes.h), included by
//          test_philox_lanes.cpp (the CPU's own path: AVX2 where the build has it) and test_philox_lanes_portable.cpp
//          (compiled without AVX2, so the portable lanes are tested on every machine too), with PHILOX_SUITE set
#pragma once
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/philox_lanes.h"

namespace lmforge::kernels::cpu {

// Every lane's four words are the scalar philox4x32_10() of its block: counters whose low word carries into the
// high one between lanes, streams and keys with both halves set; and Random123's known answer for zeros.
TEST(PHILOX_SUITE, EveryLaneEqualsTheScalarBlock) {
  const uint64_t blocks[] = {0, 1, 0xFFFFFFFCull, 0x12345678FFFFFFFAull, ~uint64_t(0) - 3};
  const uint64_t streams[] = {0, 7, 0xDEADBEEF00000001ull};
  const uint32_t keys[][2] = {{0, 0}, {0x9E3779B9u, 0x01234567u}, {0xFFFFFFFFu, 0xFFFFFFFFu}};
  for (const uint64_t block : blocks)
    for (const uint64_t stream : streams)
      for (const auto& key : keys) {
        uint32_t w[4][kPhiloxLanes];
        philox4x32_10_lanes(block, stream, key[0], key[1], w);
        for (int l = 0; l < kPhiloxLanes; l++) {
          const uint64_t j = block + (uint64_t)l;
          const uint32_t counter[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
          uint32_t want[4];
          philox4x32_10(counter, key, want);
          for (int r = 0; r < 4; r++)
            ASSERT_EQ(w[r][l], want[r]) << "block " << block << " lane " << l << " word " << r << " stream " << stream;
        }
      }
  uint32_t w[4][kPhiloxLanes];
  philox4x32_10_lanes(0, 0, 0, 0, w);
  EXPECT_EQ(w[0][0], 0x6627e8d5u);  // Random123's kat_vectors: philox4x32 10 rounds, counter and key zero
  EXPECT_EQ(w[1][0], 0xe169c58du);
  EXPECT_EQ(w[2][0], 0xbc57ac4cu);
  EXPECT_EQ(w[3][0], 0x9b00dbd8u);
}

// The 53-bit uniform equals numpy's random_double form ((w0 >> 5) · 2^26 + (w1 >> 6)) · 2^-53 in 64-bit integers.
TEST(PHILOX_SUITE, Uniform53EqualsTheSixtyFourBitForm) {
  const uint32_t words[] = {0, 1, 31, 32, 63, 64, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFC0u, 0xFFFFFFFFu, 0x12345678u};
  for (const uint32_t a : words)
    for (const uint32_t b : words) {
      const uint64_t bits = ((uint64_t)(a >> 5) << 26) + (b >> 6);
      EXPECT_EQ(philox_uniform53(a, b), (double)bits / 9007199254740992.0) << a << " " << b;
    }
  EXPECT_LT(philox_uniform53(0xFFFFFFFFu, 0xFFFFFFFFu), 1.0);
}

}  // namespace lmforge::kernels::cpu
