// defines: tests of the bf16 and f16 storage conversions as the ops see them (copy between an f32 and a bf16/f16
//          view), against the compiler's _Float16 and a plain round-to-nearest-even bf16, and of the bf16 GEMM
//          path's availability
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

std::vector<float> interesting_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e6f, 6.1035156e-05f,
                          5.9604645e-08f, 2.9802322e-08f, 2.98023259e-08f, 1e-9f, 3.3895314e38f, 3.4028235e38f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          1.00390625f, 1.01171875f, 1.0009765625f, 1.00048828125f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> exponent(-30.0f, 20.0f);
  for (int i = 0; i < 20000; i++) v.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
  return v;
}

TEST(LowPrecisionStorage, F16RoundsToNearestEvenAndOverflowsToInf) {
  const std::vector<float> v = interesting_values();
  const int64_t n = (int64_t)v.size();
  Backend& be = cpu_backend();
  Buffer src(be, DType::F32, v.size()), half(be, DType::F16, v.size()), back(be, DType::F32, v.size());
  std::memcpy(src.f32(), v.data(), v.size() * 4);
  copy(half.view({1, n}), src.view({1, n}));
  copy(back.view({1, n}), half.view({1, n}));
  const uint16_t* h = static_cast<const uint16_t*>(half.data());
  for (size_t i = 0; i < v.size(); i++) {
    // The reference: the compiler's _Float16 (GCC), or the CPU's F16C conversion where the compiler has no
    // _Float16 on this target (clang 14 on x86, the sanitizer build) — both round to nearest even in hardware.
#if defined(__FLT16_MAX__)
    const _Float16 want = (_Float16)v[i];
    uint16_t bits;
    std::memcpy(&bits, &want, 2);
    const float want_back = (float)want;
#else
    const uint16_t bits = _cvtss_sh(v[i], _MM_FROUND_TO_NEAREST_INT);
    const float want_back = _cvtsh_ss(bits);
#endif
    ASSERT_EQ(h[i], bits) << "value " << v[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back.f32()[i]), std::bit_cast<uint32_t>(want_back)) << "value " << v[i];
  }
  EXPECT_TRUE(std::isinf(back.f32()[7]) && back.f32()[7] < 0) << "-65520 overflows";
  EXPECT_EQ(back.f32()[5], 65504.0f) << "65519 rounds down to the largest half";
}

TEST(LowPrecisionStorage, Bf16RoundsToNearestEvenAndKeepsNan) {
  std::vector<float> v = interesting_values();
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(std::bit_cast<float>(0x7F800001u));  // a NaN whose payload would round into inf
  const int64_t n = (int64_t)v.size();
  Backend& be = cpu_backend();
  Buffer src(be, DType::F32, v.size()), b16(be, DType::BF16, v.size()), back(be, DType::F32, v.size());
  std::memcpy(src.f32(), v.data(), v.size() * 4);
  copy(b16.view({n}), src.view({n}));
  copy(back.view({n}), b16.view({n}));
  for (size_t i = 0; i + 2 < v.size(); i++) {
    // Nearest even by exact arithmetic: the two bf16 neighbours of v and the one closer (ties: even mantissa).
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    if (std::isinf(v[i])) {
      ASSERT_EQ(back.f32()[i], v[i]);
      continue;
    }
    const float lo = std::bit_cast<float>(u & 0xFFFF0000u), hi = std::bit_cast<float>((u & 0xFFFF0000u) + 0x10000u);
    // Above the largest bf16 the upper neighbour is 2^128 (IEEE: rounding there overflows to inf).
    const double dhi_value = std::isinf(hi) ? std::ldexp(std::copysign(1.0, v[i]), 128) : (double)hi;
    const double dlo = std::fabs((double)v[i] - lo), dhi = std::fabs(dhi_value - v[i]);
    const float want = dlo < dhi ? lo : dhi < dlo ? hi : (((u >> 16) & 1u) ? hi : lo);
    ASSERT_EQ(back.f32()[i], want) << "value " << v[i];
  }
  EXPECT_TRUE(std::isnan(back.f32()[v.size() - 2]));
  EXPECT_TRUE(std::isnan(back.f32()[v.size() - 1]));
}

// This machine's figures depend on the bf16 instructions; the widened path is exercised wherever they are absent
// (and by tests/CMakeLists.txt's KernelsOpsBf16Widened everywhere).
TEST(LowPrecisionStorage, ReportsTheBf16GemmPath) {
  std::printf("bf16 linear layers: %s\n", bf16_gemm_cpu_path().c_str());
  SUCCEED();
}

}  // namespace
}  // namespace lmforge::kernels
