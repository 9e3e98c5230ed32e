// defines: TensorParallel collectives
#include "layers/tensor_parallel.h"

#include <vector>

#include "util/error.h"

namespace lmforge::layers {

void TensorParallel::all_reduce(const kernels::Tensor& x) const {
  if (!active()) return;
  if (!x.contiguous()) throw std::logic_error("TensorParallel::all_reduce of a strided view");
  group_->all_reduce_sum(x.f32("all_reduce"), (size_t)x.numel());
}

void TensorParallel::all_reduce(double* data, size_t n) const {
  if (active()) group_->all_reduce_sum(data, n);
}

void TensorParallel::all_gather(float* data, size_t piece) const {
  if (!active()) return;
  const std::vector<size_t> counts((size_t)size(), piece);
  group_->all_gather(data, counts);
}

}  // namespace lmforge::layers
