// defines: lmforge::kernels::Kernel (the device entry points of the ops), KernelFn<K> (an entry point's signature),
//          KernelTable (entry points by (kernel, device, dtype), filled by the backends' registration functions),
//          dispatch_table(), kernel_op(). Private to the kernels module.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace lmforge::kernels {

// Every op function of ops.h that reaches a device is one entry point, and its implementation on a device has
// the op function's own signature: ops.cpp checks the operands (shapes, dtypes, one device), looks the entry up
// ONCE by (kernel, device, op dtype) and calls it with the same arguments (after ggml's supports_op and
// CTranslate2's op.cc → <op>_cpu.cc). A device's files register what they implement; an (op, device, dtype) is
// supported when every entry point of the op is registered for it (forward and backward together).
//
//  X(entry point,          op,               op function of ops.h)
#define LMFORGE_KERNELS(X)                                              \
  X(EMBEDDING_FORWARD,      EMBEDDING,        embedding_forward)        \
  X(EMBEDDING_BACKWARD,     EMBEDDING,        embedding_backward)       \
  X(LAYERNORM_FORWARD,      LAYERNORM,        layernorm_forward)        \
  X(LAYERNORM_BACKWARD,     LAYERNORM,        layernorm_backward)       \
  X(LINEAR_FORWARD,         LINEAR,           linear_forward)           \
  X(LINEAR_BACKWARD,        LINEAR,           linear_backward)          \
  X(BIAS_ADD_FORWARD,       BIAS_ADD,         bias_add_forward)         \
  X(BIAS_ADD_BACKWARD,      BIAS_ADD,         bias_add_backward)        \
  X(ADD_FORWARD,            ADD,              add_forward)              \
  X(ADD_BACKWARD,           ADD,              add_backward)             \
  X(GELU_FORWARD,           GELU,             gelu_forward)             \
  X(GELU_BACKWARD,          GELU,             gelu_backward)            \
  X(TANH_FORWARD,           TANH,             tanh_forward)             \
  X(TANH_BACKWARD,          TANH,             tanh_backward)            \
  X(DROPOUT_FORWARD,        DROPOUT,          dropout_forward)          \
  X(DROPOUT_BACKWARD,       DROPOUT,          dropout_backward)         \
  X(ATTENTION_FORWARD,      ATTENTION,        attention_forward)        \
  X(ATTENTION_BACKWARD,     ATTENTION,        attention_backward)       \
  X(ATTENTION_DECODE,       ATTENTION_DECODE, attention_decode_forward) \
  X(COPY,                   COPY,             copy)                     \
  X(CROSSENTROPY_ROW_MAX,   CROSSENTROPY,     crossentropy_row_max)     \
  X(CROSSENTROPY_SUMEXP,    CROSSENTROPY,     crossentropy_sumexp)      \
  X(CROSSENTROPY_STATS,     CROSSENTROPY,     crossentropy_stats)       \
  X(CROSSENTROPY_BACKWARD,  CROSSENTROPY,     crossentropy_backward)    \
  X(ADAMW_UPDATE,           ADAMW,            adamw_update)             \
  X(LAMB_MOMENTS,           LAMB,             lamb_moments)             \
  X(LAMB_APPLY,             LAMB,             lamb_apply)               \
  X(SGD_UPDATE,             SGD,              sgd_update)               \
  X(SCALE,                  SCALE,            scale)                    \
  X(SUM_SQUARES,            SUM_SQUARES,      sum_squares)              \
  X(COUNT_NONFINITE,        COUNT_NONFINITE,  count_nonfinite)          \
  X(ROUND_TO_F16_STORAGE,   ROUND_F16,        round_to_f16_storage)     \
  X(ADAMW_UPDATE_MULTI,     ADAMW,            adamw_update_multi)       \
  X(SGD_UPDATE_MULTI,       SGD,              sgd_update_multi)         \
  X(LAMB_MOMENTS_MULTI,     LAMB,             lamb_moments_multi)       \
  X(LAMB_APPLY_MULTI,       LAMB,             lamb_apply_multi)         \
  X(LAMB_STEP_MULTI,        LAMB,             lamb_step_multi)          \
  X(SCALE_MULTI,            SCALE,            scale_multi)              \
  X(SUM_SQUARES_MULTI,      SUM_SQUARES,      sum_squares_multi)

#define LMFORGE_KERNEL_ENUMERATOR(name, op, fn) name,
enum class Kernel : uint8_t { LMFORGE_KERNELS(LMFORGE_KERNEL_ENUMERATOR) };
#undef LMFORGE_KERNEL_ENUMERATOR

#define LMFORGE_KERNEL_COUNT(name, op, fn) +1
inline constexpr size_t kKernelCount = 0 LMFORGE_KERNELS(LMFORGE_KERNEL_COUNT);
#undef LMFORGE_KERNEL_COUNT

// The op an entry point belongs to.
Op kernel_op(Kernel k);
// lmforge::Error "kernel <op>: <why>", as ops.cpp reports a bad operand (for checks only an implementation can
// make, such as a low-precision path's need for contiguous rows).
[[noreturn]] void kernel_error(Op op, const std::string& why);

// KernelFn<K>: a pointer to a function with the signature of K's op function.
template <Kernel K>
struct KernelSignature;
#define LMFORGE_KERNEL_SIGNATURE(name, op, fn) \
  template <>                                  \
  struct KernelSignature<Kernel::name> {       \
    using type = decltype(&fn);                \
  };
LMFORGE_KERNELS(LMFORGE_KERNEL_SIGNATURE)
#undef LMFORGE_KERNEL_SIGNATURE
template <Kernel K>
using KernelFn = typename KernelSignature<K>::type;

// Entry points by (kernel, device, dtype). The backends fill it while dispatch_table() builds it; afterwards it is
// only read. Slots hold function pointers cast to one type and back to their own (add() and find() take the
// entry point's signature, so a registration of the wrong function does not compile).
class KernelTable {
 public:
  template <Kernel K>
  void add(Device device, DType dtype, KernelFn<K> fn) {
    slot(K, device, dtype) = reinterpret_cast<Untyped>(fn);
  }
  // nullptr when (device, dtype) does not implement K.
  template <Kernel K>
  KernelFn<K> find(Device device, DType dtype) const {
    return reinterpret_cast<KernelFn<K>>(slots_[index(K, device, dtype)]);
  }
  // Whether every entry point of op is registered for (device, dtype).
  bool supports(Op op, Device device, DType dtype) const;

 private:
  using Untyped = void (*)();
  static constexpr size_t kDTypeCount = 4;  // enumerators of DType
  static size_t index(Kernel k, Device device, DType dtype) {
    return ((size_t)k * kDeviceCount + (size_t)device) * kDTypeCount + (size_t)dtype;
  }
  Untyped& slot(Kernel k, Device device, DType dtype) { return slots_[index(k, device, dtype)]; }
  std::array<Untyped, kKernelCount * kDeviceCount * kDTypeCount> slots_{};
};

// The process's table, built on first use from every backend's registration function (dispatch.cpp) and
// immutable afterwards.
const KernelTable& dispatch_table();

}  // namespace lmforge::kernels
