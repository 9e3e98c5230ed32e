// defines: lmforge::kernels::DType, Device, Tensor (a non-owning view of device memory: data, dtype, device, shape),
//          dtype_size(), dtype_name(), device_name(), make_view()
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace lmforge::kernels {

// Element types the ops are written for. Token ids, positions and masks are I32; BF16 is bfloat16 stored as its
// 16 raw bits (the upper half of an fp32); F16 is IEEE binary16 (max 65504: larger values overflow to inf, which
// is what fp16 loss scaling exists for). Enumerators are only ever appended (files and tests keep their values).
enum class DType : uint8_t { F32, BF16, I32, F16 };
inline bool is_floating(DType d) { return d != DType::I32; }
// Where the memory lives. A backend for another device adds its enumerator, its Backend and its op files
// (kernels/<device>/) with their registration (kernels/dispatch.cpp); model code never branches on it. GUARDED
// is a test device (kernels/backend.h): the CPU's kernels over memory the process cannot touch outside them. CUDA
// is an NVIDIA GPU (kernels/cuda/, in builds with LMFORGE_CUDA).
enum class Device : uint8_t { CPU, GUARDED, CUDA };
inline constexpr size_t kDeviceCount = 3;  // enumerators of Device

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);    // "f32", "bf16", "i32", "f16"
const char* device_name(Device device);  // "cpu", "guarded", "cuda"

// A view of n-dimensional row-major device memory (at most 4 dimensions). It owns nothing: buffers come from a
// Backend (backend.h). An absent optional operand is a Tensor with data == nullptr.
//
// row_stride: elements between the starts of consecutive rows of the LAST dimension; 0 means shape.back()
// (contiguous). It lets a view select columns of a wider row, e.g. the k part of a fused [B,T,3C] q|k|v
// activation as a [B,T,C] view with row_stride 3C. Only ops that document it accept a strided view.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, 4> shape{};
  int64_t row_stride = 0;
  // Optional: the same values widened exactly to fp32, in the same layout (shape and row stride), for a BF16
  // tensor whose owner keeps such a mirror (layers::ParameterStore's working weights on a backend that
  // wants_widened_bf16_weights()). Ops may multiply it instead of widening the bf16 memory again; it must hold
  // exactly the widened bf16 values. nullptr: none. Views (reshaped, slice0) carry it along.
  const float* widened = nullptr;

  bool present() const { return data != nullptr; }
  int64_t dim(int i) const { return shape[(size_t)(i < 0 ? ndim + i : i)]; }  // dim(-1) is the last
  int64_t numel() const;
  int64_t rows() const { return ndim == 0 ? 1 : numel() / shape[(size_t)ndim - 1]; }  // product of all but last
  int64_t stride() const { return row_stride != 0 ? row_stride : (ndim == 0 ? 1 : shape[(size_t)ndim - 1]); }
  bool contiguous() const { return row_stride == 0 || ndim == 0 || row_stride == shape[(size_t)ndim - 1]; }

  // Typed access for kernels; throws lmforge::Error naming `what` when the dtype differs.
  float* f32(const char* what = "tensor") const;
  int32_t* i32(const char* what = "tensor") const;
  uint16_t* bf16(const char* what = "tensor") const;
  uint16_t* f16(const char* what = "tensor") const;
  // The same memory seen with another shape of equal numel (contiguous views only).
  Tensor reshaped(std::initializer_list<int64_t> new_shape) const;
  // Rows [begin, begin+count) of dimension 0.
  Tensor slice0(int64_t begin, int64_t count) const;
  std::string describe() const;  // "f32[4,16,32] cpu" for error messages
};

// A contiguous view of typed memory.
Tensor make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::CPU);
inline Tensor make_view(float* data, std::initializer_list<int64_t> shape, Device device = Device::CPU) {
  return make_view(static_cast<void*>(data), DType::F32, shape, device);
}
inline Tensor make_view(int32_t* data, std::initializer_list<int64_t> shape, Device device = Device::CPU) {
  return make_view(static_cast<void*>(data), DType::I32, shape, device);
}

}  // namespace lmforge::kernels
