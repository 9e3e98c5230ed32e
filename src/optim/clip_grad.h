// defines: lmforge::optim::sum_of_squares(), scale_in_place(), grad_sum_of_squares(), global_grad_norm(),
//          clip_coefficient(), clip_grad_norm(), scale_grads() — gradient clipping by global L2 norm
#pragma once
#include <cstddef>
#include <span>

#include "kernels/tensor.h"
#include "optim/optimizer.h"

namespace lmforge::optim {

// The two loops every gradient norm and clipping is made of (here for one process; parallel/grad_norm.h runs them
// over a rank's pieces and sums across data-, tensor- and pipeline-parallel ranks):
// Σ g² of a flat f32 device view, accumulated in double (each g² is exact in double, so only the order of the
// additions differs from a float64 reference): the kernel op kernels::sum_squares in its PARALLEL order, the
// result back on the host.
double sum_of_squares(const kernels::Tensor& g);
// g ← factor · g (the kernel op kernels::scale).
void scale_in_place(const kernels::Tensor& g, float factor);

// Σ g² over the spans (sum_of_squares of each, added in order).
double grad_sum_of_squares(std::span<const ParamSpan> params);
// Global L2 norm of all gradients (torch accumulates per tensor then takes the norm of the per-tensor
// norms; both agree to fp32 rounding).
double global_grad_norm(std::span<const ParamSpan> params);
// The factor clipping scales gradients by for a given norm: float(max_norm)/(float(norm) + 1e-6f) as torch
// forms it, or 1 when that is not below 1 or max_norm <= 0.
float clip_coefficient(double norm, double max_norm);

// torch.nn.utils.clip_grad_norm_ / Megatron's clip_grad_norm_fp32: scales every gradient by
// max_norm/(norm + 1e-6) when that is below 1. Returns the norm before clipping. max_norm <= 0 disables
// clipping (only the norm is computed), as Megatron's --clip-grad 0 does.
double clip_grad_norm(std::span<const ParamSpan> params, double max_norm);
// Multiplies every gradient by scale (a clip_coefficient() of a norm the caller reduced across ranks).
void scale_grads(std::span<const ParamSpan> params, float scale);

}  // namespace lmforge::optim
