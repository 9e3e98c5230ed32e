// defines: Workspace::take, sized
#include "layers/workspace.h"

namespace lmforge::layers {

kernels::Tensor Workspace::take(Slot slot, std::initializer_list<int64_t> shape, bool zero) {
  size_t n = 1;
  for (int64_t d : shape) n *= (size_t)d;
  kernels::Buffer& b = buffers_[(size_t)slot];
  b.resize(backend_, dtype_, n);
  kernels::Tensor t = b.view(shape);
  if (zero) backend_.fill_zero(t.data, n * kernels::dtype_size(dtype_));
  return t;
}

kernels::Tensor sized(kernels::Backend& backend, kernels::Buffer& buf, kernels::DType dtype, int64_t rows,
                      int64_t cols, bool zero) {
  buf.resize(backend, dtype, (size_t)(rows * cols));
  if (zero) buf.zero();
  return buf.view({rows, cols});
}

}  // namespace lmforge::layers
