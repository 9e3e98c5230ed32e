// defines: lmforge::layers::Slot, Workspace (scratch buffers shared by all layers of a model), sized() (a layer's or
//          model's own buffer as a [rows, cols] view)
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>

#include "kernels/backend.h"

namespace lmforge::layers {

// Layers run one at a time, so the buffers a layer needs only while it runs (input gradients inside its backward,
// the projection outputs that are added to the residual stream at once) can be one set for the whole model
// instead of one per layer. Each slot has one purpose; a layer never holds a slot across a call into another layer
// that uses the same slot.
enum class Slot : size_t {
  D_NORMED,     // gradient of a LayerNorm output [N,C]
  D_ATTENTION,  // gradient of the attention heads' output [N,C/T]
  D_QKV,        // gradient of the q|k|v projections [N,3C/T] (or q and k/v)
  D_KV,         // cross-attention: gradient of the memory's k|v [Nk,2C/T]
  D_FC,         // gradient of the MLP's first projection [N,F/T]
  D_FC_ACT,     // gradient of the activation [N,F/T]
  D_RESIDUAL,   // post-LN layers: gradient into a LayerNorm input [N,C]
  D_BRANCH,     // gradient of a branch output before its dropout [N,C]
  BRANCH_OUT,   // forward: output of an attention or MLP branch before it joins the residual stream [N,C]
  DROPPED,      // forward: the same after dropout [N,C]
  PARTIAL,      // column-parallel backward: this rank's part of an input gradient [N,in]
  ATTENTION_CORE,  // selective recomputation: the attention core's saved state of the call running (always fp32;
                   // Attention::probs), one for every layer since none keeps it between its forward and backward
  PER_HEAD,        // fp32: q|k|v or k|v projection outputs in Megatron's per-head row order, before they are split
  D_PER_HEAD,      // fp32: their gradients, gathered back into that order
  COUNT
};

class Workspace {
 public:
  explicit Workspace(kernels::Backend& backend) : backend_(backend) {}
  kernels::Backend& backend() const { return backend_; }
  // The dtype of the slots (activation gradients and branch outputs): F32 unless a model runs in mixed precision
  // (then its ParameterStore's activation_dtype()). Set before a forward; later takes use it.
  void set_dtype(kernels::DType dtype) { dtype_ = dtype; }
  kernels::DType dtype() const { return dtype_; }
  // A view of `shape` in the slot (grown when needed; contents undefined unless zero).
  kernels::Tensor take(Slot slot, std::initializer_list<int64_t> shape, bool zero = false);
  // The slot's buffer itself, for a caller that sizes it in its own dtype (ATTENTION_CORE, PER_HEAD, D_PER_HEAD: fp32
  // in every precision).
  kernels::Buffer& buffer(Slot slot) { return buffers_[(size_t)slot]; }

 private:
  kernels::Backend& backend_;
  std::array<kernels::Buffer, (size_t)Slot::COUNT> buffers_;
  kernels::DType dtype_ = kernels::DType::F32;
};

// buf grown to rows × cols elements of dtype (reallocated only when growing, see kernels::Buffer) and viewed as
// [rows, cols]; zeroed when asked. For the activations a layer or model keeps in its own buffers.
kernels::Tensor sized(kernels::Backend& backend, kernels::Buffer& buf, kernels::DType dtype, int64_t rows,
                      int64_t cols, bool zero = false);

}  // namespace lmforge::layers
