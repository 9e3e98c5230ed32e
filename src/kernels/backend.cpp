// defines: Buffer, backend_for(), host_accessible()
#include "kernels/backend.h"

#include <utility>

#include "kernels/guarded/guarded.h"
#include "util/error.h"

namespace lmforge::kernels {

Backend& backend_for(Device device) {
  switch (device) {
    case Device::CPU: return cpu_backend();
    case Device::GUARDED: return guarded::guarded_backend();
  }
  throw Error(std::string("no backend for device ") + device_name(device) + " in this build");
}

bool host_accessible(Device device) { return device == Device::CPU; }

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
