// defines: Workspace::take
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

}  // namespace lmforge::layers
