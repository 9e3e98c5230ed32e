// defines: lmforge::kernels::Backend (memory and synchronisation of one compute device), Buffer (owned device
//          memory of a dtype), cpu_backend(), backend_for() (the CPU, the GUARDED test device, CUDA),
//          host_accessible(), table_only_backend(), built_with()
#pragma once
#include <cstddef>
#include <initializer_list>
#include <string>

#include "kernels/tensor.h"

namespace lmforge::kernels {

// The narrow device interface (after ggml's ggml_backend_i and CTranslate2's primitives<Device>): a backend owns
// memory on its device, moves it to and from the host and controls the device's threads. Compute is not here:
// the ops (kernels/ops.h) dispatch on the device and dtype of their tensor views.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const char* name() const = 0;
  // One line for logs and benchmarks: the device and its math libraries (for the CPU: OpenBLAS core, threads).
  virtual std::string info() const = 0;
  // Device memory of `bytes` bytes, aligned for the widest vector loads (64 bytes); never nullptr (throws).
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void copy_to_device(void* dst_device, const void* src_host, size_t bytes) = 0;
  virtual void copy_to_host(void* dst_host, const void* src_device, size_t bytes) = 0;
  virtual void copy_on_device(void* dst_device, const void* src_device, size_t bytes) = 0;
  virtual void fill_zero(void* p, size_t bytes) = 0;
  // Zeroes [p, p + bytes) and may hand the memory of whole pages inside it back to the system until it is written
  // again (ZeRO-2 releases the gradient pieces a rank does not own this way). The default only zeroes; the CPU
  // returns the pages (madvise).
  virtual void release_zeroed(void* p, size_t bytes) { fill_zero(p, bytes); }
  // Waits for all queued work; the CPU backend runs every op synchronously, so this returns at once there.
  virtual void synchronize() = 0;
  // Threads the ops may use (OpenMP loops and BLAS); <= 0 keeps the current setting.
  virtual void set_num_threads(int n) = 0;
  virtual int num_threads() const = 0;
  // Whether the BF16 linear layers run faster given an fp32 mirror of their bf16 weights (Tensor::widened): true on
  // a CPU whose bf16 matrix products are fp32 products of widened operands (no AVX512-BF16/AMX), where a mirror
  // made once per step (layers::ParameterStore) spares widening every weight for every product.
  virtual bool wants_widened_bf16_weights() const { return false; }
};

// The process-wide CPU backend (OpenMP + OpenBLAS).
Backend& cpu_backend();
// A backend that holds no memory (every memory function throws std::logic_error): for building a model's parameter
// table without allocating it (model::build_whole_model).
Backend& table_only_backend();
// The backend of a device present in this build; lmforge::Error for one that is not.
//
// Device::GUARDED is a test device (kernels/guarded/): the CPU's kernels, over memory that the process can read
// and write only inside the guarded backend's own calls — its copies and fill_zero, and every op dispatched to it
// (the operands' allocations are unprotected for the call and protected again after). Each allocation is its own
// page-aligned mapping, PROT_NONE at all other times, so any host access to device memory outside kernels/ (code
// that treats a device pointer as a host array, which a real accelerator would not allow either) is a
// segmentation fault where it happens. The op cases run on it with results bitwise equal to the CPU's; code
// above kernels/ runs on it to prove that it touches device memory only through Backend and the ops. Slow
// (mprotect per call): for tests.
//
// Device::CUDA (kernels/cuda/, builds with LMFORGE_CUDA): the process's first visible NVIDIA GPU, one stream,
// memory from cudaMalloc. lmforge::Error naming the reason when it cannot be used — a build without the CUDA
// backend, no NVIDIA driver (or one older than the CUDA runtime), no device — before anything runs on it.
Backend& backend_for(Device device);
// Whether the process may read and write `device`'s memory with host loads and stores (the CPU: its device memory
// is host memory; the guarded device and accelerators: no). Code outside kernels/ that hands memory to a host-only
// consumer (MPI, Gloo, a file, madvise) passes such memory as it is and stages any other through the Backend's
// copies (dist::Communicator's tensor entry points do).
bool host_accessible(Device device);

// Whether this build has a backend for `device` (CUDA only with LMFORGE_CUDA; cpu and guarded unless it is a
// kernels-only build): the command line refuses the others before any work.
bool built_with(Device device);

// Device memory for `count` elements of `dtype`, freed with the buffer (move-only). resize() reallocates only
// when growing, so per-(B,T) activation buffers are allocated once for the largest shape seen.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, DType dtype, size_t count);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Ensures room for count elements (contents are not kept when it reallocates).
  void resize(Backend& backend, DType dtype, size_t count);
  void* data() const { return data_; }
  float* f32() const;      // throws unless dtype is F32
  int32_t* i32() const;    // throws unless dtype is I32
  DType dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * dtype_size(dtype_); }
  void zero();
  // A view of the first numel(shape) elements (at most count()).
  Tensor view(std::initializer_list<int64_t> shape) const;

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  size_t count_ = 0;      // elements asked for
  size_t capacity_ = 0;   // elements allocated
};

}  // namespace lmforge::kernels
