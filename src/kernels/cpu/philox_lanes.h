// defines: kPhiloxLanes, philox4x32_10_lanes() (Philox4x32-10 of kPhiloxLanes consecutive counter blocks at once,
//          vectorised: the same words as philox4x32_10() per block), philox_uniform53()
#pragma once
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lmforge::kernels::cpu {

// Why: dropout masks (dropout_cpu.cpp, attention_cpu.cpp) and ELECTRA's sampling draws (model/electra_draws.cpp)
// take one Philox block per 4 elements (per element for the draws), and one block at a time runs the ten rounds'
// 32 x 32 → 64-bit products as scalar multiplies; over lanes they become packed multiplies. In profiles of an
// ELECTRA-Small step the scalar blocks were ~8 % of the samples.
inline constexpr int kPhiloxLanes = 8;

// w[r][l] = word r of Philox4x32-10 at counter (block + l low 32 bits, high 32 bits, stream low, stream high) under
// key (k0, k1), for l in [0, kPhiloxLanes): the rounds of philox4x32_10() (dropout_cpu.cpp). With AVX2 in
// intrinsics (GCC's vectorisation of the portable loop below widens every lane to 64 bits and ran 2.5x slower):
// _mm256_mul_epu32 multiplies the even lanes, and the odd ones shifted down, into 64-bit products, whose halves
// are blended back into the lanes' hi and lo words.
inline void philox4x32_10_lanes(uint64_t block, uint64_t stream, uint32_t k0, uint32_t k1,
                                uint32_t w[4][kPhiloxLanes]) {
  static_assert(kPhiloxLanes == 8);
  alignas(32) uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; l++) {
    const uint64_t j = block + (uint64_t)l;
    c0[l] = (uint32_t)j, c1[l] = (uint32_t)(j >> 32);
  }
#if defined(__AVX2__)
  __m256i x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(c0));
  __m256i x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(c1));
  __m256i x2 = _mm256_set1_epi32((int)(uint32_t)stream), x3 = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  for (int round = 0; round < 10; round++) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const __m256i even0 = _mm256_mul_epu32(x0, m0), odd0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
    const __m256i even1 = _mm256_mul_epu32(x2, m1), odd1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
    const __m256i lo0 = _mm256_blend_epi32(even0, _mm256_slli_epi64(odd0, 32), 0xAA);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(even0, 32), odd0, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(even1, _mm256_slli_epi64(odd1, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(even1, 32), odd1, 0xAA);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
    x0 = n0, x1 = lo1, x2 = n2, x3 = lo0;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[0]), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[1]), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2]), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[3]), x3);
#else
  uint32_t c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; l++) c2[l] = (uint32_t)stream, c3[l] = (uint32_t)(stream >> 32);
  for (int round = 0; round < 10; round++) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
#pragma omp simd
    for (int l = 0; l < kPhiloxLanes; l++) {
      const uint64_t p0 = (uint64_t)0xD2511F53u * c0[l], p1 = (uint64_t)0xCD9E8D57u * c2[l];
      const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
      c0[l] = hi1 ^ c1[l] ^ k0;
      c1[l] = lo1;
      c2[l] = hi0 ^ c3[l] ^ k1;
      c3[l] = lo0;
    }
  }
  for (int l = 0; l < kPhiloxLanes; l++) w[0][l] = c0[l], w[1][l] = c1[l], w[2][l] = c2[l], w[3][l] = c3[l];
#endif
}

// The 53-bit uniform of a block's first two words, ((w0 >> 5)·2²⁶ + (w1 >> 6))·2⁻⁵³ (numpy's random_double), from
// two exact int32 → double conversions (the 64-bit integer one has no AVX2 instruction): both parts are below 2²⁷,
// the scaled sum below 2⁵³, so every step is exact and the value that of the 64-bit form.
#pragma omp declare simd
inline double philox_uniform53(uint32_t w0, uint32_t w1) {
  return ((double)(int32_t)(w0 >> 5) * 67108864.0 + (double)(int32_t)(w1 >> 6)) * (1.0 / 9007199254740992.0);
}

}  // namespace lmforge::kernels::cpu
