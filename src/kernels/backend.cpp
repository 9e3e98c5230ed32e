// defines: Buffer, backend_for(), host_accessible(), table_only_backend()
#include "kernels/backend.h"

#include <stdexcept>
#include <string>
#include <utility>

#if LMFORGE_KERNELS_CPU
#include "kernels/guarded/guarded.h"
#endif
#include "util/error.h"

namespace lmforge::kernels {

#if LMFORGE_KERNELS_CUDA
namespace cuda {
Backend& cuda_backend();  // kernels/cuda/backend_cuda.cpp: throws naming why when no driver or device is usable
}
#endif

namespace {

// Refuses every memory function: a model built over it for its parameter table alone never allocates, and a slip
// that would is a logic error, not a silent host allocation.
class TableOnlyBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  const char* name() const override { return "table-only"; }
  std::string info() const override { return "table-only (holds no memory)"; }
  void* alloc(size_t) override { refuse("alloc"); }
  void free(void*) override { refuse("free"); }
  void copy_to_device(void*, const void*, size_t) override { refuse("copy_to_device"); }
  void copy_to_host(void*, const void*, size_t) override { refuse("copy_to_host"); }
  void copy_on_device(void*, const void*, size_t) override { refuse("copy_on_device"); }
  void fill_zero(void*, size_t) override { refuse("fill_zero"); }
  void synchronize() override {}
  void set_num_threads(int) override {}
  int num_threads() const override { return 1; }

 private:
  [[noreturn]] static void refuse(const char* what) {
    throw std::logic_error(std::string("the table-only backend holds no memory (") + what + ")");
  }
};

}  // namespace

Backend& table_only_backend() {
  static TableOnlyBackend backend;  // stateless: one for the process
  return backend;
}

Backend& backend_for(Device device) {
  switch (device) {
#if LMFORGE_KERNELS_CPU
    case Device::CPU: return cpu_backend();
    case Device::GUARDED: return guarded::guarded_backend();
#else
    case Device::CPU:
    case Device::GUARDED:
      throw Error(std::string("no backend for device ") + device_name(device) +
                  ": this is a kernels-only build (LMFORGE_KERNELS_ONLY) without the CPU kernels");
#endif
    case Device::CUDA:
#if LMFORGE_KERNELS_CUDA
      return cuda::cuda_backend();
#else
      throw Error("no CUDA device: this build has no CUDA backend (configure with a CUDA compiler and "
                  "-DLMFORGE_CUDA=ON)");
#endif
  }
  throw Error(std::string("no backend for device ") + device_name(device) + " in this build");
}

bool host_accessible(Device device) { return device == Device::CPU; }

bool built_with(Device device) {
  switch (device) {
    case Device::CPU:
    case Device::GUARDED:
#if LMFORGE_KERNELS_CPU
      return true;
#else
      return false;
#endif
    case Device::CUDA:
#if LMFORGE_KERNELS_CUDA
      return true;
#else
      return false;
#endif
  }
  return false;
}

Buffer::Buffer(Backend& backend, DType dtype, size_t count) { resize(backend, dtype, count); }

Buffer::~Buffer() {
  if (data_ != nullptr) backend_->free(data_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : backend_(other.backend_), data_(other.data_), dtype_(other.dtype_), count_(other.count_),
      capacity_(other.capacity_) {
  other.data_ = nullptr;
  other.count_ = other.capacity_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) backend_->free(data_);
    backend_ = other.backend_, data_ = other.data_, dtype_ = other.dtype_, count_ = other.count_;
    capacity_ = other.capacity_;
    other.data_ = nullptr;
    other.count_ = other.capacity_ = 0;
  }
  return *this;
}

void Buffer::resize(Backend& backend, DType dtype, size_t count) {
  const size_t bytes = count * dtype_size(dtype);
  if (data_ != nullptr && (backend_ != &backend || bytes > capacity_ * dtype_size(dtype_))) {
    backend_->free(data_);
    data_ = nullptr;
  }
  if (data_ == nullptr) {
    backend_ = &backend;
    data_ = backend.alloc(bytes == 0 ? 1 : bytes);
    capacity_ = count;
  } else {
    capacity_ = capacity_ * dtype_size(dtype_) / dtype_size(dtype);
  }
  dtype_ = dtype;
  count_ = count;
}

float* Buffer::f32() const {
  if (dtype_ != DType::F32) throw std::logic_error(std::string("Buffer::f32() of a ") + dtype_name(dtype_) + " buffer");
  return static_cast<float*>(data_);
}

int32_t* Buffer::i32() const {
  if (dtype_ != DType::I32) throw std::logic_error(std::string("Buffer::i32() of a ") + dtype_name(dtype_) + " buffer");
  return static_cast<int32_t*>(data_);
}

void Buffer::zero() {
  if (data_ != nullptr) backend_->fill_zero(data_, bytes());
}

Tensor Buffer::view(std::initializer_list<int64_t> shape) const {
  Tensor t = make_view(data_, dtype_, shape, backend_ ? backend_->device() : Device::CPU);
  if ((size_t)t.numel() > count_)
    throw std::logic_error("Buffer::view " + t.describe() + " larger than the buffer (" + std::to_string(count_) + ")");
  return t;
}

}  // namespace lmforge::kernels
