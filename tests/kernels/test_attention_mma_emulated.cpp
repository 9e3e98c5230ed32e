// Tests the tensor-core attention kernels (src/kernels/cuda/attention_mma.cuh) without a GPU: their own source
// runs under the warp emulator (warp_emulator.h: every lane a thread, ldmatrix/mma/shuffles by the PTX ISA's register
// layouts) against a double-precision forward and backward written here, with the dropout decisions of the op
// cases' independent Philox (op_cases.h). On a GPU, the same kernels run the CUDA op cases
// (tests/kernels/test_ops_cuda.cpp). Shapes cover partial tiles, causal tiles skipped and masked, key padding with
// a batch row that sees no key, cross attention, dropout with a head offset, strided fused q|k|v rows, both
// 16-bit types, head sizes 32, 64 and 128, and both sources of the backward's row dots D.
#include "kernels/warp_emulator.h"  // first: the CUDA qualifiers and primitives the kernels use
//
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/op_cases.h"

namespace lmforge::kernels::cuda {
namespace {

using mma_attention::kRows;
using mma_attention::Operand;

struct Setup {
  int64_t B, Tq, Tk, H;
  bool causal, padding;
  float p;  // dropout
  int64_t head_offset, total_heads;
  bool fused;  // q, k, v, dout rows of stride 3·C (a fused q|k|v operand), else C
  bool dots_in_dq = true;  // the dq kernel forms D from the staged out tile (else D is given)
};

// A host view of fp32 rows, as DView is on the device.
struct HostView {
  float* p;
  int64_t stride;
  float ld(int64_t r, int64_t c) const { return p[r * stride + c]; }
  void st(int64_t r, int64_t c, float v) const { p[r * stride + c] = v; }
};

constexpr uint64_t kSeed = 1234567, kStream = 89;

// 16-bit operand rows [B·T, stride] with values in [-1, 1) in columns [0, C); the rest NaN (never read).
template <class T>
std::vector<T> operand(int64_t rows, int64_t stride, int64_t C, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> x((size_t)(rows * stride), emu::from_float<T>(NAN));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < C; c++) x[(size_t)(r * stride + c)] = emu::from_float<T>(u(rng));
  return x;
}

template <class T>
double at(const std::vector<T>& x, int64_t stride, int64_t r, int64_t c) {
  return emu::to_float(x[(size_t)(r * stride + c)]);
}

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

// softmax over the allowed keys of s_tj = q_t·k_j/√hs; out_t = Σ_j drop(p_tj)·v_j; dP_tj = drop_tj·dout_t·v_j;
// dS_tj = p_tj·(dP_tj − Σ_j' p_tj'·dP_tj'); dv_j += drop(p_tj)·dout_t; dq_t += Σ_j dS_tj·k_j/√hs;
// dk_j += dS_tj·q_t/√hs.
template <class T>
Reference reference(const Setup& s, int64_t hs, int64_t stride, const std::vector<T>& q, const std::vector<T>& k,
                    const std::vector<T>& v, const std::vector<T>& dout, const std::vector<int32_t>& pad) {
  const int64_t C = s.H * hs;
  const double scale = 1.0 / std::sqrt((double)hs);
  Reference r;
  r.out.assign((size_t)(s.B * s.Tq * C), 0.0), r.dq.assign(r.out.size(), 0.0);
  r.dk.assign((size_t)(s.B * s.Tk * C), 0.0), r.dv.assign(r.dk.size(), 0.0);
  r.lse.assign((size_t)(s.B * s.H * s.Tq), INFINITY);
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.H; h++)
      for (int64_t t = 0; t < s.Tq; t++) {
        std::vector<double> p((size_t)s.Tk, 0.0), f((size_t)s.Tk, 1.0), dp((size_t)s.Tk, 0.0);
        std::vector<bool> ok((size_t)s.Tk);
        double mx = -INFINITY;
        for (int64_t j = 0; j < s.Tk; j++) {
          ok[(size_t)j] = (!s.causal || j <= t) && (!s.padding || pad[(size_t)(b * s.Tk + j)] != 0);
          if (!ok[(size_t)j]) continue;
          double d = 0;
          for (int64_t c = 0; c < hs; c++)
            d += at(q, stride, b * s.Tq + t, h * hs + c) * at(k, stride, b * s.Tk + j, h * hs + c);
          p[(size_t)j] = d * scale;
          mx = std::max(mx, p[(size_t)j]);
        }
        if (mx == -INFINITY) continue;  // no allowed key: out 0, lse +inf, no gradient
        double sum = 0;
        for (int64_t j = 0; j < s.Tk; j++)
          if (ok[(size_t)j]) sum += std::exp(p[(size_t)j] - mx);
        r.lse[(size_t)((b * s.H + h) * s.Tq + t)] = mx + std::log(sum);
        double dot = 0;
        for (int64_t j = 0; j < s.Tk; j++) {
          if (!ok[(size_t)j]) continue;
          p[(size_t)j] = std::exp(p[(size_t)j] - mx) / sum;
          if (s.p > 0.0f) {
            const uint64_t i = (uint64_t)((((b * s.total_heads + s.head_offset + h) * s.Tq + t) * s.Tk) + j);
            f[(size_t)j] = testing::reference_keep(s.p, kSeed, kStream, i) ? 1.0 / (1.0 - (double)s.p) : 0.0;
          }
          double d = 0;
          for (int64_t c = 0; c < hs; c++) {
            const double pf = p[(size_t)j] * f[(size_t)j];
            r.out[(size_t)((b * s.Tq + t) * C + h * hs + c)] += pf * at(v, stride, b * s.Tk + j, h * hs + c);
            d += at(dout, stride, b * s.Tq + t, h * hs + c) * at(v, stride, b * s.Tk + j, h * hs + c);
          }
          dp[(size_t)j] = f[(size_t)j] * d;
          dot += p[(size_t)j] * dp[(size_t)j];
        }
        for (int64_t j = 0; j < s.Tk; j++) {
          if (!ok[(size_t)j]) continue;
          const double ds = p[(size_t)j] * (dp[(size_t)j] - dot);
          for (int64_t c = 0; c < hs; c++) {
            const double pf = p[(size_t)j] * f[(size_t)j];
            r.dv[(size_t)((b * s.Tk + j) * C + h * hs + c)] += pf * at(dout, stride, b * s.Tq + t, h * hs + c);
            r.dq[(size_t)((b * s.Tq + t) * C + h * hs + c)] += ds * at(k, stride, b * s.Tk + j, h * hs + c) * scale;
            r.dk[(size_t)((b * s.Tk + j) * C + h * hs + c)] += ds * at(q, stride, b * s.Tq + t, h * hs + c) * scale;
          }
        }
      }
  return r;
}

// Largest |got − want| over the largest |want| (finite entries must agree on being infinite).
double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isinf(want[i])) {
      if (!(std::isinf(got[i]) && got[i] > 0)) return INFINITY;
      continue;
    }
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return worst / scale;
}

template <class T, int HS>
void check(const Setup& s, double tolerance) {
  SCOPED_TRACE(::testing::Message() << (sizeof(T) == 2 && std::is_same_v<T, emu::bf16> ? "bf16" : "f16") << " hs "
                                    << HS << " B " << s.B << " Tq " << s.Tq << " Tk " << s.Tk << " H " << s.H
                                    << (s.causal ? " causal" : "") << (s.padding ? " padding" : "") << " p " << s.p);
  const int64_t C = s.H * HS, stride = s.fused ? 3 * C : C;
  std::mt19937 rng(7);
  const std::vector<T> q = operand<T>(s.B * s.Tq, stride, C, rng), k = operand<T>(s.B * s.Tk, stride, C, rng),
                       v = operand<T>(s.B * s.Tk, stride, C, rng), dout = operand<T>(s.B * s.Tq, stride, C, rng);
  std::vector<int32_t> pad((size_t)(s.B * s.Tk), 1);
  if (s.padding) {
    for (int64_t b = 0; b < s.B; b++)
      for (int64_t j = 0; j < s.Tk; j++) pad[(size_t)(b * s.Tk + j)] = rng() % 4 != 0;
    for (int64_t j = 0; j < s.Tk; j++) pad[(size_t)((s.B - 1) * s.Tk + j)] = 0;  // the last row sees no key
  }
  Geometry g{};
  g.B = s.B, g.Tq = s.Tq, g.Tk = s.Tk, g.H = s.H, g.hs = HS;
  g.scale = 1.0f / std::sqrt((float)HS);
  g.causal = s.causal;
  g.padding = s.padding ? pad.data() : nullptr;
  g.p = s.p, g.seed = kSeed, g.stream = kStream, g.head_offset = s.head_offset, g.total_heads = s.total_heads;
  const Operand<T> oq{q.data(), stride}, ok{k.data(), stride}, ov{v.data(), stride}, od{dout.data(), stride};

  std::vector<float> out((size_t)(s.B * s.Tq * C), NAN), lse((size_t)(s.B * s.H * s.Tq), NAN);
  const emu::Dim3 qgrid{(unsigned)((s.Tq + kRows - 1) / kRows), (unsigned)s.H, (unsigned)s.B};
  const emu::Dim3 kgrid{(unsigned)((s.Tk + kRows - 1) / kRows), (unsigned)s.H, (unsigned)s.B};
  emu::launch(qgrid, 128, mma_attention::forward_smem<HS>(2), [&] {
    mma_attention::mma_forward_kernel<T, HS, HostView>(HostView{out.data(), C}, lse.data(), oq, ok, ov, g);
  });
  // The backward sees the forward's output as stored, rounded to T. D_t = dout_t·out_t per head: formed by the dq
  // kernel from the staged tiles, or (the path for an output of another dtype) given, as attention_row_dots does.
  std::vector<T> out_t(out.size());
  for (size_t i = 0; i < out.size(); i++) out_t[i] = emu::from_float<T>(out[i]);
  std::vector<float> D((size_t)(s.B * s.H * s.Tq), NAN);
  Operand<T> staged_out{out_t.data(), C};
  if (!s.dots_in_dq) {
    staged_out.p = nullptr;
    for (int64_t b = 0; b < s.B; b++)
      for (int64_t h = 0; h < s.H; h++)
        for (int64_t t = 0; t < s.Tq; t++) {
          double d = 0;
          for (int64_t c = 0; c < HS; c++)
            d += at(dout, stride, b * s.Tq + t, h * HS + c) * at(out_t, C, b * s.Tq + t, h * HS + c);
          D[(size_t)((b * s.H + h) * s.Tq + t)] = (float)d;
        }
  }
  // The backward accumulates: start from ones, take them off after.
  std::vector<float> dq((size_t)(s.B * s.Tq * C), 1.0f), dk((size_t)(s.B * s.Tk * C), 1.0f), dv(dk);
  emu::launch(qgrid, 128, mma_attention::dq_smem<HS>(2), [&] {
    mma_attention::mma_dq_kernel<T, HS, HostView>(HostView{dq.data(), C}, lse.data(), D.data(), staged_out, oq, ok,
                                                   ov, od, g);
  });
  emu::launch(kgrid, 128, mma_attention::dkv_smem<HS>(2), [&] {
    mma_attention::mma_dkv_kernel<T, HS, HostView>(HostView{dk.data(), C}, HostView{dv.data(), C}, lse.data(),
                                                    D.data(), oq, ok, ov, od, g);
  });
  for (std::vector<float>* x : {&dq, &dk, &dv})
    for (float& e : *x) e -= 1.0f;

  const Reference want = reference(s, HS, stride, q, k, v, dout, pad);
  for (const std::vector<double>* x : {&want.out, &want.dq, &want.dk, &want.dv}) {  // no vacuous comparison
    double largest = 0;
    for (double e : *x) largest = std::max(largest, std::abs(e));
    ASSERT_GT(largest, 1e-6) << "the reference is all zeros: the case tests nothing";
  }
  EXPECT_LE(relative_error(out, want.out), tolerance) << "out";
  EXPECT_LE(relative_error(lse, want.lse), 1e-5) << "lse";
  EXPECT_LE(relative_error(dq, want.dq), tolerance) << "dq";
  EXPECT_LE(relative_error(dk, want.dk), tolerance) << "dk";
  EXPECT_LE(relative_error(dv, want.dv), tolerance) << "dv";
}

// Probabilities and dS enter the second products rounded to the 16-bit type. Measured: bf16 1.0-3.3e-3 of the
// largest entry, f16 1.8-2.7e-4 (a 1 % error in any output fails); the op cases allow 3e-2 and 4e-3.
constexpr double kBf16 = 6e-3, kF16 = 1e-3;

TEST(AttentionMmaEmulated, CausalPartialTilesHs64) {
  check<emu::bf16, 64>({1, 130, 130, 1, true, false, 0.0f, 0, 1, false}, kBf16);
}

TEST(AttentionMmaEmulated, CrossAttentionPaddingDropoutHeadOffsetHs32) {
  check<emu::bf16, 32>({2, 70, 77, 1, false, true, 0.2f, 1, 3, false}, kBf16);
}

TEST(AttentionMmaEmulated, F16FusedRowsTwoHeadsNoMaskGivenRowDotsHs64) {
  check<emu::f16, 64>({1, 64, 64, 2, false, false, 0.0f, 0, 2, true, false}, kF16);
}

TEST(AttentionMmaEmulated, F16CausalPaddingDropoutHs32) {
  check<emu::f16, 32>({2, 77, 77, 1, true, true, 0.1f, 0, 1, true}, kF16);
}

// Head size 128: the backward's 32-row tiles and the dk/dv kernel's k, v fragments reloaded per tile.
TEST(AttentionMmaEmulated, CausalPaddingDropoutHs128) {
  check<emu::bf16, 128>({2, 70, 70, 1, true, true, 0.1f, 0, 1, false}, kBf16);
}

// The emulator itself: one mma, its operands placed in the lanes' registers by the PTX ISA's fragment tables
// (restated here from the ISA, not from warp_emulator.h), gives the plain matrix product in the same places.
TEST(AttentionMmaEmulated, EmulatedMmaIsTheMatrixProduct) {
  float A[16][16], B[16][8], got[16][8];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) A[i][j] = emu::to_float(emu::to_bf16((float)((i * 7 + j * 3) % 11) - 5.0f));
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) B[i][j] = emu::to_float(emu::to_bf16((float)((i * 5 + j) % 7) - 3.0f));
  emu::launch({1, 1, 1}, 32, 0, [&] {
    const int lane = (int)threadIdx.x, g = lane / 4, c = lane % 4;
    auto two = [](float lo, float hi) { return pack2<emu::bf16>(lo, hi); };
    const uint32_t a[4] = {two(A[g][2 * c], A[g][2 * c + 1]), two(A[g + 8][2 * c], A[g + 8][2 * c + 1]),
                           two(A[g][2 * c + 8], A[g][2 * c + 9]), two(A[g + 8][2 * c + 8], A[g + 8][2 * c + 9])};
    float d[4] = {0, 0, 0, 0};
    mma_16816<emu::bf16>(d, a, two(B[2 * c][g], B[2 * c + 1][g]), two(B[2 * c + 8][g], B[2 * c + 9][g]));
    got[g][2 * c] = d[0], got[g][2 * c + 1] = d[1], got[g + 8][2 * c] = d[2], got[g + 8][2 * c + 1] = d[3];
  });
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float want = 0;
      for (int k = 0; k < 16; k++) want += A[i][k] * B[k][j];
      EXPECT_EQ(got[i][j], want) << i << "," << j;
    }
}

}  // namespace
}  // namespace lmforge::kernels::cuda
