// defines: lmforge::kernels::Backend (memory + synchronisation of one compute device), cpu_backend()
#pragma once
#include <cstddef>
#include <string>

namespace lmforge::kernels {

// The narrow device interface (after ggml's ggml_backend_i and CTranslate2's primitives<Device>): a backend owns
// memory on its device and knows how to move it to and from the host. The op set (kernels/ops.h) is a list of
// plain functions on device float buffers; each backend build implements the same declarations in its own
// translation units (ops_cpu.cpp now, ops_cuda.cu later), so model code never branches on the device and no
// header carries a device #ifdef.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // One line for logs and benchmarks: the device and its math library (for the CPU: OpenBLAS core, threads).
  virtual std::string info() const = 0;
  // Device memory for n floats, aligned for the widest vector loads; never nullptr (throws on failure).
  virtual float* alloc(size_t n) = 0;
  virtual void free(float* p) = 0;
  virtual void copy_to_device(float* dst_device, const float* src_host, size_t n) = 0;
  virtual void copy_to_host(float* dst_host, const float* src_device, size_t n) = 0;
  virtual void copy_on_device(float* dst_device, const float* src_device, size_t n) = 0;
  virtual void fill_zero(float* p, size_t n) = 0;
  // Waits for all queued work; the CPU backend runs every op synchronously, so this returns at once there.
  virtual void synchronize() = 0;
  // Threads the ops may use (OpenMP loops and BLAS); <= 0 keeps the current setting.
  virtual void set_num_threads(int n) = 0;
  virtual int num_threads() const = 0;
};

// The process-wide CPU backend (fp32, OpenMP + OpenBLAS).
Backend& cpu_backend();

}  // namespace lmforge::kernels
