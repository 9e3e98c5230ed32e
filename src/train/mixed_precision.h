// defines: lmforge::train::MixedPrecisionOptions (Megatron's --fp16/--bf16 and loss-scaling flags),
//          validate_mixed_precision(), compute_dtype(), precision_summary(), bf16_gemm_description(),
//          loss_scale_options() (the flags as the grad scaler's settings, optim/grad_scaler.h)
#pragma once
#include <cstdint>
#include <string>

#include "kernels/tensor.h"
#include "optim/grad_scaler.h"

namespace lmforge::train {

// Megatron's names and defaults (megatron/training/arguments.py, _add_mixed_precision_args).
struct MixedPrecisionOptions {
  bool fp16 = false;                 // --fp16: fp16 working weights, activations and gradients, loss scaling
  bool bf16 = false;                 // --bf16: bf16 working weights and activations (scaled only by a --loss-scale)
  double loss_scale = 0.0;           // --loss-scale: a static scale (0: dynamic)
  double initial_loss_scale = 4294967296.0;  // --initial-loss-scale (2^32)
  double min_loss_scale = 1.0;       // --min-loss-scale
  int loss_scale_window = 1000;      // --loss-scale-window: clean iterations before the scale doubles
  int hysteresis = 2;                // --hysteresis: overflows tolerated before the scale halves
};

// Throws lmforge::Error naming the flag (--fp16 with --bf16, non-positive scales, ...).
void validate_mixed_precision(const MixedPrecisionOptions& o);
// The layers' compute/storage dtype: F16, BF16 or F32.
kernels::DType compute_dtype(const MixedPrecisionOptions& o);
// One log line naming the compute and storage dtypes of weights, activations, gradients and optimizer state; with
// --bf16 a second one, "bf16 matrix products: <bf16_gemm>", saying what runs them on the run's device and why
// (bf16_gemm_description()).
std::string precision_summary(const MixedPrecisionOptions& o, const std::string& bf16_gemm);
// "cuBLASLt on the GPU's tensor cores", or the CPU's path with its reason (kernels::bf16_gemm_cpu_path(): oneDNN's
// bf16 matmul, or fp32 products of widened bf16 operands where the CPU has no AVX512-BF16/AMX).
std::string bf16_gemm_description(kernels::Device device);

// The grad scaler's settings (optim/grad_scaler.h): enabled by --fp16, and by --bf16 with a static --loss-scale (as
// Megatron builds a ConstantGradScaler for it).
optim::LossScaleOptions loss_scale_options(const MixedPrecisionOptions& o);

}  // namespace lmforge::train
