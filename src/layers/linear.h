// defines: lmforge::layers::Parallelism, LinearSpec, Linear (a linear layer that is plain, column-parallel or
//          row-parallel, as Megatron-core's ColumnParallelLinear / RowParallelLinear)
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"
#include "layers/workspace.h"

namespace lmforge::layers {

// How a linear layer's weight is spread over the tensor-parallel group (Megatron, "Efficient Large-Scale Language
// Model Training", §3):
//   COLUMN: each rank holds a slice of the OUTPUT features (and of the bias) and computes its slice of the output
//           from the whole (replicated) input; the input gradient is a partial sum, all-reduced in the backward.
//   ROW:    each rank holds a slice of the INPUT features and receives the matching slice of the input (what a
//           column-parallel layer produced); the outputs are partial sums, all-reduced in the forward, then the
//           replicated bias is added once.
//   REPLICATED: the whole weight everywhere.
// With one rank all three are the same plain layer.
enum class Parallelism { REPLICATED, COLUMN, ROW };

struct LinearSpec {
  std::string name;     // parameter prefix: <name>.weight, <name>.bias
  int64_t in = 0;       // whole input features
  int64_t out = 0;      // whole output features
  kernels::WeightLayout layout = kernels::WeightLayout::IN_OUT;  // [in,out] (HF Conv1D) or [out,in] (nn.Linear)
  bool bias = true;
  Parallelism parallelism = Parallelism::REPLICATED;
  int blocks = 1;       // COLUMN: the output is `blocks` fused parts (q|k|v: 3), each split across the ranks
  double init_std = 0.02;
  // A weight shared with another layer (the tied LM head over the word embedding, of shape [out, in] split like
  // this layer's): its parameter index; the layer then adds only its bias. -1: its own weight.
  int64_t tied_weight = -1;
  std::string bias_name;  // empty: <name>.bias
};

class Linear {
 public:
  Linear(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, LinearSpec spec);

  const LinearSpec& spec() const { return spec_; }
  int64_t local_in() const { return local_in_; }
  int64_t local_out() const { return local_out_; }

  // out [N, local_out] = inp [N, local_in] · W (+ b); ROW: summed over the group, then + b.
  void forward(const kernels::Tensor& out, const kernels::Tensor& inp);
  // dW += inpᵀ·dout, db += Σ dout, dinp += dout·Wᵀ (dinp optional); COLUMN with several ranks: the input gradient
  // is summed over the group before it is added to dinp.
  void backward(const kernels::Tensor& dinp, const kernels::Tensor& dout, const kernels::Tensor& inp);

 private:
  ParameterStore& store_;
  const TensorParallel& tp_;
  Workspace& workspace_;
  LinearSpec spec_;
  int64_t local_in_ = 0, local_out_ = 0;
  size_t weight_ = 0, bias_ = 0;
  bool has_bias_ = false;
};

}  // namespace lmforge::layers
