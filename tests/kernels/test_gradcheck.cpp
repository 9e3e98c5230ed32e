// defines: finite-difference gradient checks of every CPU kernel in kernels/ops.h, plus value checks of the
// approximated transcendental functions (GELU's tanh, softmax's exp) against double-precision formulas
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"

namespace lmforge::kernels {
namespace {

using Vec = std::vector<float>;

Vec random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Checks backward against central differences of the scalar loss L = sum(out · w), w random.
// `forward` recomputes the output from the current inputs; `backward(dout, grads)` must ACCUMULATE into grads,
// which are pre-filled with random values here so that an overwrite (= instead of +=) fails the check.
// Kernels run in float32, so the step is large (1e-2; truncation error ~eps², rounding ~1e-7/eps) and the
// tolerance relative to the tensor's largest gradient; real bugs give errors of order one.
void gradcheck(const std::string& what, std::vector<Vec*> inputs, const std::function<Vec()>& forward,
               const std::function<void(const Vec&, std::vector<Vec>&)>& backward, float tol = 3e-3f) {
  std::mt19937 rng(1234);
  Vec out = forward();
  Vec w = random_vec(out.size(), rng);
  auto loss = [&]() {
    Vec o = forward();
    double s = 0.0;
    for (size_t i = 0; i < o.size(); i++) s += (double)o[i] * w[i];
    return s;
  };
  std::vector<Vec> grads, prefill;
  for (Vec* in : inputs) {
    prefill.push_back(random_vec(in->size(), rng));
    grads.push_back(prefill.back());
  }
  backward(w, grads);
  const float eps = 1e-2f;
  for (size_t k = 0; k < inputs.size(); k++) {
    Vec& x = *inputs[k];
    double max_grad = 0.0, max_err = 0.0;
    size_t worst = 0;
    for (size_t j = 0; j < x.size(); j++) {
      const float saved = x[j];
      x[j] = saved + eps;
      const double lp = loss();
      x[j] = saved - eps;
      const double lm = loss();
      x[j] = saved;
      const double numeric = (lp - lm) / (2.0 * eps);
      const double analytic = (double)grads[k][j] - prefill[k][j];
      max_grad = std::max(max_grad, std::fabs(numeric));
      if (std::fabs(numeric - analytic) > max_err) {
        max_err = std::fabs(numeric - analytic);
        worst = j;
      }
    }
    EXPECT_GT(max_grad, 0.0) << what << " input " << k << ": the check saw no gradient at all";
    EXPECT_LE(max_err, tol * std::max(1.0, max_grad))
        << what << " input " << k << ": worst element " << worst << " of " << x.size() << ", max |grad| "
        << max_grad;
  }
}

TEST(KernelGradcheck, Embedding) {
  std::mt19937 rng(1);
  const int B = 2, T = 5, C = 7, V = 6;
  std::vector<int32_t> tokens = {0, 3, 3, 5, 1, 3, 2, 0, 0, 4};  // repeats exercise the scatter-add
  Vec wte = random_vec((size_t)V * C, rng), wpe = random_vec((size_t)T * C, rng);
  gradcheck(
      "embedding", {&wte, &wpe},
      [&]() {
        Vec out((size_t)B * T * C);
        embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
        return out;
      },
      [&](const Vec& dout, std::vector<Vec>& g) {
        embedding_backward(g[0].data(), g[1].data(), dout.data(), tokens.data(), B, T, C);
      });
}

TEST(KernelGradcheck, Embedding_ValuesAreRowSums) {
  const int B = 1, T = 2, C = 3;
  std::vector<int32_t> tokens = {1, 0};
  Vec wte = {1, 2, 3, 4, 5, 6}, wpe = {10, 20, 30, 40, 50, 60}, out(6);
  embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
  EXPECT_EQ(out, (Vec{14, 25, 36, 41, 52, 63}));
}

TEST(KernelGradcheck, LayerNorm) {
  std::mt19937 rng(2);
  const int N = 6, C = 10;
  Vec inp = random_vec((size_t)N * C, rng, 2.0f), w = random_vec(C, rng), b = random_vec(C, rng);
  Vec mean(N), rstd(N);
  auto fwd = [&]() {
    Vec out((size_t)N * C);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C);
    return out;
  };
  gradcheck("layernorm", {&inp, &w, &b}, fwd, [&](const Vec& dout, std::vector<Vec>& g) {
    fwd();
    layernorm_backward(g[0].data(), g[1].data(), g[2].data(), dout.data(), inp.data(), w.data(), mean.data(),
                       rstd.data(), N, C);
  });
  // Forward value: biased variance and eps 1e-5, against a double-precision formula.
  Vec out = fwd();
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += inp[n * C + c];
    m /= C;
    for (int c = 0; c < C; c++) v += (inp[n * C + c] - m) * (inp[n * C + c] - m);
    v /= C;
    for (int c = 0; c < C; c++)
      EXPECT_NEAR(out[n * C + c], (inp[n * C + c] - m) / std::sqrt(v + 1e-5) * w[c] + b[c], 1e-5);
  }
}

void check_linear(WeightLayout layout, bool with_bias) {
  std::mt19937 rng(3);
  const int N = 5, IC = 7, OC = 4;
  Vec inp = random_vec((size_t)N * IC, rng), W = random_vec((size_t)IC * OC, rng), bias = random_vec(OC, rng);
  std::vector<Vec*> ins = {&inp, &W};
  if (with_bias) ins.push_back(&bias);
  auto fwd = [&]() {
    Vec out((size_t)N * OC);
    linear_forward(out.data(), inp.data(), W.data(), with_bias ? bias.data() : nullptr, N, IC, OC, layout);
    return out;
  };
  gradcheck(layout == WeightLayout::IN_OUT ? "linear in_out" : "linear out_in", ins, fwd,
            [&](const Vec& dout, std::vector<Vec>& g) {
              linear_backward(g[0].data(), g[1].data(), with_bias ? g[2].data() : nullptr, dout.data(), inp.data(),
                              W.data(), N, IC, OC, layout);
            });
  // Forward value against the layout's definition.
  Vec out = fwd();
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = with_bias ? bias[o] : 0.0;
      for (int i = 0; i < IC; i++)
        s += (double)inp[n * IC + i] * (layout == WeightLayout::IN_OUT ? W[i * OC + o] : W[o * IC + i]);
      EXPECT_NEAR(out[n * OC + o], s, 1e-5);
    }
}

TEST(KernelGradcheck, LinearInOut) { check_linear(WeightLayout::IN_OUT, true); }
TEST(KernelGradcheck, LinearOutIn) { check_linear(WeightLayout::OUT_IN, true); }
TEST(KernelGradcheck, LinearOutInNoBias) { check_linear(WeightLayout::OUT_IN, false); }

TEST(KernelGradcheck, Attention) {
  std::mt19937 rng(4);
  const int B = 2, T = 5, C = 8, NH = 2;
  Vec qkv = random_vec((size_t)B * T * 3 * C, rng);
  Vec att((size_t)B * NH * T * T);
  auto fwd = [&]() {
    Vec out((size_t)B * T * C);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return out;
  };
  gradcheck("attention", {&qkv}, fwd, [&](const Vec& dout, std::vector<Vec>& g) {
    fwd();
    attention_backward(g[0].data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
  });
  // Forward value against the textbook formula in double: causal mask, scale 1/sqrt(hs), heads as column blocks.
  Vec out = fwd();
  const int hs = C / NH;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        std::vector<double> p(t + 1);
        double mx = -1e30, sum = 0;
        for (int s = 0; s <= t; s++) {
          double d = 0;
          for (int i = 0; i < hs; i++)
            d += (double)qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + s) * 3 * C + C + h * hs + i];
          p[s] = d / std::sqrt((double)hs);
          mx = std::max(mx, p[s]);
        }
        for (int s = 0; s <= t; s++) sum += (p[s] = std::exp(p[s] - mx));
        for (int i = 0; i < hs; i++) {
          double o = 0;
          for (int s = 0; s <= t; s++) o += p[s] / sum * qkv[(b * T + s) * 3 * C + 2 * C + h * hs + i];
          EXPECT_NEAR(out[(b * T + t) * C + h * hs + i], o, 1e-5);
        }
      }
}

TEST(KernelGradcheck, Gelu) {
  std::mt19937 rng(5);
  const size_t n = 40;
  Vec x = random_vec(n, rng, 2.0f);
  x[0] = 0.0f;
  x[1] = -6.0f;
  x[2] = 6.0f;
  auto fwd = [&]() {
    Vec out(n);
    gelu_forward(out.data(), x.data(), n);
    return out;
  };
  gradcheck("gelu", {&x}, fwd,
            [&](const Vec& dout, std::vector<Vec>& g) { gelu_backward(g[0].data(), x.data(), dout.data(), n); });
  // The fast tanh against std::tanh in double over a dense range.
  Vec xs, ys(2001);
  for (int i = -1000; i <= 1000; i++) xs.push_back(i * 0.01f);
  gelu_forward(ys.data(), xs.data(), xs.size());
  for (size_t i = 0; i < xs.size(); i++) {
    const double v = xs[i];
    const double ref = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(ys[i], ref, 1e-6 * std::max(1.0, std::fabs(v))) << "x = " << v;
  }
}

TEST(KernelGradcheck, Residual) {
  std::mt19937 rng(6);
  const size_t n = 17;
  Vec a = random_vec(n, rng), b = random_vec(n, rng);
  gradcheck(
      "residual", {&a, &b},
      [&]() {
        Vec out(n);
        residual_forward(out.data(), a.data(), b.data(), n);
        return out;
      },
      [&](const Vec& dout, std::vector<Vec>& g) { residual_backward(g[0].data(), g[1].data(), dout.data(), n); });
}

TEST(KernelGradcheck, CrossEntropy) {
  std::mt19937 rng(7);
  const int N = 4, V = 9;
  const float dloss = 0.37f;
  std::vector<int32_t> targets = {0, 8, 3, 3};
  Vec logits = random_vec((size_t)N * V, rng, 2.0f), lse(N);
  auto fwd = [&]() {
    Vec losses(N);
    crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
    return losses;
  };
  // crossentropy_backward takes one dloss for all rows and writes (=), so the check uses w = dloss everywhere
  // and adds the result onto the pre-filled gradient itself.
  Vec out = fwd();
  std::mt19937 rng2(8);
  Vec prefill = random_vec(logits.size(), rng2);
  Vec d(logits.size());
  crossentropy_backward(d.data(), logits.data(), lse.data(), targets.data(), dloss, N, V);
  const float eps = 1e-2f;
  for (size_t j = 0; j < logits.size(); j++) {
    const float saved = logits[j];
    logits[j] = saved + eps;
    Vec p = fwd();
    logits[j] = saved - eps;
    Vec m = fwd();
    logits[j] = saved;
    double num = 0;
    for (int n = 0; n < N; n++) num += dloss * ((double)p[n] - m[n]) / (2.0 * eps);
    EXPECT_NEAR(d[j], num, 1e-3) << "element " << j;
  }
  // Values against double precision, and the in-place form giving the same gradient.
  for (int n = 0; n < N; n++) {
    double mx = -1e30, s = 0;
    for (int v = 0; v < V; v++) mx = std::max(mx, (double)logits[n * V + v]);
    for (int v = 0; v < V; v++) s += std::exp(logits[n * V + v] - mx);
    EXPECT_NEAR(out[n], mx + std::log(s) - logits[n * V + targets[n]], 1e-5);
  }
  fwd();
  Vec inplace = logits;
  crossentropy_backward(inplace.data(), inplace.data(), lse.data(), targets.data(), dloss, N, V);
  EXPECT_EQ(inplace, d);
}

TEST(KernelGradcheck, CrossEntropyWideRowsMatchDouble) {
  // A GPT-2-wide row (50304 columns) with spread-out logits: the vectorised exp and the reduction order must
  // stay within float32 accuracy of the double-precision log-sum-exp.
  std::mt19937 rng(9);
  const int N = 3, V = 50304;
  Vec logits = random_vec((size_t)N * V, rng, 4.0f), lse(N), losses(N);
  std::vector<int32_t> targets = {0, 50303, 12345};
  crossentropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V);
  for (int n = 0; n < N; n++) {
    double mx = -1e30, s = 0;
    for (int v = 0; v < V; v++) mx = std::max(mx, (double)logits[(size_t)n * V + v]);
    for (int v = 0; v < V; v++) s += std::exp(logits[(size_t)n * V + v] - mx);
    const double ref = mx + std::log(s);
    EXPECT_NEAR(lse[n], ref, 2e-6 * std::fabs(ref));
  }
}

// The gradient checks use shapes small enough to run on one thread; this runs every op at shapes above the
// parallel thresholds with 2 threads and with 1 and requires the same results (up to reduction order), which
// catches races in the split loops (scatter-adds, column sums, per-(b,h) attention ownership, GEMM blocks).
TEST(KernelParallel, TwoThreadsMatchOne) {
  std::mt19937 rng(10);
  const int B = 2, T = 64, C = 96, NH = 3, V = 1000, N = B * T;
  std::vector<int32_t> tokens(N);
  for (auto& t : tokens) t = (int32_t)(rng() % 50);  // many repeats
  const Vec wte = random_vec((size_t)V * C, rng), wpe = random_vec((size_t)T * C, rng);
  const Vec x = random_vec((size_t)N * C, rng), w = random_vec(C, rng), b = random_vec(C, rng);
  const Vec W = random_vec((size_t)C * 3 * C, rng), bias = random_vec(3 * C, rng);
  const Vec dC = random_vec((size_t)N * C, rng), d3C = random_vec((size_t)N * 3 * C, rng);
  const Vec logits_in = random_vec((size_t)N * V, rng);
  std::vector<int32_t> targets(N);
  for (auto& t : targets) t = (int32_t)(rng() % V);
  auto run_all = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<Vec> r;
    Vec out((size_t)N * C), dwte((size_t)V * C, 0.0f), dwpe((size_t)T * C, 0.0f);
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    embedding_backward(dwte.data(), dwpe.data(), dC.data(), tokens.data(), B, T, C);
    r.push_back(out), r.push_back(dwte), r.push_back(dwpe);
    Vec mean(N), rstd(N), dx((size_t)N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    layernorm_backward(dx.data(), dw.data(), db.data(), dC.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                       C);
    r.push_back(out), r.push_back(dx), r.push_back(dw), r.push_back(db);
    Vec qkv((size_t)N * 3 * C), dW(W.size(), 0.0f), dbias(3 * C, 0.0f);
    for (WeightLayout layout : {WeightLayout::IN_OUT, WeightLayout::OUT_IN}) {
      Vec dxl((size_t)N * C, 0.0f);
      linear_forward(qkv.data(), x.data(), W.data(), bias.data(), N, C, 3 * C, layout);
      linear_backward(dxl.data(), dW.data(), dbias.data(), d3C.data(), x.data(), W.data(), N, C, 3 * C, layout);
      r.push_back(qkv), r.push_back(dxl);
    }
    r.push_back(dW), r.push_back(dbias);
    Vec att((size_t)B * NH * T * T), y((size_t)N * C), dqkv((size_t)N * 3 * C, 0.0f);
    attention_forward(y.data(), att.data(), qkv.data(), B, T, C, NH);
    attention_backward(dqkv.data(), dC.data(), qkv.data(), att.data(), B, T, C, NH);
    r.push_back(y), r.push_back(att), r.push_back(dqkv);
    Vec g(qkv.size()), dg(qkv.size(), 0.0f), s(x.size()), da(x.size(), 0.0f), dbb(x.size(), 0.0f);
    gelu_forward(g.data(), qkv.data(), qkv.size());
    gelu_backward(dg.data(), qkv.data(), d3C.data(), qkv.size());
    residual_forward(s.data(), x.data(), dC.data(), x.size());
    residual_backward(da.data(), dbb.data(), dC.data(), x.size());
    r.push_back(g), r.push_back(dg), r.push_back(s), r.push_back(da), r.push_back(dbb);
    Vec losses(N), lse(N), dl((size_t)N * V);
    crossentropy_forward(losses.data(), lse.data(), logits_in.data(), targets.data(), N, V);
    crossentropy_backward(dl.data(), logits_in.data(), lse.data(), targets.data(), 1.0f / N, N, V);
    r.push_back(losses), r.push_back(dl);
    return r;
  };
  const int saved = omp_get_max_threads();
  const std::vector<Vec> one = run_all(1), two = run_all(2);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); i++) {
    double md = 0, mr = 0;
    for (size_t j = 0; j < one[i].size(); j++) {
      md = std::max(md, (double)std::fabs(one[i][j] - two[i][j]));
      mr = std::max(mr, (double)std::fabs(one[i][j]));
    }
    EXPECT_LE(md, 1e-5 * mr) << "result " << i;
  }
}

TEST(KernelBackend, CpuBackendAllocCopy) {
  Backend& be = cpu_backend();
  EXPECT_STREQ(be.name(), "cpu");
  EXPECT_FALSE(be.info().empty());
  const size_t n = 1000;
  float* p = be.alloc(n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  Vec host(n), back(n, -1.0f);
  for (size_t i = 0; i < n; i++) host[i] = (float)i;
  be.copy_to_device(p, host.data(), n);
  be.copy_to_host(back.data(), p, n);
  EXPECT_EQ(host, back);
  float* q = be.alloc(n);
  be.copy_on_device(q, p, n);
  be.copy_to_host(back.data(), q, n);
  EXPECT_EQ(host, back);
  be.free(q);
  be.fill_zero(p, n);
  be.synchronize();
  be.copy_to_host(back.data(), p, n);
  EXPECT_EQ(back, Vec(n, 0.0f));
  be.free(p);
}

}  // namespace
}  // namespace lmforge::kernels
