// defines: the CPU bf16 linear layer: bf16 operands, fp32 accumulation in oneDNN's matmul (AVX512-BF16), outputs
//          and activation gradients in bf16 or fp32, weight and bias gradients accumulated in their own dtype
//          (fp32 for a model's fp32 main gradients)
#include <memory>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/lowp.h"

namespace lmforge::kernels::cpu {
namespace {

// An operand as bf16: a BF16 view as it is, an F32 one rounded into a temporary (what storing it in bf16 would
// have given). Contiguous operands only (ops.cpp checks linear's).
class AsBF16 {
 public:
  explicit AsBF16(const Tensor& t) {
    if (t.dtype == DType::BF16) {
      p_ = static_cast<const uint16_t*>(t.data);
      return;
    }
    const size_t n = (size_t)t.numel();
    temp_.reset(new uint16_t[n > 0 ? n : 1]);
    const float* src = static_cast<const float*>(t.data);
    uint16_t* dst = temp_.get();
#pragma omp parallel for simd schedule(static) if (parallel : n >= kParallelMin * 4)
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
    p_ = dst;
  }
  const uint16_t* get() const { return p_; }

 private:
  const uint16_t* p_ = nullptr;
  std::unique_ptr<uint16_t[]> temp_;
};

}  // namespace

void linear_forward_bf16(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, int N,
                         int IC, int OC, WeightLayout layout) {
  const AsBF16 x(inp), w(weight);
  const AsF32 b(bias, AsF32::IN);
  // out[N,OC] = inp[N,IC]·W (IN_OUT: W [IC,OC]) or inp·Wᵀ (OUT_IN: W [OC,IC]), + b
  const bool in_out = layout == WeightLayout::IN_OUT;
  gemm_bf16(false, !in_out, N, OC, IC, x.get(), IC, w.get(), in_out ? OC : IC, false, out.data, out.dtype, OC, b);
}

void linear_backward_bf16(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                          const Tensor& inp, const Tensor& weight, int N, int IC, int OC, WeightLayout layout) {
  const AsBF16 dy(dout);
  const bool in_out = layout == WeightLayout::IN_OUT;
  if (dinp.present()) {
    // dinp[N,IC] += dout[N,OC]·Wᵀ (W [IC,OC]) or dout·W (W [OC,IC])
    const AsBF16 w(weight);
    gemm_bf16(false, in_out, N, IC, OC, dy.get(), OC, w.get(), in_out ? OC : IC, true, dinp.data, dinp.dtype, IC,
              nullptr);
  }
  if (dweight.present()) {
    const AsBF16 x(inp);
    if (in_out)  // dW[IC,OC] += inpᵀ·dout
      gemm_bf16(true, false, IC, OC, N, x.get(), IC, dy.get(), OC, true, dweight.data, dweight.dtype, OC, nullptr);
    else  // dW[OC,IC] += doutᵀ·inp
      gemm_bf16(true, false, OC, IC, N, dy.get(), OC, x.get(), IC, true, dweight.data, dweight.dtype, IC, nullptr);
  }
  if (dbias.present()) column_sums_lowp(dbias, dout.reshaped({N, OC}));
}

}  // namespace lmforge::kernels::cpu
