// defines: tests of the CPU linear layer on f16 and bf16 storage (kernels/cpu/linear_cpu.cpp) on products wide
//          enough to be split into column blocks (f16's, and bf16's backward with widened products): every f16 /
//          bf16 result is the rounding, once, of its exact value (bias and accumulated old value included), fp32
//          results are exact; both weight layouts, fp32 and low-precision weight gradients, bf16 weights with and
//          without their fp32 mirror (Tensor::widened); and bf16 layers small enough for the widened path to widen
//          the output gradient whole (shared by both products and the bias gradient)
//
// Exact references: the operands are multiples of 2^-3 (2^-6 for bias and old values) with few significant bits,
// so every product is a multiple of 2^-6, and a sum of them in any order and blocking is exact in fp32 as long as
// the sum of the terms' magnitudes stays below 2^18 (24 bits); the test checks that bound for every result. The
// kernel's fp32 accumulation is then exact, and its only rounding is the final one to f16, which the test
// reproduces with the compiler's _Float16 (or the CPU's F16C conversion), independent of the kernel's code; bf16's
// with frexp/nearbyint in double (8 significant bits, ties to even). For bf16 the grids keep within 8 significant
// bits (|k| <= 255) so that the operands are bf16 numbers.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/ops.h"
#include "exact_grid.h"

namespace lmforge::kernels {
namespace {

using testing::grid;

// fp32 → nearest-even binary16 → fp32.
float f16_round(float x) {
#if defined(__FLT16_MAX__)
  return (float)(_Float16)x;
#else
  return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
#endif
}

// fp32 → nearest-even bfloat16 (8 significant bits) → fp32, in double arithmetic (no overflow in these tests).
float bf16_round(float x) {
  if (x == 0.0f) return x;
  int e;
  const double m = std::frexp((double)x, &e);  // |m| in [0.5, 1): 8 significant bits are m·2^8
  return (float)std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

float round_to(DType dtype, float x) { return dtype == DType::BF16 ? bf16_round(x) : f16_round(x); }


// Host values into a new buffer of `dtype` (through copy(): exact, the values are f16 / bf16 numbers) and back.
Buffer upload(const std::vector<float>& v, DType dtype) {
  Backend& be = cpu_backend();
  Buffer f(be, DType::F32, v.size()), out(be, dtype, v.size());
  std::memcpy(f.f32(), v.data(), v.size() * 4);
  copy(out.view({1, (int64_t)v.size()}), f.view({1, (int64_t)v.size()}));
  return out;
}
std::vector<float> download(const Buffer& b) {
  std::vector<float> v(b.count());
  copy(make_view(v.data(), {1, (int64_t)v.size()}), b.view({1, (int64_t)v.size()}));
  return v;
}

struct Shape {
  int64_t N, IC, OC;
};

// f16: N·OC just above one block: two column blocks, the second 16 columns wide. bf16: N·OC just above what the
// widened path widens whole, so that its backward takes column blocks (kLinearWideBf16BlockElems: five, the last
// 16 columns wide).
Shape blocks_shape(DType dtype) {
  const int64_t N = dtype == DType::BF16 ? 1024 : 4096, IC = 4;
  const int64_t OC = (dtype == DType::BF16 ? cpu::kBf16WidenWholeElems : cpu::kLinearF16BlockElems) / N + 16;
  return {N, IC, OC};
}

// `mirror`: a bf16 weight comes with its fp32 mirror (what the parameter store gives where products are widened).
// `f32_dout`: the output gradient is fp32 (ELECTRA's generator head), each nonzero value 2^-12 off a bf16 number (a
// grid value of at most 31/8, whose bf16 neighbours are at least 2^-8 away): a bf16
// layer multiplies it rounded to bf16 (as oneDNN's bf16 matmul would), so the results are those of the bf16 grid
// values, exactly; products of the unrounded values would not be.
// `whole`: a bf16 layer small enough that the widened path widens its output gradient whole, once for both
// products and the bias gradient (the transformer layers' linears; the cases above take the head's blocks).
void check_layer(DType dtype, WeightLayout layout, DType dweight_dtype, bool mirror = false, bool f32_dout = false,
                 bool whole = false) {
  const Shape s = whole ? Shape{96, 40, 136} : blocks_shape(dtype);
  const int64_t N = s.N, IC = s.IC, OC = s.OC;
  if (!whole) {
    ASSERT_GT(N * OC, dtype == DType::BF16 ? cpu::kBf16WidenWholeElems : cpu::kLinearF16BlockElems)
        << "the case must cross a block boundary";
    ASSERT_GT(N * OC, 4 * cpu::kLinearWideBf16BlockElems);
  }
  const int big = dtype == DType::BF16 ? 255 : 1000;  // bias and old values: f16 / bf16 numbers
  const bool out_in = layout == WeightLayout::OUT_IN;
  auto W = [&](const std::vector<float>& w, int64_t o, int64_t i) {
    return (double)w[(size_t)(out_in ? o * IC + i : i * OC + o)];
  };
  const std::vector<float> x = grid((size_t)(N * IC), 127, 0.125f, 1), w = grid((size_t)(IC * OC), 31, 0.125f, 2),
                           b = grid((size_t)OC, big, 1.0f / 64, 3), dy = grid((size_t)(N * OC), 31, 0.125f, 4),
                           dx0 = grid((size_t)(N * IC), big, 1.0f / 64, 5),
                           dw0 = grid((size_t)(IC * OC), big, 1.0f / 64, 6);
  std::vector<float> dy_off = dy;
  for (float& g : dy_off)
    if (g != 0.0f) g += std::copysign(std::ldexp(1.0f, -12), g);  // (2^-12 alone would be a bf16 number)
  const Buffer xb = upload(x, dtype), wb = upload(w, dtype), bb = upload(b, dtype),
               dyb = f32_dout ? upload(dy_off, DType::F32) : upload(dy, dtype), dxb = upload(dx0, dtype),
               dwb = upload(dw0, dweight_dtype);
  Buffer yb(cpu_backend(), dtype, (size_t)(N * OC)), dbb = upload(std::vector<float>((size_t)OC, 0.0f), DType::F32);
  Tensor wt = out_in ? wb.view({OC, IC}) : wb.view({IC, OC});
  if (mirror) wt.widened = w.data();  // w holds the weight's bf16 numbers as floats
  const Tensor dwt = out_in ? dwb.view({OC, IC}) : dwb.view({IC, OC});

  linear_forward(yb.view({N, OC}), xb.view({N, IC}), wt, bb.view({OC}), layout);
  const std::vector<float> y = download(yb);
  constexpr double kExactBelow = 262144.0;  // 2^18: sums of multiples of 2^-6 below it are exact in fp32
  size_t rounded = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < OC; o++) {
      double exact = b[(size_t)o];
      for (int64_t i = 0; i < IC; i++) exact += (double)x[(size_t)(n * IC + i)] * W(w, o, i);
      const float want = round_to(dtype, (float)exact);
      ASSERT_EQ(y[(size_t)(n * OC + o)], want) << "out[" << n << "," << o << "] exact " << exact;
      rounded += want != exact;
    }
  // Real low-precision storage: f16 outputs above 32 in magnitude (f16's step is 2^-5 or coarser there) and bf16
  // outputs with more than 8 significant bits are rounded.
  EXPECT_GT(rounded, (size_t)(N * OC / 20));

  linear_backward(dxb.view({N, IC}), dwt, dbb.view({OC}), dyb.view({N, OC}), xb.view({N, IC}), wt, layout);
  const std::vector<float> dx = download(dxb), dw = download(dwb), db = download(dbb);
  size_t dx_rounded = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t i = 0; i < IC; i++) {
      double exact = dx0[(size_t)(n * IC + i)], magnitude = std::fabs(exact);
      for (int64_t o = 0; o < OC; o++) {
        const double t = (double)dy[(size_t)(n * OC + o)] * W(w, o, i);
        exact += t, magnitude += std::fabs(t);
      }
      ASSERT_LT(magnitude, kExactBelow);
      ASSERT_EQ(dx[(size_t)(n * IC + i)], round_to(dtype, (float)exact)) << "dinp[" << n << "," << i << "]";
      dx_rounded += round_to(dtype, (float)exact) != exact;
    }
  EXPECT_GT(dx_rounded, (size_t)(N * IC / 2)) << "sums over " << OC << " columns are mostly not " << dtype_name(dtype)
                                              << " numbers";
  std::vector<double> dw_exact((size_t)(IC * OC)), dw_magnitude((size_t)(IC * OC));
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < OC; o++) {
      const double g = dy[(size_t)(n * OC + o)];
      for (int64_t i = 0; i < IC; i++) {
        const size_t k = (size_t)(out_in ? o * IC + i : i * OC + o);
        dw_exact[k] += g * x[(size_t)(n * IC + i)];
        dw_magnitude[k] += std::fabs(g * x[(size_t)(n * IC + i)]);
      }
    }
  for (size_t k = 0; k < dw_exact.size(); k++) {
    ASSERT_LT(dw_magnitude[k] + std::fabs(dw0[k]), kExactBelow);
    const float exact = (float)(dw0[k] + dw_exact[k]);  // exact in fp32 (see the top)
    ASSERT_EQ(dw[k], dweight_dtype == DType::F32 ? exact : round_to(dweight_dtype, exact)) << "dweight[" << k << "]";
  }
  // The bias gradient sums the output gradient as it is stored (an fp32 one unrounded: it is no matrix product's
  // operand); multiples of 2^-12 (2^-3 without the offsets) summing to under 2^12 (2^21) are exact in fp32.
  const std::vector<float>& dy_stored = f32_dout ? dy_off : dy;
  const double exact_below = f32_dout ? 4096.0 : 2097152.0;
  for (int64_t o = 0; o < OC; o++) {
    double exact = 0, magnitude = 0;
    for (int64_t n = 0; n < N; n++) exact += dy_stored[(size_t)(n * OC + o)], magnitude += std::fabs(dy_stored[(size_t)(n * OC + o)]);
    ASSERT_LT(magnitude, exact_below);
    ASSERT_EQ(db[(size_t)o], (float)exact) << "dbias[" << o << "]";
  }
}

TEST(LinearF16, OutInBlocksRoundOnceWithFp32MainGradients) {
  check_layer(DType::F16, WeightLayout::OUT_IN, DType::F32);
}
TEST(LinearF16, InOutBlocksRoundOnceWithFp32MainGradients) {
  check_layer(DType::F16, WeightLayout::IN_OUT, DType::F32);
}
TEST(LinearF16, OutInBlocksWithF16WeightGradients) { check_layer(DType::F16, WeightLayout::OUT_IN, DType::F16); }
TEST(LinearF16, InOutBlocksWithF16WeightGradients) { check_layer(DType::F16, WeightLayout::IN_OUT, DType::F16); }

// bf16: the widened path where the CPU has no AVX512-BF16/AMX (and under tests/CMakeLists.txt's
// KernelsLinearBf16Widened everywhere), else oneDNN's bf16 matmul; the results are the same exact roundings.
TEST(LinearBf16, OutInRoundsOnceWithFp32MainGradients) { check_layer(DType::BF16, WeightLayout::OUT_IN, DType::F32); }
TEST(LinearBf16, InOutRoundsOnceWithFp32MainGradients) { check_layer(DType::BF16, WeightLayout::IN_OUT, DType::F32); }
TEST(LinearBf16, OutInWithBf16WeightGradients) { check_layer(DType::BF16, WeightLayout::OUT_IN, DType::BF16); }
TEST(LinearBf16, OutInWithTheWeightsFp32Mirror) {
  check_layer(DType::BF16, WeightLayout::OUT_IN, DType::F32, true);
}
TEST(LinearBf16, InOutWithTheWeightsFp32Mirror) {
  check_layer(DType::BF16, WeightLayout::IN_OUT, DType::F32, true);
}
TEST(LinearBf16, Fp32OutputGradientIsRoundedToBf16) {
  check_layer(DType::BF16, WeightLayout::OUT_IN, DType::F32, true, true);
}
TEST(LinearBf16, WholeOutputGradientOutInWithTheMirror) {
  check_layer(DType::BF16, WeightLayout::OUT_IN, DType::F32, true, false, true);
}
TEST(LinearBf16, WholeOutputGradientInOut) {
  check_layer(DType::BF16, WeightLayout::IN_OUT, DType::F32, false, false, true);
}
TEST(LinearBf16, WholeFp32OutputGradientIsRoundedToBf16) {
  check_layer(DType::BF16, WeightLayout::OUT_IN, DType::F32, true, true, true);
}

// An fp32 output of f16 inputs (the op's dtype is f16; the result is written in place, bias first): exact.
TEST(LinearF16, Fp32OutputOfF16Inputs) {
  const int64_t N = 37, IC = 19, OC = 45;
  const std::vector<float> x = grid((size_t)(N * IC), 31, 0.125f, 7), w = grid((size_t)(OC * IC), 31, 0.125f, 8),
                           b = grid((size_t)OC, 1000, 1.0f / 64, 9);
  const Buffer xb = upload(x, DType::F16), wb = upload(w, DType::F16), bb = upload(b, DType::F32);
  Buffer yb(cpu_backend(), DType::F32, (size_t)(N * OC));
  linear_forward(yb.view({N, OC}), xb.view({N, IC}), wb.view({OC, IC}), bb.view({OC}), WeightLayout::OUT_IN);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < OC; o++) {
      double exact = b[(size_t)o];
      for (int64_t i = 0; i < IC; i++) exact += (double)x[(size_t)(n * IC + i)] * w[(size_t)(o * IC + i)];
      ASSERT_EQ(yb.f32()[n * OC + o], (float)exact) << "out[" << n << "," << o << "]";
    }
}

}  // namespace
}  // namespace lmforge::kernels
