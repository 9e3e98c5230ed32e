// defines: the CPU GELU (tanh and erf; forward, backward) in fp32 and on bf16 / f16 storage, and its registration
#include <cmath>
#include <initializer_list>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

// ---- fp32 ---------------------------------------------------------------------------------------------------------

// The tanh GELU and its derivative per element, for the parallel loops and the serial ones below kParallelMin (the
// bf16 ops' 4096-element blocks): a parallel construct whose if clause is false still costs ~1 µs of team set-up.
#pragma omp declare simd
inline float gelu_tanh(float x) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + fast_tanh(u));
}
#pragma omp declare simd
inline float gelu_tanh_grad(float x, float d) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  const float th = fast_tanh(u);
  const float du = kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
  return d * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
}

// Φ(x) = (1 + erf(x/√2))/2, the standard normal CDF of the erf GELU x·Φ(x), in code that vectorises (glibc's erff
// is a scalar call per element; ELECTRA's encoders and the BERT heads use this GELU). With z = x/√2:
//   |z| < 1:      erf(z) = z·P(z²), P of degree 6 fitted to erf(z)/z (relative error 1.7e-7 in float arithmetic);
//   1 ≤ |z| < 4:  erfc(|z|) = e^{−z²}·Q(|z| − 2.5), Q of degree 11 fitted to erfc(t)·e^{t²} on [1, 4] (relative
//                 1.9e-7), e^{−z²} from the exactly split z² = s + e (fma) as e^{−s}·(1 − e);
//   |z| ≥ 4:      erfc(|z|) < 1.6e-8, below half a unit of 1: erf = ±1, as erff gives.
// Φ = 1 − erfc/2 above 0 and erfc/2 below, so the lower tail keeps its relative accuracy (1 + erf(z) would cancel).
// Largest error against erf in double over [−8, 8]: 1.4e-7 absolute in erf, 1.7e-6 relative in Φ's lower tail
// down to x = −5.6 (where x/√2 itself is rounded).
#pragma omp declare simd
inline float normal_cdf(float x) {
  const float z = x * kInvSqrt2;
  const float s = z * z;
  float p = 7.85466473e-05f;
  p = p * s - 8.01042304e-04f;
  p = p * s + 5.18835196e-03f;
  p = p * s - 2.68538240e-02f;
  p = p * s + 1.12835854e-01f;
  p = p * s - 3.76126260e-01f;
  p = p * s + 1.12837911e+00f;
  const float near = 0.5f + 0.5f * (z * p);
  const float a = std::fabs(z), t = pick(a < 4.0f, a, 4.0f);
  const float t2 = t * t, e = std::fma(t, t, -t2);
  const float u = t - 2.5f;
  float q = -3.97106106e-07f;
  q = q * u + 1.66426616e-06f;
  q = q * u - 3.92726724e-06f;
  q = q * u + 1.43955986e-05f;
  q = q * u - 5.91228927e-05f;
  q = q * u + 2.12890591e-04f;
  q = q * u - 7.33541150e-04f;
  q = q * u + 2.46604672e-03f;
  q = q * u - 8.00154079e-03f;
  q = q * u + 2.49381866e-02f;
  q = q * u - 7.43473545e-02f;
  q = q * u + 2.10806355e-01f;
  const float half_erfc = pick(t < 4.0f, 0.5f * fast_exp(-t2) * (1.0f - e) * q, 0.0f);
  const float far = pick(z > 0.0f, 1.0f - half_erfc, half_erfc);
  return pick(a < 1.0f, near, far);
}

// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = e^{−x²/2}/√(2π).
#pragma omp declare simd
inline float gelu_erf_grad(float x, float d) {
  return d * (normal_cdf(x) + x * fast_exp(-0.5f * x * x) * kInvSqrt2Pi);
}

// body(i) for every i < n, vectorised, and over the OpenMP team from kParallelMin elements on (below that, starting
// the team costs more than the loop).
template <class Body>
inline void each_element(size_t n, Body body) {
  if (n < kParallelMin) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) body(i);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; i++) body(i);
}

void gelu_forward_n(float* out, const float* inp, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH)
    each_element(n, [=](size_t i) { out[i] = gelu_tanh(inp[i]); });
  else
    each_element(n, [=](size_t i) { out[i] = inp[i] * normal_cdf(inp[i]); });
}

void gelu_backward_n(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH)
    each_element(n, [=](size_t i) { dinp[i] += gelu_tanh_grad(inp[i], dout[i]); });
  else
    each_element(n, [=](size_t i) { dinp[i] += gelu_erf_grad(inp[i], dout[i]); });
}

void gelu_forward_f32(const Tensor& out, const Tensor& inp, GeluKind kind) {
  const AsF32 x(inp, AsF32::IN), o(out, AsF32::OUT);
  gelu_forward_n(o, x, (size_t)out.numel(), kind);
}

void gelu_backward_f32(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  const AsF32 dx(dinp, AsF32::INOUT), x(inp, AsF32::IN), d(dout, AsF32::IN);
  gelu_backward_n(dx, x, d, (size_t)dinp.numel(), kind);
}

// ---- bf16 storage -------------------------------------------------------------------------------------------------

// bf16 operands converted in the loop itself, one pass: widening a bf16 is a shift and rounding a few integer
// operations, so they vectorise with the GELU around them. The block form below (convert into L1 scratch, compute,
// round back) makes three extra passes over each block, and the GELU is compute-bound on these CPUs, so the passes
// cost: the twelve [512, 3072] backward calls of a GPT-2 124M step took 15.4 ms on one Zen 5 core that way, 12.3
// fused, fp32 7.4 (2 threads: 8.1, 6.3 and 4.5 ms). The same fp32 arithmetic per element as the block form.
bool all_bf16(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->dtype != DType::BF16) return false;
  return true;
}

void gelu_forward_bf16(uint16_t* out, const uint16_t* inp, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH)
    each_element(n, [=](size_t i) { out[i] = f32_to_bf16(gelu_tanh(bf16_to_f32(inp[i]))); });
  else
    each_element(n, [=](size_t i) {
      const float x = bf16_to_f32(inp[i]);
      out[i] = f32_to_bf16(x * normal_cdf(x));
    });
}

void gelu_backward_bf16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH)
    each_element(n, [=](size_t i) {
      dinp[i] = f32_to_bf16(bf16_to_f32(dinp[i]) + gelu_tanh_grad(bf16_to_f32(inp[i]), bf16_to_f32(dout[i])));
    });
  else
    each_element(n, [=](size_t i) {
      dinp[i] = f32_to_bf16(bf16_to_f32(dinp[i]) + gelu_erf_grad(bf16_to_f32(inp[i]), bf16_to_f32(dout[i])));
    });
}

// ---- f16 storage (and mixed dtypes) -------------------------------------------------------------------------------

void gelu_forward_lowp(const Tensor& out, const Tensor& inp, GeluKind kind) {
  if (!out.contiguous() || !inp.contiguous()) kernel_error(Op::GELU, "strided operand");
  if (all_bf16({&out, &inp}))
    return gelu_forward_bf16(static_cast<uint16_t*>(out.data), static_cast<const uint16_t*>(inp.data),
                             (size_t)out.numel(), kind);
  const Ref o(out), x(inp);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = o.target(0, off, s + kLowpBlock);
    gelu_forward_n(r, x.load(0, off, n, s), (size_t)n, kind);  // a block is below the kernel's parallel threshold
    o.store(0, off, n, r);
  });
}

void gelu_backward_lowp(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  if (!dinp.contiguous() || !inp.contiguous() || !dout.contiguous()) kernel_error(Op::GELU, "strided operand");
  if (all_bf16({&dinp, &inp, &dout}))
    return gelu_backward_bf16(static_cast<uint16_t*>(dinp.data), static_cast<const uint16_t*>(inp.data),
                              static_cast<const uint16_t*>(dout.data), (size_t)dinp.numel(), kind);
  const Ref dx(dinp), x(inp), d(dout);
  for_blocks(dinp.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = dx.load(0, off, n, s + 2 * kLowpBlock);
    gelu_backward_n(r, x.load(0, off, n, s), d.load(0, off, n, s + kLowpBlock), (size_t)n, kind);
    dx.store(0, off, n, r);
  });
}

}  // namespace

void register_gelu(KernelTable& t) {
  t.add<Kernel::GELU_FORWARD>(Device::CPU, DType::F32, gelu_forward_f32);
  t.add<Kernel::GELU_BACKWARD>(Device::CPU, DType::F32, gelu_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::GELU_FORWARD>(Device::CPU, lowp, gelu_forward_lowp);
    t.add<Kernel::GELU_BACKWARD>(Device::CPU, lowp, gelu_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
