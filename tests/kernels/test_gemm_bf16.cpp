// defines: tests of the CPU's bf16 matrix products (kernels/cpu/gemm/): the widened path (fp32 products of the
//          exactly widened bf16 operands) against a float64 reference of the same bf16 numbers for every transpose,
//          accumulate, bias and result dtype, on odd, strided and block-split shapes; the native (oneDNN) path
//          against the widened one where oneDNN has bf16 matmuls; and the per-CPU choice between them with its
//          LMFORGE_CPU_BF16_GEMM override
//
// Tolerance: both paths multiply the bf16 operands exactly and accumulate in fp32, so a result may differ from
// the exact sum only by fp32 rounding in some order: at most ~(K + 2)·2^-24 · (Σ|a·b| + |bias| + |old C|) (the
// classic bound for a recursive sum, with a factor 2 of margin for blocked orders). A bf16 result adds its one
// rounding to nearest, at most half a unit in its last place: 2^-8 of its magnitude (8 significant bits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::kernels::cpu {
namespace {

struct GemmCase {
  bool ta, tb;
  int M, N, K;
  bool accumulate, bias;
  DType c_dtype;
  int64_t block_elems = 0;  // the path's default
  Bf16WidenThreads threads = Bf16WidenThreads::AUTO;
  std::string name() const {
    return std::string(ta ? "Aᵀ" : "A") + (tb ? "·Bᵀ" : "·B") + " " + std::to_string(M) + "x" +
           std::to_string(N) + "x" + std::to_string(K) + (accumulate ? " +C" : "") + (bias ? " +bias" : "") +
           " into " + dtype_name(c_dtype) + (block_elems != 0 ? " blocks of " + std::to_string(block_elems) : "") +
           (threads == Bf16WidenThreads::TEAM ? " (team)" : threads == Bf16WidenThreads::SLABS ? " (slabs)" : "");
  }
};

// Operands of a case: bf16 A and B stored with padded row strides (the padding must not be read into the result),
// the bias, and C's old values (bf16-representable for a bf16 C) with padding columns that must stay untouched.
struct Operands {
  int lda, ldb, ldc;
  std::vector<uint16_t> A, B;
  std::vector<float> bias;
  std::vector<float> c_old;  // as floats, [M, ldc]
};

constexpr float kSentinel = 12288.0f;  // C's padding: 3·2^12, exact in bf16

Operands make_operands(const GemmCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Operands o;
  const int a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  o.lda = a_cols + 3;
  o.ldb = b_cols + 5;
  o.ldc = c.N + 2;
  o.A.resize((size_t)a_rows * o.lda);
  o.B.resize((size_t)b_rows * o.ldb);
  // NaN in the padding: a product that reads it would be NaN.
  for (uint16_t& x : o.A) x = 0x7FC0;
  for (uint16_t& x : o.B) x = 0x7FC0;
  for (int r = 0; r < a_rows; r++)
    for (int k = 0; k < a_cols; k++) o.A[(size_t)r * o.lda + k] = f32_to_bf16(normal(rng));
  for (int r = 0; r < b_rows; r++)
    for (int k = 0; k < b_cols; k++) o.B[(size_t)r * o.ldb + k] = f32_to_bf16(normal(rng));
  if (c.bias) {
    o.bias.resize((size_t)c.N);
    for (float& x : o.bias) x = normal(rng);
  }
  o.c_old.assign((size_t)c.M * o.ldc, kSentinel);
  for (int i = 0; i < c.M; i++)
    for (int j = 0; j < c.N; j++) {
      const float v = c.accumulate ? 4.0f * normal(rng) : std::nanf("");  // an overwritten C may hold anything
      o.c_old[(size_t)i * o.ldc + j] = c.c_dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(v)) : v;
    }
  return o;
}

using GemmPath = void (*)(bool, bool, int, int, int, const uint16_t*, int, const uint16_t*, int, bool, void*, DType,
                          int, const float*);

// C after one call of `path` (as floats, [M, ldc]).
std::vector<float> run(const GemmCase& c, const Operands& o, GemmPath path) {
  std::vector<float> out;
  const float* bias = c.bias ? o.bias.data() : nullptr;
  if (c.c_dtype == DType::F32) {
    out = o.c_old;
    path(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, out.data(), DType::F32, o.ldc,
         bias);
  } else {
    std::vector<uint16_t> cb(o.c_old.size());
    for (size_t i = 0; i < cb.size(); i++) cb[i] = f32_to_bf16(o.c_old[i]);
    path(c.ta, c.tb, c.M, c.N, c.K, o.A.data(), o.lda, o.B.data(), o.ldb, c.accumulate, cb.data(), DType::BF16,
         o.ldc, bias);
    out.resize(cb.size());
    for (size_t i = 0; i < cb.size(); i++) out[i] = bf16_to_f32(cb[i]);
  }
  return out;
}

// The widened path given fp32 mirrors of A and/or B (Bf16Operand::widened: the same values, layout and strides);
// `mirror_scale` multiplies the mirrors' values, to see which operand the path took.
std::vector<float> run_mirrored(const GemmCase& c, const Operands& o, bool mirror_a, bool mirror_b,
                                float mirror_scale = 1.0f) {
  std::vector<float> out = o.c_old;
  std::vector<uint16_t> cb;
  void* C = out.data();
  if (c.c_dtype == DType::BF16) {
    cb.resize(out.size());
    for (size_t i = 0; i < cb.size(); i++) cb[i] = f32_to_bf16(o.c_old[i]);
    C = cb.data();
  }
  std::vector<float> wa(o.A.size()), wb(o.B.size());
  for (size_t i = 0; i < wa.size(); i++) wa[i] = mirror_scale * bf16_to_f32(o.A[i]);
  for (size_t i = 0; i < wb.size(); i++) wb[i] = mirror_scale * bf16_to_f32(o.B[i]);
  const Bf16Operand A{o.A.data(), o.lda, mirror_a ? wa.data() : nullptr};
  const Bf16Operand B{o.B.data(), o.ldb, mirror_b ? wb.data() : nullptr};
  gemm_bf16_widened(c.ta, c.tb, c.M, c.N, c.K, A, B, c.accumulate, C, c.c_dtype, o.ldc,
                    c.bias ? o.bias.data() : nullptr, c.block_elems, c.threads);
  if (c.c_dtype == DType::BF16)
    for (size_t i = 0; i < cb.size(); i++) out[i] = bf16_to_f32(cb[i]);
  return out;
}

// The widened path with the case's block size (no mirrors).
std::vector<float> run_widened(const GemmCase& c, const Operands& o) { return run_mirrored(c, o, false, false); }

// The exact result of the bf16 numbers in float64 and the allowed deviation of an fp32-accumulated (and, for a
// bf16 C, rounded) result from it, per element of [M, N].
struct Reference {
  std::vector<double> value, allowed;
};
Reference reference(const GemmCase& c, const Operands& o) {
  Reference r;
  r.value.resize((size_t)c.M * c.N);
  r.allowed.resize(r.value.size());
  for (int i = 0; i < c.M; i++)
    for (int j = 0; j < c.N; j++) {
      double sum = 0.0, magnitude = 0.0;
      for (int k = 0; k < c.K; k++) {
        const double a = bf16_to_f32(c.ta ? o.A[(size_t)k * o.lda + i] : o.A[(size_t)i * o.lda + k]);
        const double b = bf16_to_f32(c.tb ? o.B[(size_t)j * o.ldb + k] : o.B[(size_t)k * o.ldb + j]);
        sum += a * b;
        magnitude += std::fabs(a * b);
      }
      if (c.bias) {
        sum += o.bias[(size_t)j];
        magnitude += std::fabs(o.bias[(size_t)j]);
      }
      if (c.accumulate) {
        const double old = o.c_old[(size_t)i * o.ldc + j];
        sum += old;
        magnitude += std::fabs(old);
      }
      double allowed = 2.0 * (c.K + 2) * std::ldexp(magnitude, -24);
      if (c.c_dtype == DType::BF16) allowed += std::ldexp(std::fabs(sum) + allowed, -8) * 1.001;
      r.value[(size_t)i * c.N + j] = sum;
      r.allowed[(size_t)i * c.N + j] = allowed;
    }
  return r;
}

// got agrees with the reference within `scale` times its allowance, and C's padding columns are untouched.
void expect_matches(const GemmCase& c, const Operands& o, const std::vector<float>& got, const Reference& want,
                    double scale, const std::string& what) {
  int bad = 0;
  for (int i = 0; i < c.M; i++) {
    for (int j = 0; j < c.N; j++) {
      const double g = got[(size_t)i * o.ldc + j], w = want.value[(size_t)i * c.N + j];
      const double allowed = scale * want.allowed[(size_t)i * c.N + j];
      if (!(std::fabs(g - w) <= allowed) && bad++ < 3)
        ADD_FAILURE() << what << " " << c.name() << ": C[" << i << "," << j << "] = " << g << ", exact " << w
                      << ", allowed ±" << allowed;
    }
    for (int j = c.N; j < o.ldc; j++)
      if (got[(size_t)i * o.ldc + j] != kSentinel && bad++ < 3)
        ADD_FAILURE() << what << " " << c.name() << ": wrote C's padding at [" << i << "," << j << "]";
  }
}

// Odd sizes; one row (the fp32 GEMM's SGEMV path), one column; a product large enough to be split over the
// threads; and small block limits that split M, N and K (blocks, a bf16 C's sum over K blocks in fp32 scratch);
// each with the team's blocks and with the threads' slabs.
std::vector<GemmCase> cases() {
  struct Shape {
    int M, N, K;
    int64_t block;
  };
  const Shape shapes[] = {{37, 29, 53, 0}, {1, 45, 33, 0},    {19, 1, 70, 0},     {130, 70, 300, 0},
                          {203, 21, 17, 1024}, {13, 301, 11, 1024}, {9, 14, 333, 512}, {150, 90, 400, 2048},
                          {5, 7, 0, 0}};
  std::vector<GemmCase> v;
  for (const Shape& s : shapes)
    for (Bf16WidenThreads threads : {Bf16WidenThreads::TEAM, Bf16WidenThreads::SLABS})
      for (int t = 0; t < 4; t++)
        for (bool acc : {false, true})
          for (bool bias : {false, true})
            for (DType cd : {DType::F32, DType::BF16})
              v.push_back({(t & 1) != 0, (t & 2) != 0, s.M, s.N, s.K, acc, bias, cd, s.block, threads});
  return v;
}

TEST(GemmBf16Widened, MatchesFloat64OfTheBf16OperandsInEveryForm) {
  uint32_t seed = 1;
  for (const GemmCase& c : cases()) {
    const Operands o = make_operands(c, seed++);
    expect_matches(c, o, run_widened(c, o), reference(c, o), 1.0, "widened");
  }
}

// fp32 mirrors of either operand or both (a weight's Tensor::widened) give the same products in every form, with
// the path's own blocks and splits around them (a mirror changes which dimension the slabs split).
TEST(GemmBf16Widened, MirroredOperandsMatchFloat64InEveryForm) {
  uint32_t seed = 500;
  for (const GemmCase& c : cases()) {
    const Operands o = make_operands(c, seed++);
    const Reference want = reference(c, o);
    for (int m = 1; m < 4; m++)
      expect_matches(c, o, run_mirrored(c, o, (m & 1) != 0, (m & 2) != 0), want, 1.0,
                     std::string("widened with a mirror of ") + (m == 1 ? "A" : m == 2 ? "B" : "A and B"));
  }
}

// The path multiplies a mirror as it is (it does not widen the bf16 memory again): mirrors holding twice the
// operand's values give twice the products.
TEST(GemmBf16Widened, AMirrorIsTakenInsteadOfTheBf16Memory) {
  const GemmCase c{false, true, 70, 90, 130, false, false, DType::F32, 2048, Bf16WidenThreads::SLABS};
  const Operands o = make_operands(c, 77);
  for (int m = 1; m < 3; m++) {
    // (against the same mirror at scale 1: a mirror changes the split, and with it the order of the sums)
    const std::vector<float> plain = run_mirrored(c, o, m == 1, m == 2, 1.0f);
    const std::vector<float> doubled = run_mirrored(c, o, m == 1, m == 2, 2.0f);
    for (int i = 0; i < c.M; i++)
      for (int j = 0; j < c.N; j++)
        ASSERT_EQ(doubled[(size_t)i * o.ldc + j], 2.0f * plain[(size_t)i * o.ldc + j]) << m << ": " << i << "," << j;
  }
}

// Widening is exact: a product with an identity operand gives back the other operand's bf16 numbers bit for bit.
TEST(GemmBf16Widened, IdentityGivesTheBf16NumbersExactly) {
  const int n = 24;
  std::vector<uint16_t> eye((size_t)n * n, 0), x((size_t)n * n);
  for (int i = 0; i < n; i++) eye[(size_t)i * n + i] = f32_to_bf16(1.0f);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint16_t& v : x) v = f32_to_bf16(normal(rng));
  std::vector<float> c((size_t)n * n, std::nanf(""));
  gemm_bf16_widened(false, true, n, n, n, eye.data(), n, x.data(), n, false, c.data(), DType::F32, n, nullptr);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) ASSERT_EQ(c[(size_t)i * n + j], bf16_to_f32(x[(size_t)j * n + i])) << i << "," << j;
}

// oneDNN 2.6 has bf16 matmuls only on CPUs with AVX-512; elsewhere the native path cannot run (and is never
// chosen without the override).
std::string native_unavailable() {
  uint16_t one = f32_to_bf16(1.0f);
  float c = 0.0f;
  try {
    gemm_bf16_onednn(false, false, 1, 1, 1, &one, 1, &one, 1, false, &c, DType::F32, 1, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return c == 1.0f ? "" : "oneDNN's bf16 matmul gave 1·1 = " + std::to_string(c);
}

TEST(GemmBf16Native, AgreesWithTheWidenedPathAndTheReference) {
  const std::string why = native_unavailable();
  if (!why.empty()) GTEST_SKIP() << "no native bf16 matmul here: " << why;
  uint32_t seed = 1000;
  for (const GemmCase& c : cases()) {
    // the native path has no blocks or threading strategies
    if (c.block_elems != 0 || c.threads != Bf16WidenThreads::TEAM || c.K == 0) continue;
    const Operands o = make_operands(c, seed++);
    const Reference want = reference(c, o);
    const std::vector<float> native = run(c, o, gemm_bf16_onednn), widened = run_widened(c, o);
    expect_matches(c, o, native, want, 1.0, "native");
    // The two against each other: each within its allowance of the exact value.
    Reference both = want;
    for (int i = 0; i < c.M; i++)
      for (int j = 0; j < c.N; j++) {
        both.value[(size_t)i * c.N + j] = widened[(size_t)i * o.ldc + j];
        both.allowed[(size_t)i * c.N + j] *= 2.0;
      }
    expect_matches(c, o, native, both, 1.0, "native against widened");
  }
}

TEST(GemmBf16, RejectsOtherResultDtypes) {
  uint16_t one = f32_to_bf16(1.0f), c = 0;
  EXPECT_THROW(gemm_bf16_widened(false, false, 1, 1, 1, &one, 1, &one, 1, false, &c, DType::F16, 1, nullptr), Error);
}

// ---- the choice -----------------------------------------------------------------------------------------------

TEST(Bf16GemmChoice, FollowsTheCpuFlags) {
  EXPECT_EQ(choose_bf16_gemm(nullptr, false, false).path, Bf16GemmChoice::WIDEN);
  EXPECT_EQ(choose_bf16_gemm(nullptr, false, false).why, "this CPU has no AVX512-BF16/AMX");
  EXPECT_EQ(choose_bf16_gemm("", false, false).path, Bf16GemmChoice::WIDEN);
  EXPECT_EQ(choose_bf16_gemm(nullptr, true, false).path, Bf16GemmChoice::NATIVE);
  EXPECT_EQ(choose_bf16_gemm(nullptr, true, false).why, "this CPU has AVX512-BF16");
  EXPECT_EQ(choose_bf16_gemm(nullptr, false, true).path, Bf16GemmChoice::NATIVE);
  EXPECT_EQ(choose_bf16_gemm(nullptr, true, true).path, Bf16GemmChoice::NATIVE);
}

TEST(Bf16GemmChoice, TheEnvironmentOverridesTheCpu) {
  for (bool avx512_bf16 : {false, true})
    for (bool amx : {false, true}) {
      EXPECT_EQ(choose_bf16_gemm("widen", avx512_bf16, amx).path, Bf16GemmChoice::WIDEN);
      EXPECT_EQ(choose_bf16_gemm("widen", avx512_bf16, amx).why, "LMFORGE_CPU_BF16_GEMM=widen");
      EXPECT_EQ(choose_bf16_gemm("native", avx512_bf16, amx).path, Bf16GemmChoice::NATIVE);
      EXPECT_EQ(choose_bf16_gemm("native", avx512_bf16, amx).why, "LMFORGE_CPU_BF16_GEMM=native");
    }
  try {
    choose_bf16_gemm("fast", false, false);
    ADD_FAILURE() << "LMFORGE_CPU_BF16_GEMM=fast accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LMFORGE_CPU_BF16_GEMM=fast: expected native or widen"), std::string::npos)
        << e.what();
  }
}

// This process's choice is the one for this CPU's cpuid flags and environment (tests/CMakeLists.txt also runs
// this with LMFORGE_CPU_BF16_GEMM=native and =widen), and what bf16 linear layers and the log report.
TEST(Bf16GemmChoice, TheProcessChoiceIsThisCpusAndTheLogSaysIt) {
  const char* env = std::getenv("LMFORGE_CPU_BF16_GEMM");
  const Bf16GemmChoice want = choose_bf16_gemm(env, has_avx512_bf16(), has_amx_bf16());
  EXPECT_EQ(bf16_gemm_choice().path, want.path);
  EXPECT_EQ(bf16_gemm_choice().why, want.why);
  EXPECT_EQ(bf16_gemm_native(), want.path == Bf16GemmChoice::NATIVE);
  const std::string log = bf16_gemm_cpu_path();
  EXPECT_EQ(log, want.path == Bf16GemmChoice::NATIVE
                     ? "oneDNN's bf16 matmul (" + want.why + ")"
                     : "fp32 products of widened bf16 operands (" + want.why + "); " + kWidenedWeightsNote + "; " +
                           kWidenedSpeedNote);
  if (env != nullptr && std::string(env) == "widen") {
    EXPECT_FALSE(bf16_gemm_native());
  }
  if (env != nullptr && std::string(env) == "native") {
    EXPECT_TRUE(bf16_gemm_native());
  }
  std::printf("[ bf16 gemm ] %s\n", log.c_str());
}

}  // namespace
}  // namespace lmforge::kernels::cpu
