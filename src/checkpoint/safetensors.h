// defines: lmforge::checkpoint::DType, TensorRef, TensorInfo, write_safetensors(), SafetensorsWriter (tensor by
//          tensor), SafetensorsFile (mmap reader)
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::checkpoint {

// The safetensors dtypes, in the order of the reference (Rust) implementation's enum: its writer sorts
// tensors by this order descending (widest alignment first), then by name, and so do we.
enum class DType : uint8_t { kBool, kU8, kI8, kF8_E5M2, kF8_E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);                  // "F32", "BF16", ...
std::optional<DType> parse_dtype(std::string_view name);  // nullopt for names the format does not define

// A tensor to write: `data` holds product(shape) elements of `dtype`, little-endian, contiguous.
struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes a safetensors file as the reference implementation does: 8-byte little-endian header length,
// compact JSON header ("__metadata__" first, then tensors in data order, each {"dtype","shape",
// "data_offsets"}), padded with spaces to a multiple of 8 bytes, then the tensors' bytes back to back
// (offsets relative to the first byte after the header). Tensors are ordered by dtype width descending,
// then name. With sync the file is fsynced before returning. Throws Error naming the path on I/O failure
// and for duplicate or empty names.
void write_safetensors(const std::string& path, std::vector<TensorRef> tensors,
                       const std::map<std::string, std::string>& metadata = {}, bool sync = false);

// The same file written tensor by tensor, for data that never exists all at once (a tensor-parallel model's
// whole tensors, gathered one after the other): the constructor writes the header from the names, dtypes and
// shapes (TensorRef::data unused), write(i, data) puts tensor i (the constructor's order) at its offset, in any
// order, and close() checks that every tensor was written. Errors name the path and the tensor.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::vector<TensorRef> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  void write(size_t i, const void* data);
  void close(bool sync);

 private:
  struct Slot {
    std::string name;
    uint64_t offset = 0, bytes = 0;
    bool written = false;
  };
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::vector<Slot> slots_;
};

// One tensor of a file being read; begin/end are byte offsets into the data section.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t numel() const;
};

std::string shape_string(std::span<const int64_t> shape);  // "[768, 2304]"

// A memory-mapped safetensors file, validated on open like the reference implementation: header length
// within the file (and at most 100 MB), a JSON object, known dtypes, non-negative integer shapes, each
// tensor's byte range equal to its shape × dtype size, and the ranges tiling the data section exactly (no
// overlap, no gap, nothing past the end of the file, no trailing bytes). Every failure is an Error naming
// the file and, where one is at fault, the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& at(std::string_view name) const;  // Error "<file>: no tensor '<name>'" when absent
  std::span<const std::byte> bytes(const TensorInfo& tensor) const;

  // Copies a tensor into dst as fp32 after checking its shape equals expected_shape (Error naming the file,
  // the tensor and both shapes otherwise). F32 is copied; F64, F16 and BF16 are converted.
  void read_f32(const TensorInfo& tensor, std::span<const int64_t> expected_shape, float* dst) const;
  void read_f32(std::string_view name, std::span<const int64_t> expected_shape, float* dst) const {
    read_f32(at(name), expected_shape, dst);
  }
  // Drops the mapped pages of a tensor already read from this process's resident set (the file stays mapped), so
  // that reading a checkpoint tensor by tensor never holds more than one tensor's pages.
  void release(const TensorInfo& tensor) const;

 private:
  void close();

  std::string path_;
  const std::byte* map_ = nullptr;
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // first byte after the header
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lmforge::checkpoint
