// defines: lmforge::layers::LayerNorm (replicated weight and bias, epsilon a parameter; its row statistics are kept
//          in a Saved object the caller owns, one per call in flight)
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
  // What one forward keeps for its backward: the rows' mean and 1/std.
  struct Saved {
    kernels::Buffer mean, rstd;
  };

  LayerNorm(ParameterStore& store, const std::string& name, int64_t channels, float eps);

  // out, inp [N,C]; the rows' statistics go to `saved` for backward().
  void forward(const kernels::Tensor& out, const kernels::Tensor& inp, Saved& saved);
  // Inference (no backward follows): the statistics go to this layer's scratch.
  void forward(const kernels::Tensor& out, const kernels::Tensor& inp) { forward(out, inp, scratch_); }
  // dinp += ..., dw += ..., db += ... for the rows of the forward that filled `saved`; inp as given to it.
  void backward(const kernels::Tensor& dinp, const kernels::Tensor& dout, const kernels::Tensor& inp,
                const Saved& saved);

 private:
  ParameterStore& store_;
  int64_t channels_;
  float eps_;
  size_t weight_ = 0, bias_ = 0;
  Saved scratch_;
};

}  // namespace lmforge::layers
