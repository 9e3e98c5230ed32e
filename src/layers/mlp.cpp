// defines: Mlp
#include "layers/mlp.h"

namespace lmforge::layers {

using kernels::Tensor;

Mlp::Mlp(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, MlpSpec spec)
    : workspace_(workspace), spec_(std::move(spec)), backend_(store.backend()) {
  LinearSpec fc;
  fc.name = spec_.fc;
  fc.in = spec_.hidden;
  fc.out = spec_.ffn;
  fc.layout = spec_.layout;
  fc.bias = spec_.bias;
  fc.parallelism = Parallelism::COLUMN;
  fc.init_std = spec_.init_std;
  fc_ = std::make_unique<Linear>(store, tp, workspace_, fc);
  LinearSpec proj = fc;
  proj.name = spec_.proj;
  proj.in = spec_.ffn;
  proj.out = spec_.hidden;
  proj.parallelism = Parallelism::ROW;
  proj.init_std = spec_.out_init_std;
  proj_ = std::make_unique<Linear>(store, tp, workspace_, proj);
}

void Mlp::forward(const Tensor& out, const Tensor& x) {
  const int64_t N = x.rows(), F = fc_->local_out();
  x_ = x;
  pre_.resize(backend_, workspace_.dtype(), (size_t)(N * F));
  act_.resize(backend_, workspace_.dtype(), (size_t)(N * F));
  const Tensor pre = pre_.view({N, F}), act = act_.view({N, F});
  fc_->forward(pre, x);
  kernels::gelu_forward(act, pre, spec_.gelu);
  proj_->forward(out, act);
}

void Mlp::release_activations() { pre_ = kernels::Buffer(), act_ = kernels::Buffer(); }

void Mlp::backward(const Tensor& dx, const Tensor& dout) {
  const int64_t N = x_.rows(), F = fc_->local_out();
  const Tensor dact = workspace_.take(Slot::D_FC_ACT, {N, F}, true);
  proj_->backward(dact, dout, act_.view({N, F}));
  const Tensor dpre = workspace_.take(Slot::D_FC, {N, F}, true);
  kernels::gelu_backward(dpre, pre_.view({N, F}), dact, spec_.gelu);
  fc_->backward(dx, dpre, x_);
}

}  // namespace lmforge::layers
