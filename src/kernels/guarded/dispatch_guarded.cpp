// defines: guarded::register_kernels() — the GUARDED device's entry points: the CPU's, with their operands' memory
//          opened for the call
#include <utility>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/guarded/guarded.h"

namespace lmforge::kernels::guarded {
namespace {

// The device memory an argument of an entry point refers to: a tensor's data, every operand of a multi-tensor
// form's runs or views; nothing for the other arguments (sizes, flags, dropout keys, host arrays).
template <class T>
void add_memory(std::vector<const void*>&, const T&) {}
void add_memory(std::vector<const void*>& to, const Tensor& t) { to.push_back(t.data); }
void add_memory(std::vector<const void*>& to, const MultiTensorList& runs) {
  for (size_t k = 0; k < runs.count; ++k) {
    const MultiTensorItem& r = runs.items[k];
    if (r.param.numel() == 0) continue;  // skipped by the op (an empty view may point anywhere)
    for (const Tensor* t : {&r.param, &r.grad, &r.m, &r.v}) to.push_back(t->data);
  }
}
void add_memory(std::vector<const void*>& to, const TensorList& xs) {
  for (size_t k = 0; k < xs.count; ++k)
    if (xs.items[k].numel() > 0) to.push_back(xs.items[k].data);
}

// Entry point K for dtype D on the guarded device: opens the memory of every tensor argument, runs the CPU's entry
// point (looked up in the finished table at call time) and protects the memory again.
template <Kernel K, DType D, class Fn = KernelFn<K>>
struct Wrapped;
template <Kernel K, DType D, class R, class... Args>
struct Wrapped<K, D, R (*)(Args...)> {
  static R call(Args... args) {
    std::vector<const void*> memory;
    (add_memory(memory, args), ...);
    const Opened opened(guarded_backend(), std::move(memory));
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
