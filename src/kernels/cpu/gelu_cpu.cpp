// defines: the CPU GELU (tanh and erf; forward, backward) in fp32 and on bf16 / f16 storage, and its registration
#include <cmath>

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

void gelu_forward_n(float* out, const float* inp, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH) {
    if (n < kParallelMin) {
#pragma omp simd
      for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(inp[i]);
      return;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gelu_tanh(inp[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
  }
}

void gelu_backward_n(float* dinp, const float* inp, const float* dout, size_t n, GeluKind kind) {
  if (kind == GeluKind::TANH) {
    if (n < kParallelMin) {
#pragma omp simd
      for (size_t i = 0; i < n; i++) dinp[i] += gelu_tanh_grad(inp[i], dout[i]);
      return;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] += gelu_tanh_grad(inp[i], dout[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (size_t i = 0; i < n; i++) {
    const float x = inp[i];
    dinp[i] += dout[i] * (0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * fast_exp(-0.5f * x * x) * kInvSqrt2Pi);
  }
}

void gelu_forward_f32(const Tensor& out, const Tensor& inp, GeluKind kind) {
  const AsF32 x(inp, AsF32::IN), o(out, AsF32::OUT);
  gelu_forward_n(o, x, (size_t)out.numel(), kind);
}

void gelu_backward_f32(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  const AsF32 dx(dinp, AsF32::INOUT), x(inp, AsF32::IN), d(dout, AsF32::IN);
  gelu_backward_n(dx, x, d, (size_t)dinp.numel(), kind);
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

void gelu_forward_lowp(const Tensor& out, const Tensor& inp, GeluKind kind) {
  if (!out.contiguous() || !inp.contiguous()) kernel_error(Op::GELU, "strided operand");
  const Ref o(out), x(inp);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    float* r = o.target(0, off, s + kLowpBlock);
    gelu_forward_n(r, x.load(0, off, n, s), (size_t)n, kind);  // a block is below the kernel's parallel threshold
    o.store(0, off, n, r);
  });
}

void gelu_backward_lowp(const Tensor& dinp, const Tensor& inp, const Tensor& dout, GeluKind kind) {
  if (!dinp.contiguous() || !inp.contiguous() || !dout.contiguous()) kernel_error(Op::GELU, "strided operand");
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
