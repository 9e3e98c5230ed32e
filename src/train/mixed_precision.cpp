// defines: mixed-precision option checks, the log line, LossScaler, round_to_f16_storage()
#include "train/mixed_precision.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::train {

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

std::string precision_summary(const MixedPrecisionOptions& o, bool bf16_gemm_native) {
  if (o.bf16)
    return std::string("precision: bf16 — weights: fp32 master copy, bf16 working copy; activations and their "
                       "gradients: bf16; matrix products: bf16 inputs, fp32 accumulation (") +
           (bf16_gemm_native ? "oneDNN on AVX512-BF16" : "no AVX512-BF16 on this CPU: bf16-rounded inputs multiplied "
                                                         "in fp32") +
           "); logits: bf16 (as Megatron's), their softmax and cross-entropy computed in fp32; LayerNorm "
           "statistics: fp32; parameter gradients, data-parallel "
           "reductions and optimizer state: fp32\n";
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

LossScaler::LossScaler(const MixedPrecisionOptions& o) {
  active_ = o.fp16;
  if (!active_) return;
  dynamic_ = o.loss_scale <= 0.0;
  scale_ = dynamic_ ? o.initial_loss_scale : o.loss_scale;
  min_scale_ = o.min_loss_scale;
  window_ = o.loss_scale_window;
  hysteresis_ = hysteresis_tracker_ = o.hysteresis;
}

void LossScaler::update(bool found_inf) {
  if (!active_ || !dynamic_) return;
  if (found_inf) {
    growth_tracker_ = 0;
    hysteresis_tracker_--;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * 0.5, min_scale_);
    return;
  }
  growth_tracker_++;
  if (growth_tracker_ == window_) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = hysteresis_;
    scale_ *= 2.0;
  }
}

std::string LossScaler::save() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g %d %d", scale_, growth_tracker_, hysteresis_tracker_);
  return buf;
}

void LossScaler::load(const std::string& text) {
  std::istringstream in(text);
  double scale = 0;
  int growth = 0, hysteresis = 0;
  if (!(in >> scale >> growth >> hysteresis) || !(scale > 0.0))
    throw Error("grad scaler state \"" + text + "\" is not \"scale growth_tracker hysteresis_tracker\"");
  if (!active_) return;
  if (!dynamic_) return;  // a static --loss-scale wins, as Megatron's ConstantGradScaler ignores the saved state
  scale_ = scale;
  growth_tracker_ = growth;
  hysteresis_tracker_ = hysteresis;
}

void round_to_f16_storage(float* g, size_t n) {
  kernels::Backend& be = kernels::cpu_backend();
  const size_t chunk = size_t(1) << 22;
  kernels::Buffer half(be, kernels::DType::F16, std::min(n, chunk));
  for (size_t at = 0; at < n; at += chunk) {
    const int64_t len = (int64_t)std::min(chunk, n - at);
    const kernels::Tensor h = kernels::make_view(half.data(), kernels::DType::F16, {len});
    const kernels::Tensor f = kernels::make_view(g + at, {len});
    kernels::copy(h, f);
    kernels::copy(f, h);
  }
}

}  // namespace lmforge::train
