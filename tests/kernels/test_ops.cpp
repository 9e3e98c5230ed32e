// defines: the op-case tests (after ggml's test-backend-ops): every case of op_cases.h on every (device, dtype)
//          that implements it — forward against the double-precision reference and against CPU fp32, backward
//          against finite differences (gradients pre-filled with noise, so = instead of += fails), one thread
//          against two, the guarded test device bit for bit against the CPU — plus the Philox known-answer
//          vectors, dropout statistics, the cross-entropy backward and the backend's memory functions
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend_checks.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "multi_tensor_checks.h"
#include "op_cases.h"
#include "op_harness.h"

namespace lmforge::kernels {
namespace {

using testing::OpCase;

using testing::count;
using testing::execute;
using testing::expect_close;
using testing::ids_of;
using testing::least_difference;
using testing::noise;
using testing::Result;
using testing::Target;
using testing::targets;
using testing::tolerance;
using testing::upload;
using testing::values_of;
using testing::widen;

// Forward of every case on every target against the double-precision reference.
TEST(OpCases, ForwardMatchesTheReferenceOnEveryBackend) {
  int runs = 0;
  for (const Target& target : targets())
    for (const OpCase& c : testing::op_cases(false)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      const Result r = execute(c, target, values_of(c), nullptr, nullptr);
      const auto want = c.reference(values_of(c), ids_of(c));
      ASSERT_EQ(r.out.size(), want.size()) << c.name;
      for (size_t j = 0; j < want.size(); j++)
        expect_close(r.out[j], want[j], tolerance(target.dtype),
                     target.name() + " " + c.name + " output " + std::to_string(j));
      runs++;
    }
  EXPECT_GE(runs, 20) << "CPU fp32 implements every case";
}

// The guarded device runs the CPU's kernels on its own memory: every case, forward and backward, on every dtype and
// with one and two threads, bit for bit the CPU's results.
TEST(OpCases, GuardedDeviceEqualsCpuBitwise) {
  int runs = 0;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (bool large : {false, true})
      for (const OpCase& c : testing::op_cases(large)) {
        if (!op_supported(c.op, Device::GUARDED, dtype)) continue;
        ASSERT_TRUE(op_supported(c.op, Device::CPU, dtype)) << c.name;
        std::vector<std::vector<float>> dout, prefill;
        for (size_t j = 0; j < c.out.size(); j++) dout.push_back(noise(count(c.out[j].shape), 900 + (uint32_t)j));
        for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), 950 + (uint32_t)i));
        const Result want = execute(c, {Device::CPU, dtype}, values_of(c), &dout, &prefill);
        const Result got = execute(c, {Device::GUARDED, dtype}, values_of(c), &dout, &prefill);
        auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
          return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        for (size_t j = 0; j < want.out.size(); j++)
          EXPECT_TRUE(same_bits(got.out[j], want.out[j])) << dtype_name(dtype) << " " << c.name << " output " << j;
        for (size_t i = 0; i < want.din.size(); i++)
          EXPECT_TRUE(same_bits(got.din[i], want.din[i])) << dtype_name(dtype) << " " << c.name << " d" << c.in[i].name;
        runs++;
      }
  EXPECT_GE(runs, 120) << "the guarded device implements every case the CPU does";
}

// Forward and backward of every case on every target other than CPU fp32 against CPU fp32.
TEST(OpCases, EveryBackendMatchesCpuF32) {
  const Target reference{Device::CPU, DType::F32};
  for (const Target& target : targets()) {
    if (target.device == reference.device && target.dtype == reference.dtype) continue;
    for (const OpCase& c : testing::op_cases(false)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      for (size_t j = 0; j < c.out.size(); j++) dout.push_back(noise(count(c.out[j].shape), 100 + (uint32_t)j));
      for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), 200 + (uint32_t)i));
      const Result want = execute(c, reference, values_of(c), &dout, &prefill);
      const Result got = execute(c, target, values_of(c), &dout, &prefill);
      for (size_t j = 0; j < want.out.size(); j++)
        expect_close(got.out[j], widen(want.out[j]), tolerance(target.dtype), target.name() + " " + c.name);
      for (size_t i = 0; i < want.din.size(); i++)
        expect_close(got.din[i], widen(want.din[i]), tolerance(target.dtype),
                     target.name() + " " + c.name + " d" + c.in[i].name);
    }
  }
}

// bf16 and f16 runs are really low precision: every case's outputs or gradients differ from the fp32 run by more
// than fp32 rounding could explain (and, EveryBackendMatchesCpuF32, by less than the dtype's tolerance).
TEST(OpCases, LowPrecisionDiffersFromF32) {
  const Target reference{Device::CPU, DType::F32};
  for (const Target& target : targets()) {
    if (target.dtype == DType::F32) continue;
    int cases = 0;
    for (const OpCase& c : testing::op_cases(false)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      for (size_t j = 0; j < c.out.size(); j++) dout.push_back(noise(count(c.out[j].shape), 700 + (uint32_t)j));
      for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), 800 + (uint32_t)i));
      const Result want = execute(c, reference, values_of(c), &dout, &prefill);
      const Result got = execute(c, target, values_of(c), &dout, &prefill);
      double worst = 0;  // largest difference relative to the result's largest magnitude
      auto compare = [&](const std::vector<float>& g, const std::vector<float>& w) {
        double scale = 1e-30, diff = 0;
        for (size_t e = 0; e < w.size(); e++)
          scale = std::max(scale, (double)std::fabs(w[e])), diff = std::max(diff, (double)std::fabs(g[e] - w[e]));
        worst = std::max(worst, diff / std::max(1.0, scale));
      };
      for (size_t j = 0; j < want.out.size(); j++) compare(got.out[j], want.out[j]);
      for (size_t i = 0; i < want.din.size(); i++) compare(got.din[i], want.din[i]);
      EXPECT_GT(worst, least_difference(target.dtype)) << target.name() << " " << c.name << " equals fp32";
      cases++;
    }
    EXPECT_GE(cases, 20) << target.name() << " implements every case";
  }
}

// Backward against central differences of L = Σ_j out_j · w_j (w random), gradients pre-filled with noise so
// that a backward which overwrites instead of accumulating fails. In float32 the step is large (1e-2: truncation
// ~eps², rounding ~1e-7/eps) and the tolerance relative to the largest gradient; real bugs are off by O(1).
TEST(OpCases, BackwardMatchesFiniteDifferences) {
  const Target target{Device::CPU, DType::F32};
  for (const OpCase& c : testing::op_cases(false)) {
    if (!c.backward) continue;
    std::vector<std::vector<float>> w, prefill;
    for (size_t j = 0; j < c.out.size(); j++) w.push_back(noise(count(c.out[j].shape), 300 + (uint32_t)j));
    for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), 400 + (uint32_t)i));
    std::vector<std::vector<float>> x = values_of(c);
    const Result analytic = execute(c, target, x, &w, &prefill);
    auto loss = [&]() {
      const Result r = execute(c, target, x, nullptr, nullptr);
      double s = 0;
      for (size_t j = 0; j < r.out.size(); j++)
        for (size_t e = 0; e < r.out[j].size(); e++) s += (double)r.out[j][e] * w[j][e];
      return s;
    };
    const float eps = 1e-2f;
    for (size_t i = 0; i < c.in.size(); i++) {
      if (!c.in[i].grad) continue;
      double max_grad = 0, max_err = 0;
      size_t worst = 0;
      for (size_t e = 0; e < x[i].size(); e++) {
        const float saved = x[i][e];
        x[i][e] = saved + eps;
        const double lp = loss();
        x[i][e] = saved - eps;
        const double lm = loss();
        x[i][e] = saved;
        const double numeric = (lp - lm) / (2.0 * eps);
        const double got = (double)analytic.din[i][e] - prefill[i][e];
        max_grad = std::max(max_grad, std::fabs(numeric));
        if (std::fabs(numeric - got) > max_err) max_err = std::fabs(numeric - got), worst = e;
      }
      EXPECT_GT(max_grad, 0.0) << c.name << " d" << c.in[i].name << ": no gradient at all";
      EXPECT_LE(max_err, 3e-3 * std::max(1.0, max_grad))
          << c.name << " d" << c.in[i].name << ": worst element " << worst << " of " << x[i].size()
          << ", max |grad| " << max_grad;
    }
  }
}

// Above the kernels' parallel thresholds, one thread and two give the same results (up to reduction order):
// catches races in split loops (scatter-adds, column sums, per-(b,h) attention, GEMM blocks). The CPU's targets
// only: the guarded device runs the same kernels (bitwise the CPU's, GuardedDeviceEqualsCpuBitwise) and a GPU has no
// thread count, so their runs here repeated the CPU's at twice the cost.
TEST(OpCases, TwoThreadsMatchOne) {
  for (const Target& target : targets()) {
    if (target.device != Device::CPU) continue;
    for (const OpCase& c : testing::op_cases(true)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      for (size_t j = 0; j < c.out.size(); j++) dout.push_back(noise(count(c.out[j].shape), 500 + (uint32_t)j));
      for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), 600 + (uint32_t)i));
      Backend& be = backend_for(target.device);
      const int saved = be.num_threads();
      be.set_num_threads(1);
      const Result one = execute(c, target, values_of(c), &dout, &prefill);
      be.set_num_threads(2);
      const Result two = execute(c, target, values_of(c), &dout, &prefill);
      be.set_num_threads(saved);
      // fp32 reduction order, which rounding to bf16/f16 storage can turn into one unit of the last place.
      const double tol = target.dtype == DType::F32 ? 1e-5 : target.dtype == DType::F16 ? 1e-3 : 8e-3;
      for (size_t j = 0; j < one.out.size(); j++)
        expect_close(two.out[j], widen(one.out[j]), tol, target.name() + " " + c.name + " (2 threads)");
      for (size_t i = 0; i < one.din.size(); i++)
        expect_close(two.din[i], widen(one.din[i]), tol, target.name() + " " + c.name + " d" + c.in[i].name);
    }
  }
}

// LayerNorm's parameter gradients accumulate into existing ones (gradient accumulation over micro-batches) from
// per-thread partials: with two threads (rows split statically in halves) dweight = (g + p0) + p1 every run, the
// partials in thread order. Adding them under a lock in arrival order gave (g + p1) + p0 whenever the second thread
// finished first: results that changed from run to run.
TEST(LayerNormCpu, ParameterGradientPartialsAddInThreadOrder) {
  const int64_t N = 1024, C = 768;
  const std::vector<float> x = noise((size_t)(N * C), 11), d = noise((size_t)(N * C), 12), w = noise((size_t)C, 13),
                           b = noise((size_t)C, 14), g = noise((size_t)C, 15);
  std::vector<float> y((size_t)(N * C)), mean((size_t)N), rstd((size_t)N);
  layernorm_forward(make_view(y.data(), {N, C}), make_view(mean.data(), {N}), make_view(rstd.data(), {N}),
                    make_view(const_cast<float*>(x.data()), {N, C}), make_view(const_cast<float*>(w.data()), {C}),
                    make_view(const_cast<float*>(b.data()), {C}), 1e-5f);
  // dweight, dbias of rows [r0, r1) added to `into` (one thread when the rows are few enough, else as configured)
  auto backward = [&](int64_t r0, int64_t r1, std::vector<float>& dw, std::vector<float>& db) {
    std::vector<float> dx((size_t)((r1 - r0) * C), 0.0f);
    auto rows = [&](const std::vector<float>& v) { return make_view(const_cast<float*>(v.data()) + r0 * C, {r1 - r0, C}); };
    layernorm_backward(make_view(dx.data(), {r1 - r0, C}), make_view(dw.data(), {C}), make_view(db.data(), {C}),
                       rows(d), rows(x), make_view(const_cast<float*>(w.data()), {C}),
                       make_view(mean.data() + r0, {r1 - r0}), make_view(rstd.data() + r0, {r1 - r0}));
  };
  Backend& be = backend_for(Device::CPU);
  const int saved = be.num_threads();
  be.set_num_threads(1);
  std::vector<float> p0w((size_t)C, 0.0f), p0b((size_t)C, 0.0f), p1w((size_t)C, 0.0f), p1b((size_t)C, 0.0f);
  backward(0, N / 2, p0w, p0b);
  backward(N / 2, N, p1w, p1b);
  std::vector<float> want_w((size_t)C), want_b((size_t)C);
  for (int64_t c = 0; c < C; c++) {
    want_w[(size_t)c] = (g[(size_t)c] + p0w[(size_t)c]) + p1w[(size_t)c];
    want_b[(size_t)c] = (g[(size_t)c] + p0b[(size_t)c]) + p1b[(size_t)c];
  }
  be.set_num_threads(2);
  for (int run = 0; run < 20; run++) {
    std::vector<float> dw = g, db = g;
    backward(0, N, dw, db);
    ASSERT_EQ(0, std::memcmp(dw.data(), want_w.data(), want_w.size() * sizeof(float))) << "dweight, run " << run;
    ASSERT_EQ(0, std::memcmp(db.data(), want_b.data(), want_b.size() * sizeof(float))) << "dbias, run " << run;
  }
  be.set_num_threads(saved);
}

// ---- dropout's generator -------------------------------------------------------------------------------------------

// Random123's known-answer vectors for philox4x32_10 (kat_vectors): the test's independent Philox is right.
TEST(Dropout, PhiloxKnownAnswers) {
  using testing::philox4x32_10;
  auto expect = [](testing::Philox4 got, std::array<uint32_t, 4> want) {
    for (int i = 0; i < 4; i++) EXPECT_EQ(got.v[i], want[(size_t)i]) << "word " << i;
  };
  expect(philox4x32_10({{0, 0, 0, 0}}, 0, 0), {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expect(philox4x32_10({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff),
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  expect(philox4x32_10({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0),
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

// The kernels' keep decisions are the reference generator's, element for element.
TEST(Dropout, KeepDecisionsAreTheReferenceGenerators) {
  for (float p : {0.1f, 0.5f, 0.9f})
    for (uint64_t stream : {0ull, 1ull, 0xfedcba9876543210ull}) {
      const DropoutKey key{p, 0x0123456789abcdefull, stream};
      for (uint64_t i = 0; i < 4099; i++)
        ASSERT_EQ(dropout_keep(key, i), testing::reference_keep(p, key.seed, stream, i)) << "p " << p << " i " << i;
    }
}

// Keep rate ≈ 1 − p (binomial: within 5 standard deviations), kept values scaled by exactly 1/(1 − p) in float,
// different streams give different masks, and p = 0 is the identity.
TEST(Dropout, KeepRateAndScaling) {
  Backend& be = cpu_backend();
  const int64_t n = 1 << 20;
  Buffer in(be, DType::F32, (size_t)n), out(be, DType::F32, (size_t)n), out2(be, DType::F32, (size_t)n);
  for (int64_t i = 0; i < n; i++) in.f32()[i] = 1.0f + (float)(i % 7);
  for (float p : {0.0f, 0.1f, 0.5f}) {
    dropout_forward(out.view({n}), in.view({n}), {p, 1234, 5});
    dropout_forward(out2.view({n}), in.view({n}), {p, 1234, 6});
    int64_t kept = 0, differ = 0;
    for (int64_t i = 0; i < n; i++) {
      const float y = out.f32()[i];
      if (y != 0.0f) {
        kept++;
        ASSERT_EQ(y, in.f32()[i] * (1.0f / (1.0f - p))) << "element " << i;
      }
      differ += (y == 0.0f) != (out2.f32()[i] == 0.0f);
    }
    const double sd = std::sqrt((double)n * p * (1 - p));
    EXPECT_NEAR((double)kept, n * (1.0 - p), 5 * sd + 0.5) << "p " << p;
    if (p > 0) {
      EXPECT_GT(differ, n * p / 2) << "streams 5 and 6 should give independent masks";
    }
  }
  // In place (out aliasing inp) equals out of place.
  dropout_forward(out.view({n}), in.view({n}), {0.3f, 9, 9});
  Buffer alias(be, DType::F32, (size_t)n);
  std::memcpy(alias.f32(), in.f32(), (size_t)n * 4);
  dropout_forward(alias.view({n}), alias.view({n}), {0.3f, 9, 9});
  EXPECT_EQ(std::memcmp(alias.f32(), out.f32(), (size_t)n * 4), 0);
}

// ---- cross-entropy backward: the loss composed from the statistics ------------------------------------------------

// loss_n = m_n + log Σ exp(l − m) − l[target]; with a vocabulary split into two column pieces, the combined
// statistics give the whole row's loss and each piece's backward its columns of the whole gradient.
TEST(CrossEntropy, TwoVocabularyPiecesGiveTheWholeLossAndGradient) {
  Backend& be = cpu_backend();
  const int64_t N = 5, V = 12, half = V / 2;
  std::vector<float> logits = noise((size_t)(N * V), 7);
  for (auto& x : logits) x *= 3.0f;
  std::vector<int32_t> targets = {0, 11, 5, 6, 3};
  std::vector<float> dloss = {0.2f, 0.0f, 0.5f, 0.2f, 0.1f};  // a masked row (0)
  // Reference in double.
  std::vector<double> loss((size_t)N), grad((size_t)(N * V));
  for (int64_t n = 0; n < N; n++) {
    double mx = -1e300, s = 0;
    for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)logits[(size_t)(n * V + v)]);
    for (int64_t v = 0; v < V; v++) s += std::exp(logits[(size_t)(n * V + v)] - mx);
    const double lse = mx + std::log(s);
    loss[(size_t)n] = lse - logits[(size_t)(n * V + targets[(size_t)n])];
    for (int64_t v = 0; v < V; v++)
      grad[(size_t)(n * V + v)] = dloss[(size_t)n] * (std::exp(logits[(size_t)(n * V + v)] - lse) - (v == targets[(size_t)n]));
  }
  Buffer tg(be, DType::I32, (size_t)N), dl(be, DType::F32, (size_t)N);
  std::memcpy(tg.i32(), targets.data(), (size_t)N * 4);
  std::memcpy(dl.f32(), dloss.data(), (size_t)N * 4);
  std::vector<Buffer> piece, mx, se, tl;
  for (int r = 0; r < 2; r++) {
    piece.emplace_back(be, DType::F32, (size_t)(N * half));
    for (int64_t n = 0; n < N; n++)
      std::memcpy(piece.back().f32() + n * half, logits.data() + n * V + r * half, (size_t)half * 4);
    mx.emplace_back(be, DType::F32, (size_t)N), se.emplace_back(be, DType::F32, (size_t)N);
    tl.emplace_back(be, DType::F32, (size_t)N);
    crossentropy_row_max(mx.back().view({N}), piece.back().view({N, half}));
  }
  Buffer m(be, DType::F32, (size_t)N), lse(be, DType::F32, (size_t)N);
  for (int64_t n = 0; n < N; n++) m.f32()[n] = std::max(mx[0].f32()[n], mx[1].f32()[n]);  // the max all-reduce
  for (int r = 0; r < 2; r++)
    crossentropy_sumexp(se[(size_t)r].view({N}), tl[(size_t)r].view({N}), piece[(size_t)r].view({N, half}),
                        m.view({N}), tg.view({N}), r * half);
  for (int64_t n = 0; n < N; n++) {  // the sum all-reduces
    lse.f32()[n] = m.f32()[n] + std::log(se[0].f32()[n] + se[1].f32()[n]);
    EXPECT_NEAR(lse.f32()[n] - (tl[0].f32()[n] + tl[1].f32()[n]), loss[(size_t)n], 1e-5) << "row " << n;
  }
  for (int r = 0; r < 2; r++) {
    // In place over the logits, as the model does.
    crossentropy_backward(piece[(size_t)r].view({N, half}), piece[(size_t)r].view({N, half}), lse.view({N}),
                          tg.view({N}), dl.view({N}), r * half);
    for (int64_t n = 0; n < N; n++)
      for (int64_t v = 0; v < half; v++)
        EXPECT_NEAR(piece[(size_t)r].f32()[n * half + v], grad[(size_t)(n * V + r * half + v)], 1e-6)
            << "row " << n << " column " << r * half + v;
  }
}

// A GPT-2-wide row (50304 columns) with spread-out logits: the vectorised exp and the reduction order stay within
// float32 accuracy of the double-precision log-sum-exp.
TEST(CrossEntropy, WideRowsMatchDouble) {
  Backend& be = cpu_backend();
  const int64_t N = 3, V = 50304;
  std::vector<float> host = noise((size_t)(N * V), 9);
  for (auto& x : host) x *= 4.0f;
  Buffer logits = upload(be, DType::F32, host);
  Buffer m(be, DType::F32, N), se(be, DType::F32, N), tl(be, DType::F32, N), tg(be, DType::I32, N);
  const int32_t targets[3] = {0, 50303, 12345};
  std::memcpy(tg.i32(), targets, sizeof targets);
  crossentropy_row_max(m.view({N}), logits.view({N, V}));
  crossentropy_sumexp(se.view({N}), tl.view({N}), logits.view({N, V}), m.view({N}), tg.view({N}), 0);
  for (int64_t n = 0; n < N; n++) {
    double mx = -1e30, s = 0;
    for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)host[(size_t)(n * V + v)]);
    for (int64_t v = 0; v < V; v++) s += std::exp(host[(size_t)(n * V + v)] - mx);
    const double ref = mx + std::log(s);
    EXPECT_NEAR(m.f32()[n] + std::log((double)se.f32()[n]), ref, 2e-6 * std::fabs(ref));
  }
}

// bf16 logits as the GPT keeps them under --bf16 (read directly, no fp32 row): statistics within fp32 accuracy of
// double precision on the same bf16 values, dlogits written in place within one bf16 rounding of the exact
// gradient (the target column included, a target in another shard, a masked row with dloss 0).
TEST(CrossEntropy, Bf16WideRowsInPlaceMatchDouble) {
  Backend& be = cpu_backend();
  const int64_t N = 4, V = 50304, col_offset = 100;
  std::vector<float> host = noise((size_t)(N * V), 21);
  for (auto& x : host) x *= 4.0f;
  Buffer f32 = upload(be, DType::F32, host), logits(be, DType::BF16, (size_t)(N * V)), back(be, DType::F32, host.size());
  copy(logits.view({N * V}), f32.view({N * V}));
  copy(back.view({N * V}), logits.view({N * V}));
  const std::vector<float> exact(back.f32(), back.f32() + N * V);  // the bf16 values the kernels see
  const int32_t targets[4] = {100, 50403, 7, 12345};                 // column 0, the last column, another shard
  const float dloss[4] = {0.25f, 0.25f, 0.25f, 0.0f};
  Buffer m(be, DType::F32, N), se(be, DType::F32, N), tl(be, DType::F32, N), tg(be, DType::I32, N),
      lse(be, DType::F32, N), dl(be, DType::F32, N);
  std::memcpy(tg.i32(), targets, sizeof targets);
  std::memcpy(dl.f32(), dloss, sizeof dloss);
  crossentropy_row_max(m.view({N}), logits.view({N, V}));
  crossentropy_sumexp(se.view({N}), tl.view({N}), logits.view({N, V}), m.view({N}), tg.view({N}), col_offset);
  std::vector<double> ref_lse((size_t)N);
  for (int64_t n = 0; n < N; n++) {
    double mx = -1e30, s = 0;
    for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)exact[(size_t)(n * V + v)]);
    for (int64_t v = 0; v < V; v++) s += std::exp(exact[(size_t)(n * V + v)] - mx);
    ref_lse[(size_t)n] = mx + std::log(s);
    EXPECT_EQ(m.f32()[n], (float)mx) << "row " << n;
    EXPECT_NEAR(m.f32()[n] + std::log((double)se.f32()[n]), ref_lse[(size_t)n], 2e-6 * std::fabs(ref_lse[(size_t)n]));
    const int64_t t = targets[n] - col_offset;
    EXPECT_EQ(tl.f32()[n], t >= 0 && t < V ? exact[(size_t)(n * V + t)] : 0.0f) << "row " << n;
    lse.f32()[n] = (float)ref_lse[(size_t)n];
  }
  crossentropy_backward(logits.view({N, V}), logits.view({N, V}), lse.view({N}), tg.view({N}), dl.view({N}),
                        col_offset);
  copy(back.view({N * V}), logits.view({N * V}));
  size_t bad = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t v = 0; v < V; v++) {
      const double p = std::exp((double)exact[(size_t)(n * V + v)] - (double)lse.f32()[n]);
      const double want = dloss[n] * (p - (v + col_offset == targets[n] ? 1.0 : 0.0));
      const double got = back.f32()[n * V + v];
      // one bf16 rounding (2^-9 relative) of an fp32 value a few ulps from exact
      if (!(std::fabs(got - want) <= std::ldexp(std::fabs(want), -8) + 1e-30)) {
        if (bad++ < 5) ADD_FAILURE() << "dlogits[" << n << "," << v << "] = " << got << ", want " << want;
      }
    }
  EXPECT_EQ(bad, 0u);
  EXPECT_LT(back.f32()[0], 0.0f) << "the target column carries −dloss";
}

// The one-pass statistics (a rank holding whole rows) are the two passes' values bit for bit, in every dtype.
TEST(CrossEntropy, OnePassStatsEqualTwoPasses) {
  Backend& be = cpu_backend();
  const int64_t N = 5, V = 50304, col_offset = 7;
  std::vector<float> host = noise((size_t)(N * V), 33);
  for (auto& x : host) x *= 5.0f;
  const int32_t targets[5] = {7, 50310, 3, 20000, 50311};  // first column, last column, outside, inside, outside
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    Buffer logits = upload(be, dt, host), tg(be, DType::I32, N);
    std::memcpy(tg.i32(), targets, sizeof targets);
    Buffer m1(be, DType::F32, N), s1(be, DType::F32, N), t1(be, DType::F32, N);
    Buffer m2(be, DType::F32, N), s2(be, DType::F32, N), t2(be, DType::F32, N);
    crossentropy_row_max(m1.view({N}), logits.view({N, V}));
    crossentropy_sumexp(s1.view({N}), t1.view({N}), logits.view({N, V}), m1.view({N}), tg.view({N}), col_offset);
    crossentropy_stats(m2.view({N}), s2.view({N}), t2.view({N}), logits.view({N, V}), tg.view({N}), col_offset);
    EXPECT_EQ(0, std::memcmp(m1.f32(), m2.f32(), N * 4)) << dtype_name(dt);
    EXPECT_EQ(0, std::memcmp(s1.f32(), s2.f32(), N * 4)) << dtype_name(dt);
    EXPECT_EQ(0, std::memcmp(t1.f32(), t2.f32(), N * 4)) << dtype_name(dt);
    EXPECT_EQ(t2.f32()[2], 0.0f) << "a target outside the columns contributes 0";
    EXPECT_GT(s2.f32()[0], 1.0f);
  }
}

// ---- operand checks and the backend ---------------------------------------------------------------------------------

// The multi-tensor forms equal their single-tensor ops run by run, bit for bit, on the CPU and the guarded device
// (the guarded device also proves the forms touch every run's memory only inside the op).
TEST(MultiTensorOps, AdamwEqualsPerTensorBitwise) {
  for (Device d : {Device::CPU, Device::GUARDED}) testing::check_adamw_multi(d);
}
TEST(MultiTensorOps, SgdEqualsPerTensorBitwise) {
  for (Device d : {Device::CPU, Device::GUARDED}) testing::check_sgd_multi(d);
}
TEST(MultiTensorOps, LambPhasesAndStepEqualPerTensorBitwise) {
  for (Device d : {Device::CPU, Device::GUARDED}) testing::check_lamb_multi(d);
}
TEST(MultiTensorOps, ScaleAndSumSquaresEqualPerTensorBitwise) {
  for (Device d : {Device::CPU, Device::GUARDED}) testing::check_scale_and_sum_squares_multi(d);
}

TEST(OpChecks, MismatchedOperandsNameTheOpAndTheOperand) {
  Backend& be = cpu_backend();
  Buffer a(be, DType::F32, 12), ids(be, DType::I32, 12);
  try {
    add_forward(a.view({12}), a.view({12}), ids.view({12}));
    FAIL() << "an i32 operand of add was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("add"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("i32[12]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linear_forward(a.view({3, 4}), a.view({3, 4}), a.view({3, 3}), Tensor{}, WeightLayout::IN_OUT),
               std::exception);
  Buffer bf(be, DType::BF16, 12);
  if (!op_supported(Op::ADD, Device::CPU, DType::BF16)) {
    EXPECT_THROW(add_forward(bf.view({12}), bf.view({12}), bf.view({12})), std::exception);
  }
}

// Attention's saved state is the device's choice (ops.h): the CPU and the guarded device (which runs the CPU's
// kernels) keep the probabilities [B,H,Tq,Tk], CUDA the row log-sum-exp [B,H,Tq]; a state of the other form is
// refused naming what the device keeps, and the backward needs the forward's output.
TEST(AttentionSaved, EachDeviceKeepsItsFormAndOthersAreRefused) {
  EXPECT_EQ(attention_saved(Device::CPU), AttentionSaved::PROBS);
  EXPECT_EQ(attention_saved(Device::GUARDED), AttentionSaved::PROBS);
  EXPECT_EQ(attention_saved(Device::CUDA), AttentionSaved::LSE);
  EXPECT_EQ(attention_saved_numel(Device::CPU, 2, 3, 5, 7), 2 * 3 * 5 * 7);
  EXPECT_EQ(attention_saved_numel(Device::CUDA, 2, 3, 5, 7), 2 * 3 * 5);
  float room[2 * 3 * 5 * 7];
  const Tensor lse = attention_saved_view(room, Device::CUDA, 2, 3, 5, 7);
  EXPECT_EQ(lse.ndim, 3);
  EXPECT_EQ(lse.numel(), 2 * 3 * 5);
  EXPECT_EQ(attention_saved_view(room, Device::CPU, 2, 3, 5, 7).numel(), 2 * 3 * 5 * 7);

  Backend& be = cpu_backend();
  Buffer q(be, DType::F32, 8), out(be, DType::F32, 8), grad(be, DType::F32, 8), saved(be, DType::F32, 16);
  q.zero();
  grad.zero();
  const Tensor x = q.view({1, 4, 2});
  try {
    attention_forward(out.view({1, 4, 2}), saved.view({1, 1, 4}), x, x, x, 1, AttentionMask::CAUSAL, Tensor{}, {});
    FAIL() << "a log-sum-exp sized state was accepted on the cpu";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("probabilities"), std::string::npos) << e.what();
  }
  const Tensor probs = saved.view({1, 1, 4, 4});
  attention_forward(out.view({1, 4, 2}), probs, x, x, x, 1, AttentionMask::CAUSAL, Tensor{}, {});
  const Tensor g = grad.view({1, 4, 2});
  EXPECT_THROW(attention_backward(g, g, g, g, Tensor{}, x, x, x, probs, 1, AttentionMask::CAUSAL, Tensor{}, {}),
               std::exception);
  attention_backward(g, g, g, g, out.view({1, 4, 2}), x, x, x, probs, 1, AttentionMask::CAUSAL, Tensor{}, {});
}

TEST(KernelBackend, AllocatesByBytesAndMovesMemory) {
  Backend& be = cpu_backend();
  EXPECT_STREQ(be.name(), "cpu");
  EXPECT_EQ(be.device(), Device::CPU);
  EXPECT_FALSE(be.info().empty());
  expect_memory_functions(be, 1000);
  expect_memory_functions(be, 5000);  // whole pages inside the released range: the CPU returns them (madvise)
  // Buffers of every dtype, token ids included.
  Buffer ids(be, DType::I32, 7), half(be, DType::BF16, 7);
  EXPECT_EQ(ids.bytes(), 28u);
  EXPECT_EQ(half.bytes(), 14u);
  EXPECT_THROW(half.f32(), std::exception);
  EXPECT_EQ(&backend_for(Device::CPU), &be);
}

}  // namespace
}  // namespace lmforge::kernels
