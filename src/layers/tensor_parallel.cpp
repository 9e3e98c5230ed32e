// defines: TensorParallel collectives
#include "layers/tensor_parallel.h"

#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::layers {

void TensorParallel::all_reduce(const kernels::Tensor& x) const {
  if (!active()) return;
  if (!x.contiguous()) throw std::logic_error("TensorParallel::all_reduce of a strided view");
  if (x.dtype == kernels::DType::F32) {
    group_->all_reduce_sum(x.f32("all_reduce"), (size_t)x.numel());
    return;
  }
  // bf16/f16 activations are summed in fp32 (as the data-parallel reductions), then stored in their dtype again.
  const int64_t n = x.numel();
  kernels::Buffer sum(kernels::cpu_backend(), kernels::DType::F32, (size_t)n);
  kernels::copy(sum.view({n}), x.reshaped({n}));
  group_->all_reduce_sum(sum.f32(), (size_t)n);
  kernels::copy(x.reshaped({n}), sum.view({n}));
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
