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

void Mlp::forward(const Tensor& out, const Tensor& x, Saved& saved) {
  const int64_t N = x.rows(), F = fc_->local_out();
  saved.x = x;
  const Tensor pre = sized(backend_, saved.pre, workspace_.dtype(), N, F);
  const Tensor act = sized(backend_, saved.act, workspace_.dtype(), N, F);
  fc_->forward(pre, x);
  kernels::gelu_forward(act, pre, spec_.gelu);
  proj_->forward(out, act);
}

void Mlp::backward(const Tensor& dx, const Tensor& dout, const Saved& saved) {
  const int64_t N = saved.x.rows(), F = fc_->local_out();
  const Tensor dact = workspace_.take(Slot::D_FC_ACT, {N, F}, true);
  proj_->backward(dact, dout, saved.act.view({N, F}));
  const Tensor dpre = workspace_.take(Slot::D_FC, {N, F}, true);
  kernels::gelu_backward(dpre, saved.pre.view({N, F}), dact, spec_.gelu);
  fc_->backward(dx, dpre, saved.x);
}

}  // namespace lmforge::layers
