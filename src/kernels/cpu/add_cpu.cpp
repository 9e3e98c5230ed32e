// defines: the CPU elementwise add (forward; backward = accumulate the gradient into each operand's) in fp32 and on
//          bf16 / f16 storage, accumulate(), and the registration
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp_blocks.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {

void accumulate(float* dst, const float* src, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

namespace {

// ---- fp32 ---------------------------------------------------------------------------------------------------------

void add_n(float* out, const float* a, const float* b, size_t n) {
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void add_forward_f32(const Tensor& out, const Tensor& a, const Tensor& b) {
  const AsF32 x(a, AsF32::IN), y(b, AsF32::IN), o(out, AsF32::OUT);
  add_n(o, x, y, (size_t)out.numel());
}

void add_backward_f32(const Tensor& da, const Tensor& db, const Tensor& dout) {
  for (const Tensor* d : {&da, &db}) {
    if (!d->present()) continue;
    const AsF32 acc(*d, AsF32::INOUT), g(dout, AsF32::IN);
    accumulate(acc, g, (size_t)dout.numel());
  }
}

// ---- bf16 / f16 storage -------------------------------------------------------------------------------------------

void add_forward_lowp(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Ref o(out), x(a), y(b);
  for_blocks(out.numel(), [&](int64_t off, int64_t n, float* s) {
    const float* xa = x.load(0, off, n, s);
    const float* yb = y.load(0, off, n, s + kLowpBlock);
    float* r = o.target(0, off, s + 2 * kLowpBlock);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) r[i] = xa[i] + yb[i];
    o.store(0, off, n, r);
  });
}

void accumulate_lowp(const Tensor& dst, const Tensor& src) {
  const Ref o(dst), x(src);
  for_blocks(src.numel(), [&](int64_t off, int64_t n, float* s) {
    const float* g = x.load(0, off, n, s);
    float* r = o.load(0, off, n, s + kLowpBlock);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) r[i] += g[i];
    o.store(0, off, n, r);
  });
}

void add_backward_lowp(const Tensor& da, const Tensor& db, const Tensor& dout) {
  for (const Tensor* d : {&da, &db})
    if (d->present()) accumulate_lowp(*d, dout);
}

}  // namespace

void register_add(KernelTable& t) {
  t.add<Kernel::ADD_FORWARD>(Device::CPU, DType::F32, add_forward_f32);
  t.add<Kernel::ADD_BACKWARD>(Device::CPU, DType::F32, add_backward_f32);
  for (DType lowp : {DType::BF16, DType::F16}) {
    t.add<Kernel::ADD_FORWARD>(Device::CPU, lowp, add_forward_lowp);
    t.add<Kernel::ADD_BACKWARD>(Device::CPU, lowp, add_backward_lowp);
  }
}

}  // namespace lmforge::kernels::cpu
