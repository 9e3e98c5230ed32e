// defines: the op cases on the CUDA backend (test names contain "Cuda"): every case of op_cases.h on every
//          (cuda, dtype) the backend registers — forward against the double-precision reference, forward and
//          backward against CPU fp32 (where the build has the CPU kernels), backward against finite differences of
//          the CUDA forward, bf16/f16 really low precision, two runs bit-identical (races, atomics), dropout's keep
//          decisions against the reference generator — and the backend's memory functions. Without a usable GPU
//          every device test is skipped naming why (no CUDA backend in the build, no driver, no device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_checks.h"
#include "kernels/cuda/device_choice.h"
#include "kernels/ops.h"
#include "multi_tensor_checks.h"
#include "op_cases.h"
#include "op_harness.h"

namespace lmforge::kernels {
namespace {

using testing::execute;
using testing::expect_close;
using testing::noise;
using testing::OpCase;
using testing::Result;
using testing::Target;

#define SKIP_WITHOUT_CUDA()                                            \
  do {                                                                 \
    const std::string why = testing::cuda_unavailable();               \
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why; \
  } while (0)

std::vector<Target> cuda_targets() {
  return {{Device::CUDA, DType::F32}, {Device::CUDA, DType::BF16}, {Device::CUDA, DType::F16}};
}

// Noise for a case's output gradients and gradient pre-fills.
void gradients_for(const OpCase& c, uint32_t seed, std::vector<std::vector<float>>& dout,
                   std::vector<std::vector<float>>& prefill) {
  for (size_t j = 0; j < c.out.size(); j++) dout.push_back(noise(testing::count(c.out[j].shape), seed + (uint32_t)j));
  for (size_t i = 0; i < c.in.size(); i++) prefill.push_back(noise(c.in[i].values.size(), seed + 50 + (uint32_t)i));
}

// The CUDA backend registers every op of ops.h (forward and backward): the optimizer passes for f32, everything else
// — tanh included, which the CPU has in f32 only — for f32, bf16 and f16. Independent of a device being present.
TEST(CudaDispatch, EveryOpIsRegistered) {
  const Op all[] = {Op::EMBEDDING, Op::LAYERNORM, Op::LINEAR, Op::BIAS_ADD, Op::ADD, Op::GELU, Op::TANH,
                    Op::DROPOUT, Op::ATTENTION, Op::ATTENTION_DECODE, Op::COPY, Op::CROSSENTROPY};
  const Op f32_only[] = {Op::ADAMW, Op::LAMB, Op::SGD, Op::SCALE, Op::SUM_SQUARES, Op::COUNT_NONFINITE, Op::ROUND_F16};
  if (!op_supported(Op::ADD, Device::CUDA, DType::F32)) {
    // A build without the CUDA backend: backend_for names that, and nothing is registered.
    EXPECT_NE(testing::cuda_unavailable().find("no CUDA backend"), std::string::npos) << testing::cuda_unavailable();
    GTEST_SKIP() << "this build has no CUDA backend";
  }
  for (Op op : all)
    for (DType d : {DType::F32, DType::BF16, DType::F16}) EXPECT_TRUE(op_supported(op, Device::CUDA, d)) << op_name(op);
  for (Op op : f32_only) EXPECT_TRUE(op_supported(op, Device::CUDA, DType::F32)) << op_name(op);
}

// Without a device the backend's error says why (here: no driver or no GPU), as `--device cuda` reports it.
TEST(CudaBackend, NoDeviceErrorNamesTheReasonOrTheDeviceWorks) {
  const std::string why = testing::cuda_unavailable();
  if (why.empty()) {
    Backend& be = backend_for(Device::CUDA);
    EXPECT_EQ(be.device(), Device::CUDA);
    EXPECT_STREQ(be.name(), "cuda");
    EXPECT_NE(be.info().find("cuda"), std::string::npos) << be.info();
    return;
  }
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  // The runtime's version is the one built in, also where the runtime cannot report it without a driver (CUDA 11).
  EXPECT_EQ(why.find(" 0.0 runtime"), std::string::npos) << why;
  EXPECT_TRUE(why.find("driver") != std::string::npos || why.find("device") != std::string::npos ||
              why.find("backend") != std::string::npos)
      << why;
  // An op on a CUDA tensor stops with the same reason before touching memory.
  Tensor t = make_view(static_cast<void*>(nullptr), DType::F32, {4}, Device::CUDA);
  t.data = reinterpret_cast<void*>(uintptr_t(256));  // never dereferenced: the backend is missing first
  if (op_supported(Op::SCALE, Device::CUDA, DType::F32)) {
    try {
      scale(t, 2.0f);
      ADD_FAILURE() << "an op ran on a missing CUDA device";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
  }
}

// Each process of a multi-process job takes the GPU of its rank on the node (modulo the visible GPUs), from the
// first launcher variable set; without one, GPU 0. Host logic: runs in every build, with or without a GPU.
TEST(CudaDeviceChoice, LocalRankPicksTheGpu) {
  const char* names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names)
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
  for (const char* n : names) unsetenv(n);
  std::string source;
  EXPECT_EQ(cuda::local_rank_device(4, &source), 0);
  EXPECT_EQ(source, "no local rank set");
  setenv("SLURM_LOCALID", "2", 1);
  EXPECT_EQ(cuda::local_rank_device(4, &source), 2);
  EXPECT_EQ(source, "SLURM_LOCALID=2");
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);  // comes before Slurm's: mpirun under Slurm
  EXPECT_EQ(cuda::local_rank_device(4, &source), 1) << "rank 5 of a node with 4 GPUs";
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(cuda::local_rank_device(8, nullptr), 3);
  EXPECT_EQ(cuda::local_rank_device(1, nullptr), 0) << "CUDA_VISIBLE_DEVICES narrowed to one GPU";
  setenv("LOCAL_RANK", "x1", 1);
  EXPECT_THROW(cuda::local_rank_device(8, nullptr), Error);
  for (const char* n : names) unsetenv(n);
  for (const auto& [n, v] : saved) setenv(n.c_str(), v.c_str(), 1);
}

TEST(CudaBackend, MemoryFunctions) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend_for(Device::CUDA);
  expect_memory_functions(be, 1000);
  expect_memory_functions(be, 1 << 20);
}

// Forward of every case on every CUDA dtype against the double-precision reference (the CPU's tolerances).
TEST(OpCasesCuda, ForwardMatchesTheReference) {
  SKIP_WITHOUT_CUDA();
  int runs = 0;
  for (const Target& target : cuda_targets())
    for (bool large : {false, true})
      for (const OpCase& c : testing::op_cases(large)) {
        if (!op_supported(c.op, target.device, target.dtype)) continue;
        const Result r = execute(c, target, testing::values_of(c), nullptr, nullptr);
        const auto want = c.reference(testing::values_of(c), testing::ids_of(c));
        ASSERT_EQ(r.out.size(), want.size()) << c.name;
        for (size_t j = 0; j < want.size(); j++)
          expect_close(r.out[j], want[j], testing::tolerance(target.dtype),
                       target.name() + " " + c.name + (large ? " (large)" : "") + " output " + std::to_string(j));
        runs++;
      }
  // 33 cases (9 of them optimizer passes, f32 only), small and large: 2·(33 + 2·24).
  EXPECT_GE(runs, 162) << "every case on f32, and the non-optimizer cases (tanh included) on bf16 and f16";
}

// Forward and backward of every case on every CUDA dtype against CPU fp32 (a build with the CPU kernels).
TEST(OpCasesCuda, MatchesCpuF32) {
  SKIP_WITHOUT_CUDA();
  if (!op_supported(Op::ADD, Device::CPU, DType::F32))
    GTEST_SKIP() << "this build has no CPU kernels (LMFORGE_KERNELS_ONLY): the CUDA results are checked against the "
                    "double-precision reference and finite differences only";
  const Target reference{Device::CPU, DType::F32};
  for (const Target& target : cuda_targets())
    for (const OpCase& c : testing::op_cases(false)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      gradients_for(c, 100, dout, prefill);
      const Result want = execute(c, reference, testing::values_of(c), &dout, &prefill);
      const Result got = execute(c, target, testing::values_of(c), &dout, &prefill);
      for (size_t j = 0; j < want.out.size(); j++)
        expect_close(got.out[j], testing::widen(want.out[j]), testing::tolerance(target.dtype),
                     target.name() + " " + c.name);
      for (size_t i = 0; i < want.din.size(); i++)
        expect_close(got.din[i], testing::widen(want.din[i]), testing::tolerance(target.dtype),
                     target.name() + " " + c.name + " d" + c.in[i].name);
    }
}

// Every attention case, small and large (the flash kernels' tiles, head sizes and many-block grids are in the large
// list, which the test above leaves out), forward and backward on every CUDA dtype against CPU fp32. By default the
// bf16/f16 cases of head size 32, 64 and 128 take the tensor-core kernels; CTest runs this binary's op cases again with
// LMFORGE_CUDA_ATTENTION=flash and =rows (KernelsOpsCudaFlashAttention, KernelsOpsCudaRowAttention), so the WMMA
// flash kernels and the row kernels pass the same cases.
TEST(AttentionCuda, EveryCaseMatchesCpuF32) {
  SKIP_WITHOUT_CUDA();
  if (!op_supported(Op::ADD, Device::CPU, DType::F32))
    GTEST_SKIP() << "this build has no CPU kernels (LMFORGE_KERNELS_ONLY): attention is checked against the "
                    "double-precision reference only";
  const Target reference{Device::CPU, DType::F32};
  int runs = 0;
  for (const Target& target : cuda_targets())
    for (bool large : {false, true})
      for (const OpCase& c : testing::op_cases(large)) {
        if (c.op != Op::ATTENTION) continue;
        std::vector<std::vector<float>> dout, prefill;
        gradients_for(c, 200, dout, prefill);
        const Result want = execute(c, reference, testing::values_of(c), &dout, &prefill);
        const Result got = execute(c, target, testing::values_of(c), &dout, &prefill);
        const std::string what = target.name() + " " + c.name + (large ? " (large)" : "");
        for (size_t j = 0; j < want.out.size(); j++)
          expect_close(got.out[j], testing::widen(want.out[j]), testing::tolerance(target.dtype), what);
        for (size_t i = 0; i < want.din.size(); i++)
          expect_close(got.din[i], testing::widen(want.din[i]), testing::tolerance(target.dtype),
                       what + " d" + c.in[i].name);
        runs++;
      }
  EXPECT_EQ(runs, 3 * 18) << "7 small and 11 large attention cases on f32, bf16 and f16";
}

// Where the CUDA kernel does the CPU's arithmetic in the CPU's order — element-wise ops without a product to
// contract, the ascending-n embedding scatter-add, the optimizer steps (their CPU file is compiled without
// contraction and both sides round each operation, fma() where ops.h writes it) — fp32 results are the CPU's bit for
// bit. (GELU, softmax, cross-entropy and the GEMMs use the GPU's own exp/tanh/erf and sum orders: tolerance only.)
TEST(OpCasesCuda, BitExactWhereDeclared) {
  SKIP_WITHOUT_CUDA();
  if (!op_supported(Op::ADD, Device::CPU, DType::F32))
    GTEST_SKIP() << "this build has no CPU kernels (LMFORGE_KERNELS_ONLY): nothing to compare bit for bit";
  auto declared = [](Op op, bool gradients) {
    if (gradients) return op == Op::ADD || op == Op::EMBEDDING;
    return op == Op::ADD || op == Op::EMBEDDING || op == Op::DROPOUT || op == Op::COPY || op == Op::SCALE ||
           op == Op::ROUND_F16 || op == Op::ADAMW || op == Op::SGD;
  };
  int compared = 0;
  for (bool large : {false, true})
    for (const OpCase& c : testing::op_cases(large)) {
      if (!declared(c.op, false)) continue;
      std::vector<std::vector<float>> dout, prefill;
      gradients_for(c, 900, dout, prefill);
      const Result want = execute(c, {Device::CPU, DType::F32}, testing::values_of(c), &dout, &prefill);
      const Result got = execute(c, {Device::CUDA, DType::F32}, testing::values_of(c), &dout, &prefill);
      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      for (size_t j = 0; j < want.out.size(); j++) EXPECT_TRUE(same(got.out[j], want.out[j])) << c.name << " output " << j;
      if (declared(c.op, true)) {
        for (size_t i = 0; i < want.din.size(); i++)
          EXPECT_TRUE(same(got.din[i], want.din[i])) << c.name << " d" << c.in[i].name;
      }
      compared++;
    }
  EXPECT_GE(compared, 2 * 10);
}

// CUDA fp32 backward against central differences of the CUDA fp32 forward (L = Σ out·w), gradients pre-filled
// with noise so that = instead of += fails; the same step and tolerance as the CPU's test. Needs fp32 without TF32.
TEST(OpCasesCuda, BackwardMatchesFiniteDifferences) {
  SKIP_WITHOUT_CUDA();
  const Target target{Device::CUDA, DType::F32};
  for (const OpCase& c : testing::op_cases(false)) {
    if (!c.backward || !op_supported(c.op, target.device, target.dtype)) continue;
    std::vector<std::vector<float>> w, prefill;
    gradients_for(c, 300, w, prefill);
    std::vector<std::vector<float>> x = testing::values_of(c);
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
        if (!(std::fabs(numeric - got) <= max_err)) max_err = std::fabs(numeric - got), worst = e;
      }
      EXPECT_GT(max_grad, 0.0) << c.name << " d" << c.in[i].name << ": no gradient at all";
      EXPECT_LE(max_err, 3e-3 * std::max(1.0, max_grad))
          << c.name << " d" << c.in[i].name << ": worst element " << worst << " of " << x[i].size();
    }
  }
}

// bf16 and f16 runs differ from the CUDA fp32 run by more than fp32 rounding could explain: low precision is real.
TEST(OpCasesCuda, LowPrecisionDiffersFromF32) {
  SKIP_WITHOUT_CUDA();
  const Target reference{Device::CUDA, DType::F32};
  for (DType dtype : {DType::BF16, DType::F16}) {
    const Target target{Device::CUDA, dtype};
    int cases = 0;
    for (const OpCase& c : testing::op_cases(false)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      gradients_for(c, 700, dout, prefill);
      const Result want = execute(c, reference, testing::values_of(c), &dout, &prefill);
      const Result got = execute(c, target, testing::values_of(c), &dout, &prefill);
      double worst = 0;
      auto compare = [&](const std::vector<float>& g, const std::vector<float>& w) {
        double scale = 1e-30, diff = 0;
        for (size_t e = 0; e < w.size(); e++)
          scale = std::max(scale, (double)std::fabs(w[e])), diff = std::max(diff, (double)std::fabs(g[e] - w[e]));
        worst = std::max(worst, diff / std::max(1.0, scale));
      };
      for (size_t j = 0; j < want.out.size(); j++) compare(got.out[j], want.out[j]);
      for (size_t i = 0; i < want.din.size(); i++) compare(got.din[i], want.din[i]);
      EXPECT_GT(worst, testing::least_difference(dtype)) << target.name() << " " << c.name << " equals fp32";
      cases++;
    }
    EXPECT_GE(cases, 20) << target.name() << " implements every case";
  }
}

// The same inputs twice give the same bits: no races, no float atomics, no order that depends on scheduling.
TEST(OpCasesCuda, RunTwiceBitIdentical) {
  SKIP_WITHOUT_CUDA();
  for (const Target& target : cuda_targets())
    for (const OpCase& c : testing::op_cases(true)) {
      if (!op_supported(c.op, target.device, target.dtype)) continue;
      std::vector<std::vector<float>> dout, prefill;
      gradients_for(c, 500, dout, prefill);
      const Result one = execute(c, target, testing::values_of(c), &dout, &prefill);
      const Result two = execute(c, target, testing::values_of(c), &dout, &prefill);
      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      };
      for (size_t j = 0; j < one.out.size(); j++) EXPECT_TRUE(same(one.out[j], two.out[j])) << target.name() << " " << c.name;
      for (size_t i = 0; i < one.din.size(); i++)
        EXPECT_TRUE(same(one.din[i], two.din[i])) << target.name() << " " << c.name << " d" << c.in[i].name;
    }
}

// Dropout on CUDA keeps exactly the elements the reference generator keeps (the CPU's decisions), scaled by
// 1/(1−p) in float, over sizes that are not a multiple of the Philox block and a stream above 2^32.
TEST(OpCasesCuda, DropoutKeepsTheReferenceDecisions) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend_for(Device::CUDA);
  const int64_t n = 100003;
  std::vector<float> ones((size_t)n);
  for (int64_t i = 0; i < n; i++) ones[(size_t)i] = 1.0f + (float)(i % 5);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (float p : {0.1f, 0.5f}) {
      const DropoutKey key{p, 0x0123456789abcdefull, 0xfedcba9876543210ull};
      Buffer in = testing::upload(be, dtype, ones), out(be, dtype, (size_t)n);
      dropout_forward(out.view({n}), in.view({n}), key);
      const std::vector<float> got = testing::download(be, out), x = testing::download(be, in);
      size_t bad = 0;
      for (int64_t i = 0; i < n; i++) {
        const bool keep = testing::reference_keep(p, key.seed, key.stream, (uint64_t)i);
        const float want = keep ? x[(size_t)i] * (1.0f / (1.0f - p)) : 0.0f;
        const float rounded = dtype == DType::F32    ? want
                              : dtype == DType::BF16 ? testing::from_bf16(testing::to_bf16(want))
                                                     : testing::from_f16(testing::to_f16(want));
        if (got[(size_t)i] != rounded && bad++ < 5)
          ADD_FAILURE() << dtype_name(dtype) << " p " << p << " element " << i << ": " << got[(size_t)i] << ", want "
                        << rounded;
      }
      EXPECT_EQ(bad, 0u) << dtype_name(dtype) << " p " << p;
    }
}

// The cross-entropy pieces the op cases do not cover (their case checks row_max + sumexp only): on GPT-2-wide rows
// in every dtype, the one-pass statistics equal the two passes bit for bit, lse from them is within fp32 accuracy of
// double precision on the same (rounded) logits, and the backward written in place over the logits is the exact
// gradient within one rounding of the dtype — the target column, a target in another shard and a masked row
// (dloss 0) included.
TEST(CrossEntropyCuda, WideRowsStatsAndInPlaceBackwardMatchDouble) {
  SKIP_WITHOUT_CUDA();
  Backend& be = backend_for(Device::CUDA);
  const int64_t N = 4, V = 50304, col_offset = 100;
  std::vector<float> host = noise((size_t)(N * V), 21);
  for (auto& x : host) x *= 4.0f;
  const std::vector<int32_t> targets = {100, 50403, 7, 12345};  // column 0, the last column, another shard
  const std::vector<float> dloss = {0.25f, 0.25f, 0.25f, 0.0f};
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    Buffer logits = testing::upload(be, dtype, host);
    const std::vector<float> exact = testing::download(be, logits);  // the rounded values the kernels see
    Buffer tg(be, DType::I32, N), dl = testing::upload(be, DType::F32, dloss);
    be.copy_to_device(tg.data(), targets.data(), targets.size() * 4);
    Buffer m1(be, DType::F32, N), s1(be, DType::F32, N), t1(be, DType::F32, N);
    Buffer m2(be, DType::F32, N), s2(be, DType::F32, N), t2(be, DType::F32, N);
    crossentropy_row_max(m1.view({N}), logits.view({N, V}));
    crossentropy_sumexp(s1.view({N}), t1.view({N}), logits.view({N, V}), m1.view({N}), tg.view({N}), col_offset);
    crossentropy_stats(m2.view({N}), s2.view({N}), t2.view({N}), logits.view({N, V}), tg.view({N}), col_offset);
    const std::vector<float> mx1 = testing::download(be, m1), se1 = testing::download(be, s1),
                             tl1 = testing::download(be, t1), mx2 = testing::download(be, m2),
                             se2 = testing::download(be, s2), tl2 = testing::download(be, t2);
    EXPECT_EQ(0, std::memcmp(mx1.data(), mx2.data(), N * 4)) << dtype_name(dtype);
    EXPECT_EQ(0, std::memcmp(se1.data(), se2.data(), N * 4)) << dtype_name(dtype);
    EXPECT_EQ(0, std::memcmp(tl1.data(), tl2.data(), N * 4)) << dtype_name(dtype);
    std::vector<float> lse((size_t)N);
    for (int64_t n = 0; n < N; n++) {
      double mx = -1e30, sum = 0;
      for (int64_t v = 0; v < V; v++) mx = std::max(mx, (double)exact[(size_t)(n * V + v)]);
      for (int64_t v = 0; v < V; v++) sum += std::exp(exact[(size_t)(n * V + v)] - mx);
      const double ref = mx + std::log(sum);
      EXPECT_EQ(mx1[(size_t)n], (float)mx) << dtype_name(dtype) << " row " << n;
      EXPECT_NEAR(mx1[(size_t)n] + std::log((double)se1[(size_t)n]), ref, 2e-6 * std::fabs(ref)) << dtype_name(dtype);
      const int64_t t = targets[(size_t)n] - col_offset;
      EXPECT_EQ(tl1[(size_t)n], t >= 0 && t < V ? exact[(size_t)(n * V + t)] : 0.0f) << dtype_name(dtype) << " row " << n;
      lse[(size_t)n] = (float)ref;
    }
    Buffer ls = testing::upload(be, DType::F32, lse);
    crossentropy_backward(logits.view({N, V}), logits.view({N, V}), ls.view({N}), tg.view({N}), dl.view({N}),
                          col_offset);
    const std::vector<float> got = testing::download(be, logits);
    // one rounding of the dtype (2^-8 bf16, 2^-11 f16 relative, f16's subnormal spacing 2^-24 absolute), or fp32's
    // exp and product (1e-5 relative)
    const double rel = dtype == DType::BF16 ? std::ldexp(1.0, -8) : dtype == DType::F16 ? std::ldexp(1.0, -11) : 1e-5;
    const double abs = dtype == DType::F16 ? std::ldexp(1.0, -24) : 1e-30;
    size_t bad = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t v = 0; v < V; v++) {
        const double p = std::exp((double)exact[(size_t)(n * V + v)] - (double)lse[(size_t)n]);
        const double want = dloss[(size_t)n] * (p - (v + col_offset == targets[(size_t)n] ? 1.0 : 0.0));
        const double g = got[(size_t)(n * V + v)];
        if (!(std::fabs(g - want) <= std::fabs(want) * rel + abs) && bad++ < 5)
          ADD_FAILURE() << dtype_name(dtype) << " dlogits[" << n << "," << v << "] = " << g << ", want " << want;
      }
    EXPECT_EQ(bad, 0u) << dtype_name(dtype);
    EXPECT_LT(got[0], 0.0f) << "the target column carries −dloss";
  }
}

// The multi-tensor forms on the GPU (one launch over every run): bit for bit the single-tensor CUDA ops run by run,
// and the element-wise results bit for bit the CPU's (LAMB's sums in the GPU's fixed order: to rounding).
TEST(CudaMultiTensor, AdamwEqualsPerTensorAndCpuBitwise) {
  SKIP_WITHOUT_CUDA();
  testing::check_adamw_multi(Device::CUDA);
}
TEST(CudaMultiTensor, SgdEqualsPerTensorAndCpuBitwise) {
  SKIP_WITHOUT_CUDA();
  testing::check_sgd_multi(Device::CUDA);
}
TEST(CudaMultiTensor, LambPhasesAndDeviceStepEqualPerTensorBitwise) {
  SKIP_WITHOUT_CUDA();
  testing::check_lamb_multi(Device::CUDA);
}
TEST(CudaMultiTensor, ScaleAndSumSquaresEqualPerTensorBitwise) {
  SKIP_WITHOUT_CUDA();
  testing::check_scale_and_sum_squares_multi(Device::CUDA);
}

}  // namespace
}  // namespace lmforge::kernels
