// defines: mixed-precision option checks, the log line, loss_scale_options()
#include "train/mixed_precision.h"

#include <cmath>
#include <cstdio>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::train {
namespace {

std::string scale_text(double scale) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", scale);
  return text;
}

}  // namespace

void validate_mixed_precision(const MixedPrecisionOptions& o) {
  if (o.fp16 && o.bf16) throw Error("--fp16 and --bf16 exclude each other (Megatron: cannot use both)");
  if (o.loss_scale < 0.0 || !std::isfinite(o.loss_scale))
    throw Error("--loss-scale must be a positive number (or 0 for dynamic loss scaling)");
  if (!(o.initial_loss_scale > 0.0) || !std::isfinite(o.initial_loss_scale))
    throw Error("--initial-loss-scale must be a positive number");
  if (!(o.min_loss_scale > 0.0) || o.min_loss_scale > o.initial_loss_scale)
    throw Error("--min-loss-scale must be positive and at most --initial-loss-scale");
  if (o.loss_scale_window < 1) throw Error("--loss-scale-window must be >= 1");
  if (o.hysteresis < 1) throw Error("--hysteresis must be >= 1");
}

kernels::DType compute_dtype(const MixedPrecisionOptions& o) {
  return o.fp16 ? kernels::DType::F16 : o.bf16 ? kernels::DType::BF16 : kernels::DType::F32;
}

std::string bf16_gemm_description(kernels::Device device) {
  if (device == kernels::Device::CUDA) return "cuBLASLt on the GPU's tensor cores";
  return kernels::bf16_gemm_cpu_path();
}

std::string precision_summary(const MixedPrecisionOptions& o, const std::string& bf16_gemm) {
  if (o.bf16)
    return std::string("precision: bf16 — weights: fp32 master copy, bf16 working copy; activations and their "
                       "gradients: bf16; matrix products: bf16 inputs, fp32 accumulation; logits: bf16 (as "
                       "Megatron's), their softmax and cross-entropy computed in fp32; LayerNorm "
                       "statistics: fp32; parameter gradients, data-parallel "
                       "reductions and optimizer state: fp32") +
           (o.loss_scale > 0
                ? "; static loss scale " + scale_text(o.loss_scale) +
                      " (--loss-scale with --bf16: Megatron's ConstantGradScaler, the loss multiplied by it before the "
                      "backward and the gradients divided by it; an iteration whose gradients overflow is skipped)"
                : std::string()) +
           "\nbf16 matrix products: " + bf16_gemm + "\n";
  if (o.fp16) {
    char scale[160];
    if (o.loss_scale > 0) std::snprintf(scale, sizeof scale, "static loss scale %g", o.loss_scale);
    else
      std::snprintf(scale, sizeof scale, "dynamic loss scale from %g (min %g, window %d, hysteresis %d)",
                    o.initial_loss_scale, o.min_loss_scale, o.loss_scale_window, o.hysteresis);
    return std::string("precision: fp16 — weights: fp32 master copy, fp16 working copy; activations, their "
                       "gradients and the parameter gradients before unscaling: stored in fp16; arithmetic: fp32 on "
                       "the fp16-stored operands (matrix products: fp32 accumulation, as fp16 GEMMs on GPUs); logits: stored in fp16 (as "
                       "Megatron's without --fp16-lm-cross-entropy, which then takes them into fp32), softmax and "
                       "cross-entropy: fp32; LayerNorm statistics, unscaled gradients, reductions and optimizer state: "
                       "fp32; ") +
           scale + "\n";
  }
  return "precision: fp32 (weights, activations, gradients and optimizer state)\n";
}

optim::LossScaleOptions loss_scale_options(const MixedPrecisionOptions& o) {
  optim::LossScaleOptions s;
  // Megatron (get_megatron_optimizer): a --loss-scale makes a ConstantGradScaler for bf16 too; a dynamic scaler
  // only for fp16.
  s.enabled = o.fp16 || (o.bf16 && o.loss_scale > 0.0);
  s.loss_scale = o.loss_scale;
  s.initial_loss_scale = o.initial_loss_scale;
  s.min_loss_scale = o.min_loss_scale;
  s.loss_scale_window = o.loss_scale_window;
  s.hysteresis = o.hysteresis;
  return s;
}

}  // namespace lmforge::train
