// defines: global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ and Megatron's clip_grad_norm_fp32
#include "optim/clip_grad.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace lmforge::optim {

double sum_of_squares(const kernels::Tensor& g) {
  return g.numel() == 0 ? 0.0 : kernels::sum_squares(g, kernels::SumOrder::PARALLEL);
}

void scale_in_place(const kernels::Tensor& g, float factor) {
  if (g.numel() > 0) kernels::scale(g, factor);
}

namespace {
std::vector<kernels::Tensor> grads_of(std::span<const ParamSpan> params) {
  std::vector<kernels::Tensor> g;
  g.reserve(params.size());
  for (const ParamSpan& p : params) g.push_back(p.grad);
  return g;
}
}  // namespace

// One multi-tensor op (one read of every span's Σg²), added in span order.
double grad_sum_of_squares(std::span<const ParamSpan> params) {
  const std::vector<kernels::Tensor> g = grads_of(params);
  std::vector<double> sums(g.size());
  kernels::sum_squares_multi({g.data(), g.size()}, sums.data());
  double total = 0.0;
  for (double s : sums) total += s;
  return total;
}

double global_grad_norm(std::span<const ParamSpan> params) { return std::sqrt(grad_sum_of_squares(params)); }

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const float coef = static_cast<float>(max_norm) / (static_cast<float>(norm) + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

void scale_grads(std::span<const ParamSpan> params, float scale) {
  const std::vector<kernels::Tensor> g = grads_of(params);
  kernels::scale_multi({g.data(), g.size()}, scale);
}

double clip_grad_norm(std::span<const ParamSpan> params, double max_norm) {
  const double norm = global_grad_norm(params);
  const float coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0f) scale_grads(params, coef);
  return norm;
}

}  // namespace lmforge::optim
