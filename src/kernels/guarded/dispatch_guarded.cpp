// defines: guarded::register_kernels() — the GUARDED device's entry points: the CPU's, with their operands' memory
//          opened for the call
#include <utility>

#include "kernels/dispatch.h"
#include "kernels/guarded/guarded.h"

namespace lmforge::kernels::guarded {
namespace {

// The device memory an argument of an entry point refers to: a tensor's data; nothing for the other arguments
// (sizes, flags, dropout keys).
template <class T>
const void* memory_of(const T&) {
  return nullptr;
}
const void* memory_of(const Tensor& t) { return t.data; }

// Entry point K for dtype D on the guarded device: opens the memory of every tensor argument, runs the CPU's entry
// point (looked up in the finished table at call time) and protects the memory again.
template <Kernel K, DType D, class Fn = KernelFn<K>>
struct Wrapped;
template <Kernel K, DType D, class R, class... Args>
struct Wrapped<K, D, R (*)(Args...)> {
  static R call(Args... args) {
    const Opened opened(guarded_backend(), {memory_of(args)...});
    return dispatch_table().find<K>(Device::CPU, D)(args...);
  }
};

template <Kernel K>
void wrap(KernelTable& t) {
  if (t.find<K>(Device::CPU, DType::F32)) t.add<K>(Device::GUARDED, DType::F32, &Wrapped<K, DType::F32>::call);
  if (t.find<K>(Device::CPU, DType::BF16)) t.add<K>(Device::GUARDED, DType::BF16, &Wrapped<K, DType::BF16>::call);
  if (t.find<K>(Device::CPU, DType::F16)) t.add<K>(Device::GUARDED, DType::F16, &Wrapped<K, DType::F16>::call);
}

template <size_t... I>
void wrap_all(KernelTable& t, std::index_sequence<I...>) {
  (wrap<(Kernel)I>(t), ...);
}

}  // namespace

void register_kernels(KernelTable& table) { wrap_all(table, std::make_index_sequence<kKernelCount>{}); }

}  // namespace lmforge::kernels::guarded
