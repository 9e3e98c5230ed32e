// defines: Linear (plain / column-parallel / row-parallel forward and backward)
#include "layers/linear.h"

#include "util/error.h"

namespace lmforge::layers {

using kernels::Tensor;
using kernels::WeightLayout;

Linear::Linear(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, LinearSpec spec)
    : store_(store), tp_(tp), workspace_(workspace), spec_(std::move(spec)) {
  const int T = tp_.size();
  const bool in_out = spec_.layout == WeightLayout::IN_OUT;
  const std::vector<int64_t> shape = in_out ? std::vector<int64_t>{spec_.in, spec_.out}
                                            : std::vector<int64_t>{spec_.out, spec_.in};
  int weight_split = -1, bias_split = -1, blocks = 1;
  local_in_ = spec_.in;
  local_out_ = spec_.out;
  // A layer outside any tensor-parallel group (T 1) registers whole tensors, also in a store whose other layers are
  // split (ELECTRA's replicated generator beside its tensor-parallel discriminator).
  if (spec_.parallelism == Parallelism::COLUMN && T > 1) {
    weight_split = in_out ? 1 : 0;
    bias_split = 0;
    blocks = spec_.blocks;
    local_out_ = spec_.out / T;
  } else if (spec_.parallelism == Parallelism::ROW && T > 1) {
    weight_split = in_out ? 0 : 1;
    local_in_ = spec_.in / T;
  }
  if (spec_.tied_weight >= 0) {
    weight_ = (size_t)spec_.tied_weight;
    const param::Parameter& tied = store_.table()[weight_];
    if (tied.shape != shape || tied.split_dim != weight_split)
      throw std::logic_error(spec_.name + ": the tied weight " + tied.name + " has another shape or split");
  } else {
    weight_ = store_.add(spec_.name + ".weight", shape, true, Init::normal(spec_.init_std), weight_split, blocks);
  }
  has_bias_ = spec_.bias;
  if (has_bias_)
    bias_ = store_.add(spec_.bias_name.empty() ? spec_.name + ".bias" : spec_.bias_name, {spec_.out}, false,
                       Init::zeros(), bias_split, blocks);
}

void Linear::forward(const Tensor& out, const Tensor& inp) {
  const Tensor w = store_.compute_value(weight_);
  const Tensor b = has_bias_ ? store_.compute_value(bias_) : Tensor{};
  if (spec_.parallelism == Parallelism::ROW && tp_.active()) {
    // Partial products summed over the group; the replicated bias is added once, after the sum.
    kernels::linear_forward(out, inp, w, Tensor{}, spec_.layout);
    tp_.all_reduce(out);
    if (has_bias_) kernels::bias_add_forward(out, b);
    return;
  }
  kernels::linear_forward(out, inp, w, b, spec_.layout);
}

void Linear::backward(const Tensor& dinp, const Tensor& dout, const Tensor& inp) {
  const Tensor w = store_.compute_value(weight_);
  const Tensor dw = store_.grad(weight_);
  const Tensor db = has_bias_ ? store_.grad(bias_) : Tensor{};
  if (spec_.parallelism == Parallelism::COLUMN && tp_.active() && dinp.present()) {
    // Each rank's output slice contributes part of d(input): sum the parts over the group (Megatron's
    // "copy to tensor-parallel region" in reverse) before accumulating into the caller's gradient.
    const int64_t N = inp.rows();
    const Tensor part = workspace_.take(Slot::PARTIAL, {N, spec_.in}, /*zero=*/true);
    kernels::linear_backward(part, dw, db, dout, inp, w, spec_.layout);
    tp_.all_reduce(part);
    kernels::add_backward(dinp, Tensor{}, part);  // dinp += part
    return;
  }
  kernels::linear_backward(dinp, dw, db, dout, inp, w, spec_.layout);
}

}  // namespace lmforge::layers
