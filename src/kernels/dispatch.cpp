// defines: dispatch_table() (every backend's registration), KernelTable::supports(), kernel_op(), op_supported()
#include "kernels/dispatch.h"

namespace lmforge::kernels {

// The registration function of each device: it adds the device's entry points to the table.
namespace cpu {
void register_kernels(KernelTable& table);
}
namespace guarded {
void register_kernels(KernelTable& table);  // wraps the CPU's entry points: registers after them
}
namespace cuda {
void register_kernels(KernelTable& table);  // kernels/cuda/backend_cuda.cpp
}

// Built once, on first use (C++ makes a function-local static's initialisation thread-safe), then only read: the
// table is a constant of the process, like a vtable, not mutable global state. The backends register here rather
// than from static initialisers of their own files, whose order across translation units is unspecified.
const KernelTable& dispatch_table() {
  static const KernelTable table = [] {
    KernelTable t;
    // Which backends a build has: cmake/cuda.cmake (a kernels-only build has no CPU kernels).
#if LMFORGE_KERNELS_CPU
    cpu::register_kernels(t);
    guarded::register_kernels(t);
#endif
#if LMFORGE_KERNELS_CUDA
    cuda::register_kernels(t);
#endif
    return t;
  }();
  return table;
}

Op kernel_op(Kernel k) {
#define LMFORGE_KERNEL_OP(name, op, fn) Op::op,
  static constexpr Op ops[] = {LMFORGE_KERNELS(LMFORGE_KERNEL_OP)};
#undef LMFORGE_KERNEL_OP
  return ops[(size_t)k];
}

bool KernelTable::supports(Op op, Device device, DType dtype) const {
  bool any = false;
  for (size_t k = 0; k < kKernelCount; k++) {
    if (kernel_op((Kernel)k) != op) continue;
    if (slots_[index((Kernel)k, device, dtype)] == nullptr) return false;
    any = true;
  }
  return any;
}

bool op_supported(Op op, Device device, DType dtype) { return dispatch_table().supports(op, device, dtype); }

}  // namespace lmforge::kernels
