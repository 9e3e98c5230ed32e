// defines: the CPU tanh (forward, backward) in fp32, and its registration
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/dispatch.h"

namespace lmforge::kernels::cpu {
namespace {

// BERT's pooler applies it to B·hidden values per micro-batch: std::tanh (correctly rounded to a few ulp), no
// vectorised approximation needed.
void tanh_forward_f32(const Tensor& out, const Tensor& inp) {
  float* o = static_cast<float*>(out.data);
  const float* x = static_cast<const float*>(inp.data);
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= (int64_t)kParallelMin)
  for (int64_t i = 0; i < n; i++) o[i] = std::tanh(x[i]);
}

// d tanh(x)/dx = 1 − tanh(x)²
void tanh_backward_f32(const Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  float* dx = static_cast<float*>(dinp.data);
  const float* x = static_cast<const float*>(inp.data);
  const float* d = static_cast<const float*>(dout.data);
  const int64_t n = dinp.numel();
#pragma omp parallel for schedule(static) if (n >= (int64_t)kParallelMin)
  for (int64_t i = 0; i < n; i++) {
    const float t = std::tanh(x[i]);
    dx[i] += d[i] * (1.0f - t * t);
  }
}

}  // namespace

void register_tanh(KernelTable& t) {
  t.add<Kernel::TANH_FORWARD>(Device::CPU, DType::F32, tanh_forward_f32);
  t.add<Kernel::TANH_BACKWARD>(Device::CPU, DType::F32, tanh_backward_f32);
}

}  // namespace lmforge::kernels::cpu
