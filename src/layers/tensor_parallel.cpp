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
  const int64_t n = x.numel();
  if (x.dtype == kernels::DType::F32) {
    group_->all_reduce_sum(x.reshaped({n}));
    return;
  }
  // bf16/f16 activations are summed in fp32 (as the data-parallel reductions), then stored in their dtype again;
  // the fp32 copy lives on x's device (the communicator stages it through the host where the transport needs to).
  kernels::Buffer sum(kernels::backend_for(x.device), kernels::DType::F32, (size_t)n);
  const kernels::Tensor sum_view = sum.view({n});
  kernels::copy(sum_view, x.reshaped({n}));
  group_->all_reduce_sum(sum_view);
  kernels::copy(x.reshaped({n}), sum_view);
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
