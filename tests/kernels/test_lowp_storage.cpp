// defines: tests of the bf16 and f16 storage conversions as the ops see them (copy between an f32 and a bf16/f16
//          view), against the compiler's _Float16 and a plain round-to-nearest-even bf16, and of the bf16 GEMM
//          path's availability
#include <gtest/gtest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
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

// The interesting values with two NaNs last: a quiet one and one whose payload would round into inf.
std::vector<float> bf16_values() {
  std::vector<float> v = interesting_values();
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(std::bit_cast<float>(0x7F800001u));
  return v;
}

// got[i] (as fp32) is v[i] rounded to the nearest bf16, ties to even, for every i; the two last (NaN) stay NaN.
void expect_bf16_rounding(const std::vector<float>& v, const float* got, const char* what) {
  for (size_t i = 0; i + 2 < v.size(); i++) {
    // Nearest even by exact arithmetic: the two bf16 neighbours of v and the one closer (ties: even mantissa).
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    if (std::isinf(v[i])) {
      ASSERT_EQ(got[i], v[i]) << what;
      continue;
    }
    const float lo = std::bit_cast<float>(u & 0xFFFF0000u), hi = std::bit_cast<float>((u & 0xFFFF0000u) + 0x10000u);
    // Above the largest bf16 the upper neighbour is 2^128 (IEEE: rounding there overflows to inf).
    const double dhi_value = std::isinf(hi) ? std::ldexp(std::copysign(1.0, v[i]), 128) : (double)hi;
    const double dlo = std::fabs((double)v[i] - lo), dhi = std::fabs(dhi_value - v[i]);
    const float want = dlo < dhi ? lo : dhi < dlo ? hi : (((u >> 16) & 1u) ? hi : lo);
    ASSERT_EQ(got[i], want) << what << ": value " << v[i] << " at " << i;
  }
  EXPECT_TRUE(std::isnan(got[v.size() - 2])) << what;
  EXPECT_TRUE(std::isnan(got[v.size() - 1])) << what;
}

TEST(LowPrecisionStorage, Bf16RoundsToNearestEvenAndKeepsNan) {
  const std::vector<float> v = bf16_values();
  const int64_t n = (int64_t)v.size();
  Backend& be = cpu_backend();
  Buffer src(be, DType::F32, v.size()), b16(be, DType::BF16, v.size()), back(be, DType::F32, v.size());
  std::memcpy(src.f32(), v.data(), v.size() * 4);
  copy(b16.view({n}), src.view({n}));
  copy(back.view({n}), b16.view({n}));
  expect_bf16_rounding(v, back.f32(), "bf16");
}

// A bf16 destination with an fp32 mirror (Tensor::widened, the parameter store's working weights where products
// are widened): the values round as without one, and the mirror holds exactly their widening — from fp32 in one
// pass (aligned streaming stores with unaligned heads and tails: views starting at several offsets) and from any
// other copy after it.
TEST(LowPrecisionStorage, Bf16CopyWithAMirrorWritesItsExactWidening) {
  const std::vector<float> whole = bf16_values();
  Backend& be = cpu_backend();
  for (int64_t offset : {0, 3, 16, 29}) {
    const std::vector<float> v(whole.begin() + offset, whole.end());
    const int64_t n = (int64_t)v.size(), total = (int64_t)whole.size();
    Buffer src(be, DType::F32, whole.size()), b16(be, DType::BF16, whole.size()), mirror(be, DType::F32, whole.size());
    std::memcpy(src.f32(), whole.data(), whole.size() * 4);
    for (int64_t i = 0; i < total; i++) mirror.f32()[i] = -7.0f;  // outside the view: must stay
    Tensor dst = b16.view({total});
    dst.widened = mirror.f32();
    copy(dst.slice0(offset, n), src.view({total}).slice0(offset, n));
    std::vector<float> values(v.size());
    const uint16_t* bits = static_cast<const uint16_t*>(b16.data()) + offset;
    for (size_t i = 0; i < v.size(); i++) values[i] = std::bit_cast<float>((uint32_t)bits[i] << 16);
    const std::string what = "offset " + std::to_string(offset);
    expect_bf16_rounding(v, values.data(), what.c_str());
    for (int64_t i = 0; i < n; i++)
      ASSERT_EQ(std::bit_cast<uint32_t>(mirror.f32()[offset + i]), std::bit_cast<uint32_t>(values[(size_t)i]))
          << what << " at " << i;
    for (int64_t i = 0; i < offset; i++) ASSERT_EQ(mirror.f32()[i], -7.0f) << what;

    // bf16 → bf16 (the values' bytes), strided rows: the mirror follows.
    Buffer other(be, DType::BF16, whole.size());
    copy(other.view({total}), b16.view({total}));
    for (int64_t i = 0; i < total; i++) mirror.f32()[i] = -7.0f;
    const int64_t rows = total / 8;
    Tensor strided = b16.view({rows, 8}), from = other.view({rows, 8});
    strided.shape[1] = from.shape[1] = 5, strided.row_stride = from.row_stride = 8;
    strided.widened = mirror.f32();
    copy(strided, from);
    const uint16_t* all = static_cast<const uint16_t*>(b16.data());
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < 8; c++)
        ASSERT_EQ(std::bit_cast<uint32_t>(mirror.f32()[r * 8 + c]),
                  c < 5 ? (uint32_t)all[r * 8 + c] << 16 : std::bit_cast<uint32_t>(-7.0f))
            << what << ": strided [" << r << "," << c << "]";  // (bits: the elements before `offset` may be NaN)
  }
}

// This machine's figures depend on the bf16 instructions; the widened path is exercised wherever they are absent
// (and by tests/CMakeLists.txt's KernelsOpsBf16Widened everywhere).
TEST(LowPrecisionStorage, ReportsTheBf16GemmPath) {
  std::printf("bf16 linear layers: %s\n", bf16_gemm_cpu_path().c_str());
  SUCCEED();
}

}  // namespace
}  // namespace lmforge::kernels
