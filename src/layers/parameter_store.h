// defines: lmforge::layers::Init, ParameterStore (a model's parameter table with its flat value and gradient buffers
//          on one rank, typed views of each piece, and layout-independent initialisation)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/tensor.h"
#include "param/parameter.h"

namespace lmforge::layers {

// How a parameter starts: N(0, std), zeros or ones.
struct Init {
  enum Kind { NORMAL, ZEROS, ONES } kind = ZEROS;
  double std = 0.0;
  static Init normal(double std) { return {NORMAL, std}; }
  static Init zeros() { return {ZEROS, 0.0}; }
  static Init ones() { return {ONES, 0.0}; }
};

// Layers add their tensors while a model is built (in checkpoint order); allocate() then makes the flat buffers of
// this rank's pieces (parameters and gradients, fp32), and value(i) / grad(i) view piece i with its local shape.
class ParameterStore {
 public:
  ParameterStore(kernels::Backend& backend, int tp_rank, int tp_size);

  // Before allocate() only. split_dim/split_blocks as param::ParamTable::add.
  size_t add(std::string name, std::vector<int64_t> shape, bool weight_decay, Init init, int split_dim = -1,
             int split_blocks = 1);
  void allocate();
  bool allocated() const { return values_.data() != nullptr; }

  const param::ParamTable& table() const { return table_; }
  kernels::Backend& backend() const { return backend_; }
  kernels::Tensor value(size_t i) const;
  kernels::Tensor grad(size_t i) const;
  float* values() const { return values_.f32(); }

  // Mixed precision (Megatron's --bf16 / --fp16 with fp32 main parameters): values() and grads() stay the fp32
  // master weights and main gradients the optimizer updates; with a compute dtype of BF16 or F16 the layers
  // multiply a working copy of the weights in that dtype (compute_value) and keep their activations in it
  // (activation_dtype). The copy is made from the fp32 values by sync_compute_copy(): after init(), after a load
  // and after every optimizer step. F32 (the default): compute_value(i) is value(i) and nothing is copied.
  // BF16 on a backend that wants_widened_bf16_weights(): sync_compute_copy() also widens the copy into an fp32
  // mirror, which compute_value(i) carries as Tensor::widened (the linear layers multiply it as it is).
  void set_compute_dtype(kernels::DType dtype);
  kernels::DType compute_dtype() const { return compute_dtype_; }
  kernels::DType activation_dtype() const { return compute_dtype_; }
  kernels::Tensor compute_value(size_t i) const;
  void sync_compute_copy();
  // The whole bf16 working copy as one flat view in values()' order, with its fp32 mirror (Tensor::widened) where
  // the store keeps one, for an optimizer that writes it in its own pass (optim::ParamSpan::working); empty unless
  // the compute dtype is BF16.
  kernels::Tensor working_copy() const;
  float* grads() const { return grads_.f32(); }
  size_t local_numel() const { return table_.local_numel(); }
  void zero_grads();

  // Megatron-style initialisation that does not depend on the parallel layout: one mt19937_64 stream seeded with
  // `seed` runs through the WHOLE model's tensors in table order (normal tensors drawing Box-Muller pairs over their
  // whole row-major elements); each rank keeps the elements of its pieces as they stream past, so no rank ever holds
  // a whole tensor and every T×D layout starts from the single-process weights. Also zeroes the gradients.
  // A pipeline stage holds only some of the model's tensors: discard_before[i] (when given, one per tensor) is the
  // number of generator draws the whole model's stream spends on absent tensors between tensor i-1 and tensor i,
  // so each stage keeps exactly the values one process draws for its tensors.
  void init(uint64_t seed, const std::vector<uint64_t>& discard_before = {});
  // The generator draws tensor i takes from the stream (Box-Muller pairs of a NORMAL tensor; 0 otherwise).
  uint64_t stream_draws(size_t i) const;

 private:
  kernels::Tensor view(const kernels::Buffer& buffer, size_t i) const;
  kernels::Tensor working_view() const;  // working_ flat, with the mirror when there is one

  kernels::Backend& backend_;
  param::ParamTable table_;
  std::vector<Init> inits_;
  kernels::Buffer values_, grads_;
  kernels::DType compute_dtype_ = kernels::DType::F32;
  kernels::Buffer working_;  // the compute-dtype copy of values_ (empty in fp32)
  kernels::Buffer widened_;  // working_ widened to fp32 (bf16 where the backend wants it; else empty)
};

}  // namespace lmforge::layers
