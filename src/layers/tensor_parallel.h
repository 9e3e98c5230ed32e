// defines: lmforge::layers::TensorParallel (the tensor-parallel group a layer belongs to: rank, size and the
//          rank-ordered collectives the parallel layers need)
#pragma once
#include <cstddef>

#include "dist/communicator.h"
#include "kernels/tensor.h"

namespace lmforge::layers {

// Megatron-core makes tensor parallelism a property of layers: each parallel layer is told its group and does its
// own communication. Without a group (or with a group of one) every collective is the identity, so at
// tensor-parallel size 1 the parallel layers ARE the plain layers.
class TensorParallel {
 public:
  explicit TensorParallel(dist::Communicator* group = nullptr) : group_(group) {}
  int rank() const { return group_ ? group_->rank() : 0; }
  int size() const { return group_ ? group_->size() : 1; }
  bool active() const { return size() > 1; }
  dist::Communicator* group() const { return group_; }

  // x ← Σ over the group's ranks of x, in rank order (identical on every rank). In place, on x's device.
  void all_reduce(const kernels::Tensor& x) const;
  void all_reduce(double* data, size_t n) const;
  // data (HOST memory) holds size() pieces of `piece` floats; afterwards piece r is rank r's piece r.
  void all_gather(float* data, size_t piece) const;

 private:
  dist::Communicator* group_;
};

}  // namespace lmforge::layers
