// defines: Tensor's methods, make_view(), dtype/device names
#include "kernels/tensor.h"

#include "util/error.h"

namespace lmforge::kernels {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
  }
  return "?";
}

const char* device_name(Device device) {
  switch (device) {
    case Device::CPU: return "cpu";
    case Device::GUARDED: return "guarded";
    case Device::CUDA: return "cuda";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[(size_t)i];
  return n;
}

namespace {
template <class T>
T* typed(const Tensor& t, DType want, const char* what) {
  if (t.dtype != want)
    throw Error(std::string(what) + ": expected " + dtype_name(want) + " data, got " + t.describe());
  return static_cast<T*>(t.data);
}
}  // namespace

float* Tensor::f32(const char* what) const { return typed<float>(*this, DType::F32, what); }
int32_t* Tensor::i32(const char* what) const { return typed<int32_t>(*this, DType::I32, what); }
uint16_t* Tensor::bf16(const char* what) const { return typed<uint16_t>(*this, DType::BF16, what); }
uint16_t* Tensor::f16(const char* what) const { return typed<uint16_t>(*this, DType::F16, what); }

Tensor Tensor::reshaped(std::initializer_list<int64_t> new_shape) const {
  if (!contiguous()) throw std::logic_error("reshaped(): a strided view " + describe());
  Tensor t = *this;
  t.ndim = (int)new_shape.size();
  t.row_stride = 0;
  size_t i = 0;
  int64_t n = 1;
  for (int64_t d : new_shape) t.shape[i++] = d, n *= d;
  if (n != numel()) throw std::logic_error("reshaped(): " + describe() + " has another number of elements");
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t count) const {
  if (ndim < 1 || begin < 0 || begin + count > shape[0]) throw std::logic_error("slice0() out of range: " + describe());
  Tensor t = *this;
  int64_t row = 1;  // elements per index of dimension 0
  for (int i = 1; i < ndim; i++) row *= (i == ndim - 1 ? stride() : shape[(size_t)i]);
  if (ndim == 1) row = 1;
  t.data = static_cast<char*>(data) + (size_t)(begin * row) * dtype_size(dtype);
  if (widened != nullptr) t.widened = widened + begin * row;
  t.shape[0] = count;
  return t;
}

std::string Tensor::describe() const {
  std::string s = dtype_name(dtype);
  s += "[";
  for (int i = 0; i < ndim; i++) {
    if (i) s += ",";  // not `(i ? "," : "") + to_string(...)`: GCC 12 gives a false -Wrestrict for it (PR 105329)
    s += std::to_string(shape[(size_t)i]);
  }
  s += "]";
  if (!contiguous()) s += " (row stride " + std::to_string(row_stride) + ")";
  return s + " " + device_name(device);
}

Tensor make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = (int)shape.size();
  if (shape.size() > t.shape.size()) throw std::logic_error("make_view: more than 4 dimensions");
  size_t i = 0;
  for (int64_t d : shape) t.shape[i++] = d;
  return t;
}

}  // namespace lmforge::kernels
