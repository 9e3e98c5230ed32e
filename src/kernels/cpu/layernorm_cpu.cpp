// defines: the CPU layer normalisation (forward, backward) in fp32 and on bf16 / f16 storage, and its registration
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

// One row (no threading; for callers that already split the rows).
void layernorm_forward_row(float* y, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                           int C, float eps) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int c = 0; c < C; c++) s += x[c];
  const float m = s / C;
  // Two passes (mean, then squared deviations) rather than E[x²]-E[x]², which cancels badly.
  float v = 0.0f;
#pragma omp simd reduction(+ : v)
  for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
  const float r = 1.0f / std::sqrt(v / C + eps);
#pragma omp simd
  for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
  *mean = m;
  *rstd = r;
}

void layernorm_forward_rows(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                            const float* bias, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= kParallelMin)
  for (int n = 0; n < N; n++)
    layernorm_forward_row(out + (size_t)n * C, mean + n, rstd + n, inp + (size_t)n * C, weight, bias, C, eps);
}

void layernorm_backward_rows(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const float* weight, const float* mean, const float* rstd, int N, int C) {
  // dweight and dbias sum over all rows: each thread sums its (static) rows privately, then the partials are added
  // in thread order, so a run gives the same bits every time (adding them under a lock in arrival order did not).
  const int threads = (size_t)N * C >= kParallelMin ? omp_get_max_threads() : 1;
  std::vector<float> partial((size_t)threads * 2 * C, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    float* dwp = partial.data() + (size_t)omp_get_thread_num() * 2 * C;
    float* dbp = dwp + C;
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
      const float* x = inp + (size_t)n * C;
      const float* d = dout + (size_t)n * C;
      float* dx = dinp + (size_t)n * C;
      const float m = mean[n], r = rstd[n];
      float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int c = 0; c < C; c++) {
        const float g = d[c] * weight[c];
        g_mean += g;
        gx_mean += g * (x[c] - m) * r;
      }
      g_mean /= C;
      gx_mean /= C;
#pragma omp simd
      for (int c = 0; c < C; c++) {
        const float xhat = (x[c] - m) * r;
        dbp[c] += d[c];
        dwp[c] += d[c] * xhat;
        dx[c] += r * (d[c] * weight[c] - g_mean - xhat * gx_mean);
      }
    }
  }
  for (int t = 0; t < threads; t++)
    for (int c = 0; c < C; c++) {
      dweight[c] += partial[((size_t)t * 2) * C + c];
      dbias[c] += partial[((size_t)t * 2 + 1) * C + c];
    }
}

void layernorm_forward_f32(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& inp,
                           const Tensor& weight, const Tensor& bias, float eps) {
  const AsF32 o(out, AsF32::OUT), mu(mean, AsF32::OUT), rs(rstd, AsF32::OUT), x(inp, AsF32::IN), w(weight, AsF32::IN),
      b(bias, AsF32::IN);
  layernorm_forward_rows(o, mu, rs, x, w, b, (int)inp.rows(), (int)inp.dim(-1), eps);
}

void layernorm_backward_f32(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                            const Tensor& inp, const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const AsF32 dx(dinp, AsF32::INOUT), dw(dweight, AsF32::INOUT), db(dbias, AsF32::INOUT), d(dout, AsF32::IN),
      x(inp, AsF32::IN), w(weight, AsF32::IN), mu(mean, AsF32::IN), rs(rstd, AsF32::IN);
  layernorm_backward_rows(dx, dw, db, d, x, w, mu, rs, (int)inp.rows(), (int)inp.dim(-1));
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

void layernorm_forward_lowp(const Tensor& out, const Tensor& mean_, const Tensor& rstd_, const Tensor& inp,
                            const Tensor& weight, const Tensor& bias, float eps) {
  if (!inp.contiguous() || !out.contiguous()) kernel_error(Op::LAYERNORM, "strided operand");
  float* mean = mean_.f32();
  float* rstd = rstd_.f32();
  const Ref o(out), x(inp);
  const int64_t N = inp.rows(), C = inp.dim(-1);
  const std::vector<float> w = small_f32(weight), b = small_f32(bias);
  for_rows(N, C, (size_t)(2 * C), [&](int64_t n, float* s) {
    float* y = o.target(n, 0, s + C);
    layernorm_forward_row(y, mean + n, rstd + n, x.load(n, 0, C, s), w.data(), b.data(), (int)C, eps);
    o.store(n, 0, C, y);
  });
}

// The fp32 kernel's math per row (ops.h); dweight and dbias summed per thread in fp32, then added in thread order.
void layernorm_backward_lowp(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                             const Tensor& inp, const Tensor& weight, const Tensor& mean_, const Tensor& rstd_) {
  if (!inp.contiguous() || !dout.contiguous() || !dinp.contiguous()) kernel_error(Op::LAYERNORM, "strided operand");
  const float* mean = mean_.f32();
  const float* rstd = rstd_.f32();
  const Ref dx(dinp), d(dout), x(inp), dw(dweight), db(dbias);
  const int64_t N = inp.rows(), C = inp.dim(-1);
  const std::vector<float> w = small_f32(weight);
  const int threads = (size_t)(N * C) >= kParallelMin ? omp_get_max_threads() : 1;
  std::vector<float> partial((size_t)threads * 2 * C, 0.0f);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> scratch((size_t)(3 * C));
    float* dwp = partial.data() + (size_t)omp_get_thread_num() * 2 * C;
    float* dbp = dwp + C;
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* xs = x.load(n, 0, C, scratch.data());
      const float* g = d.load(n, 0, C, scratch.data() + C);
      float* dxs = dx.load(n, 0, C, scratch.data() + 2 * C);
      const float m = mean[n], r = rstd[n];
      float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
      for (int64_t c = 0; c < C; c++) {
        const float gw = g[c] * w[(size_t)c];
        g_mean += gw;
        gx_mean += gw * (xs[c] - m) * r;
      }
      g_mean /= (float)C;
      gx_mean /= (float)C;
#pragma omp simd
      for (int64_t c = 0; c < C; c++) {
        const float xhat = (xs[c] - m) * r;
        dbp[c] += g[c];
        dwp[c] += g[c] * xhat;
        dxs[c] += r * (g[c] * w[(size_t)c] - g_mean - xhat * gx_mean);
      }
      dx.store(n, 0, C, dxs);
    }
  }
  std::vector<float> sw((size_t)C), sb((size_t)C);
  float* a = dw.load(0, 0, C, sw.data());
  float* bb = db.load(0, 0, C, sb.data());
  for (int t = 0; t < threads; t++)
    for (int64_t c = 0; c < C; c++) {
      a[c] += partial[((size_t)t * 2) * C + c];
      bb[c] += partial[((size_t)t * 2 + 1) * C + c];
    }
  dw.store(0, 0, C, a);
  db.store(0, 0, C, bb);
}

}  // namespace

void register_layernorm(KernelTable& t) {
  t.add<Kernel::LAYERNORM_FORWARD>(Device::CPU, DType::F32, layernorm_forward_f32);
  t.add<Kernel::LAYERNORM_BACKWARD>(Device::CPU, DType::F32, layernorm_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::LAYERNORM_FORWARD>(Device::CPU, lowp, layernorm_forward_lowp);
    t.add<Kernel::LAYERNORM_BACKWARD>(Device::CPU, lowp, layernorm_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
