// defines: LayerNorm
#include "layers/layernorm.h"

namespace lmforge::layers {

using kernels::Tensor;

LayerNorm::LayerNorm(ParameterStore& store, const std::string& name, int64_t channels, float eps)
    : store_(store), channels_(channels), eps_(eps) {
  weight_ = store_.add(name + ".weight", {channels}, false, Init::ones());
  bias_ = store_.add(name + ".bias", {channels}, false, Init::zeros());
}

void LayerNorm::forward(const Tensor& out, const Tensor& inp, Saved& saved) {
  const int64_t N = inp.rows();
  saved.mean.resize(store_.backend(), kernels::DType::F32, (size_t)N);
  saved.rstd.resize(store_.backend(), kernels::DType::F32, (size_t)N);
  kernels::layernorm_forward(out, saved.mean.view({N}), saved.rstd.view({N}), inp, store_.compute_value(weight_),
                             store_.compute_value(bias_), eps_);
}

void LayerNorm::backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp, const Saved& saved) {
  const int64_t N = inp.rows();
  kernels::layernorm_backward(dinp, store_.grad(weight_), store_.grad(bias_), dout, inp, store_.compute_value(weight_),
                              saved.mean.view({N}), saved.rstd.view({N}));
}

}  // namespace lmforge::layers
