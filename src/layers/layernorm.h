// defines: lmforge::layers::LayerNorm (replicated weight and bias, epsilon a parameter; saves its statistics)
#pragma once
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/parameter_store.h"

namespace lmforge::layers {

// y = (x − mean)/sqrt(var + eps)·w + b over the last axis (math in kernels/ops.h). Replicated under tensor
// parallelism: every rank holds the whole w and b and computes the same y on the same (replicated) x.
class LayerNorm {
 public:
  LayerNorm(ParameterStore& store, const std::string& name, int64_t channels, float eps);

  // out, inp [N,C]; mean and rstd of the rows are kept for backward().
  void forward(const kernels::Tensor& out, const kernels::Tensor& inp);
  // dinp += ..., dw += ..., db += ... for the last forward's rows; inp as given to that forward.
  void backward(const kernels::Tensor& dinp, const kernels::Tensor& dout, const kernels::Tensor& inp);

 private:
  ParameterStore& store_;
  int64_t channels_;
  float eps_;
  size_t weight_ = 0, bias_ = 0;
  kernels::Buffer mean_, rstd_;
};

}  // namespace lmforge::layers
