// defines: lmforge::layers::MlpSpec, Mlp (column-parallel projection, GELU, row-parallel projection)
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/linear.h"

namespace lmforge::layers {

struct MlpSpec {
  std::string fc;     // full name of the first projection, e.g. "transformer.h.0.mlp.c_fc"
  std::string proj;   // full name of the second, e.g. "transformer.h.0.mlp.c_proj"
  int64_t hidden = 0;
  int64_t ffn = 0;    // inner width (Megatron --ffn-hidden-size, 4·hidden by default); divisible by T
  kernels::WeightLayout layout = kernels::WeightLayout::IN_OUT;
  bool bias = true;
  kernels::GeluKind gelu = kernels::GeluKind::TANH;
  double init_std = 0.02;
  double out_init_std = 0.02;
};

// y = proj(gelu(fc(x))). Tensor parallelism (Megatron): fc column-parallel, proj row-parallel, so each rank holds
// ffn/T inner features and the only communication is proj's all-reduce (and fc's in the backward).
class Mlp {
 public:
  // What one forward keeps for its backward (the caller owns it, one per call in flight).
  struct Saved {
    kernels::Tensor x;              // the input (a view: the caller keeps it valid until the backward)
    kernels::Buffer pre, act;       // fc output and its GELU [N, ffn/T]
  };

  Mlp(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, MlpSpec spec);
  // out [N,C] from x [N,C], keeping what the backward needs in `saved`.
  void forward(const kernels::Tensor& out, const kernels::Tensor& x, Saved& saved);
  // Inference (no backward follows).
  void forward(const kernels::Tensor& out, const kernels::Tensor& x) { forward(out, x, scratch_); }
  // dx += d/dx from dout [N,C] for the forward that filled `saved`.
  void backward(const kernels::Tensor& dx, const kernels::Tensor& dout, const Saved& saved);

 private:
  Workspace& workspace_;
  MlpSpec spec_;
  kernels::Backend& backend_;
  std::unique_ptr<Linear> fc_, proj_;
  Saved scratch_;
};

}  // namespace lmforge::layers
