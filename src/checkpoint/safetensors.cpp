// defines: the safetensors writer (reference layout, byte for byte) and the validating mmap reader
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <set>
#include <simdjson.h>

#include "util/json_text.h"
#include "util/error.h"
#include "util/strings.h"

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; add byte swapping");

namespace lmforge::checkpoint {

namespace {

struct DTypeEntry { DType dtype; std::string_view name; size_t size; };
constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "BOOL", 1},        {DType::kU8, "U8", 1},   {DType::kI8, "I8", 1},
    {DType::kF8_E5M2, "F8_E5M2", 1},  {DType::kF8_E4M3, "F8_E4M3", 1},
    {DType::kI16, "I16", 2},          {DType::kU16, "U16", 2}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},        {DType::kI32, "I32", 4}, {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},          {DType::kF64, "F64", 8}, {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},
};

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference reader's limit

// numel × size with overflow detection; nullopt when it does not fit in 64 bits.
std::optional<uint64_t> checked_bytes(std::span<const int64_t> shape, size_t elem) {
  uint64_t n = elem;
  for (const int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

void write_all(int fd, const std::string& path, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(path + ": write failed: " + errno_text());
    }
    p += w;
    size -= static_cast<size_t>(w);
  }
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

size_t dtype_size(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].size; }
std::string_view dtype_name(DType dtype) { return kDTypes[static_cast<size_t>(dtype)].name; }
std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeEntry& e : kDTypes)
    if (e.name == name) return e.dtype;
  return std::nullopt;
}

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorRef> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)) {
  // The reference writer's order (dtype width descending, then name) decides the data offsets; written() calls
  // may then come in any order, each tensor landing at its place.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tensors[a].dtype != tensors[b].dtype) return tensors[a].dtype > tensors[b].dtype;
    return tensors[a].name < tensors[b].name;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      header += json_quote(k);
      header += ':';
      header += json_quote(v);
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  std::set<std::string_view> names;
  slots_.resize(tensors.size());
  for (size_t i : order) {
    const TensorRef& t = tensors[i];
    if (t.name.empty() || t.name == "__metadata__") throw Error(path_ + ": invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second) throw Error(path_ + ": tensor '" + t.name + "' given twice");
    const auto bytes = checked_bytes(t.shape, dtype_size(t.dtype));
    if (!bytes) throw Error(path_ + ": tensor '" + t.name + "' has an invalid shape " + shape_string(t.shape));
    slots_[i] = {t.name, offset, *bytes, false};
    if (header.size() > 1) header += ',';
    header += json_quote(t.name);
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d) header += ',';
      header += std::to_string(t.shape[d]);
    }
    header += "],\"data_offsets\":[";
    header += std::to_string(offset);
    header += ',';
    header += std::to_string(offset + *bytes);
    header += "]}";
    offset += *bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // so the data section starts 8-byte aligned
  data_start_ = 8 + header.size();

  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(path_ + ": cannot create: " + errno_text());
  unsigned char len[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  try {
    write_all(fd_, path_, len, 8);
    write_all(fd_, path_, header.data(), header.size());
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsWriter::write(size_t i, const void* data) {
  if (i >= slots_.size()) throw Error(path_ + ": tensor index " + std::to_string(i) + " out of range");
  Slot& slot = slots_[i];
  if (slot.written) throw Error(path_ + ": tensor '" + slot.name + "' written twice");
  if (slot.bytes > 0 && data == nullptr) throw Error(path_ + ": tensor '" + slot.name + "' has no data");
  const char* p = static_cast<const char*>(data);
  uint64_t done = 0;
  while (done < slot.bytes) {
    const ssize_t w = ::pwrite(fd_, p + done, slot.bytes - done, (off_t)(data_start_ + slot.offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw Error(path_ + ": write of tensor '" + slot.name + "' failed: " + errno_text());
    done += (uint64_t)w;
  }
  slot.written = true;
}

void SafetensorsWriter::close(bool sync) {
  for (const Slot& slot : slots_)
    if (!slot.written) throw Error(path_ + ": tensor '" + slot.name + "' was never written");
  const int fd = fd_;
  fd_ = -1;
  if (sync && ::fsync(fd) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Error(path_ + ": fsync failed: " + why);
  }
  if (::close(fd) != 0) throw Error(path_ + ": close failed: " + errno_text());
}

void write_safetensors(const std::string& path, std::vector<TensorRef> tensors,
                       const std::map<std::string, std::string>& metadata, bool sync) {
  SafetensorsWriter writer(path, tensors, metadata);
  for (size_t i = 0; i < tensors.size(); ++i) writer.write(i, tensors[i].data);
  writer.close(sync);
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw Error(path + ": cannot stat: " + why);
  }
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ > 0) {
    void* p = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      throw Error(path + ": cannot mmap: " + why);
    }
    map_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  try {
    if (map_size_ < 8)
      throw Error(path + ": not a safetensors file: " + std::to_string(map_size_) +
                  " bytes, shorter than the 8-byte header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(map_[i]);
    if (n > kMaxHeader) throw Error(path + ": safetensors header length " + std::to_string(n) + " exceeds 100 MB");
    if (n > map_size_ - 8)
      throw Error(path + ": truncated: header length " + std::to_string(n) + " but only " +
                  std::to_string(map_size_ - 8) + " bytes follow it");
    const char* text = reinterpret_cast<const char*>(map_ + 8);
    if (n == 0 || text[0] != '{') throw Error(path + ": safetensors header (offset 8) does not start with '{'");
    data_ = map_ + 8 + n;
    const uint64_t data_size = map_size_ - 8 - n;

    simdjson::dom::parser parser;
    const simdjson::padded_string json(text, n);
    simdjson::dom::element root;
    if (auto err = parser.parse(json).get(root))
      throw Error(path + ": safetensors header is not valid JSON: " + simdjson::error_message(err));
    simdjson::dom::object obj;
    if (root.get_object().get(obj)) throw Error(path + ": safetensors header is not a JSON object");
    for (auto field : obj) {
      const std::string name(field.key);
      if (name == "__metadata__") {
        simdjson::dom::object meta;
        if (field.value.get_object().get(meta)) throw Error(path + ": __metadata__ is not an object");
        for (auto m : meta) {
          std::string_view v;
          if (m.value.get_string().get(v))
            throw Error(path + ": __metadata__ value of '" + std::string(m.key) + "' is not a string");
          metadata_[std::string(m.key)] = std::string(v);
        }
        continue;
      }
      const std::string where = path + ": tensor '" + name + "'";
      simdjson::dom::object info;
      if (field.value.get_object().get(info)) throw Error(where + ": header entry is not an object");
      TensorInfo t;
      t.name = name;
      std::string_view dtype;
      if (info["dtype"].get_string().get(dtype)) throw Error(where + ": missing or non-string dtype");
      const auto parsed = parse_dtype(dtype);
      if (!parsed) throw Error(where + ": unknown dtype '" + std::string(dtype) + "'");
      t.dtype = *parsed;
      simdjson::dom::array shape, offsets;
      if (info["shape"].get_array().get(shape)) throw Error(where + ": missing or non-array shape");
      for (auto d : shape) {
        uint64_t v = 0;
        if (d.get_uint64().get(v) || v > static_cast<uint64_t>(INT64_MAX))
          throw Error(where + ": shape entries must be non-negative integers");
        t.shape.push_back(static_cast<int64_t>(v));
      }
      if (info["data_offsets"].get_array().get(offsets) || offsets.size() != 2)
        throw Error(where + ": data_offsets must be an array of two integers");
      if (offsets.at(0).get_uint64().get(t.begin) || offsets.at(1).get_uint64().get(t.end))
        throw Error(where + ": data_offsets must be non-negative integers");
      if (index_.count(name)) throw Error(where + ": appears twice in the header");
      const auto bytes = checked_bytes(t.shape, dtype_size(t.dtype));
      if (t.end < t.begin) throw Error(where + ": data_offsets end before they begin");
      if (!bytes || t.end - t.begin != *bytes)
        throw Error(where + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                    ") hold " + std::to_string(t.end - t.begin) + " bytes but " + std::string(dtype) + " " +
                    shape_string(t.shape) + " needs " + (bytes ? std::to_string(*bytes) : "too many"));
      index_.emplace(name, tensors_.size());
      tensors_.push_back(std::move(t));
    }
    // The byte ranges must tile [0, data_size) exactly, as the reference reader requires.
    std::vector<size_t> order(tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::tie(tensors_[a].begin, tensors_[a].end) < std::tie(tensors_[b].begin, tensors_[b].end);
    });
    uint64_t expect = 0;
    for (const size_t i : order) {
      const TensorInfo& t = tensors_[i];
      if (t.begin != expect)
        throw Error(path + ": tensor '" + t.name + "' data_offsets [" + std::to_string(t.begin) + ", " +
                    std::to_string(t.end) + ") " + (t.begin < expect ? "overlap the previous tensor" : "leave a gap") +
                    " (expected to start at " + std::to_string(expect) + ")");
      expect = t.end;
      if (expect > data_size)
        throw Error(path + ": truncated: tensor '" + t.name + "' ends at data offset " + std::to_string(t.end) +
                    " but the file holds only " + std::to_string(data_size) + " data bytes");
    }
    if (expect != data_size)
      throw Error(path + ": " + std::to_string(data_size - expect) + " bytes after the last tensor's data");
    std::vector<TensorInfo> sorted;
    sorted.reserve(tensors_.size());
    for (const size_t i : order) sorted.push_back(std::move(tensors_[i]));
    tensors_ = std::move(sorted);
    index_.clear();
    for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
  } catch (...) {
    close();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { close(); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(std::exchange(o.map_, nullptr)),
      map_size_(std::exchange(o.map_size_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      tensors_(std::move(o.tensors_)),
      index_(std::move(o.index_)),
      metadata_(std::move(o.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    data_ = std::exchange(o.data_, nullptr);
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

void SafetensorsFile::close() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw Error(path_ + ": no tensor '" + std::string(name) + "'");
  return *t;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  return {data_ + t.begin, static_cast<size_t>(t.end - t.begin)};
}

void SafetensorsFile::release(const TensorInfo& tensor) const {
  if (map_ == nullptr || tensor.end <= tensor.begin) return;
  // Whole pages inside the tensor's bytes only: a neighbour's page may still be wanted.
  const size_t page = (size_t)::sysconf(_SC_PAGESIZE);
  const uintptr_t first = reinterpret_cast<uintptr_t>(data_ + tensor.begin);
  const uintptr_t last = reinterpret_cast<uintptr_t>(data_ + tensor.end);
  const uintptr_t begin = (first + page - 1) / page * page, end = last / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void SafetensorsFile::read_f32(const TensorInfo& t, std::span<const int64_t> expected_shape, float* dst) const {
  if (!std::equal(t.shape.begin(), t.shape.end(), expected_shape.begin(), expected_shape.end()))
    throw Error(path_ + ": tensor '" + t.name + "' has shape " + shape_string(t.shape) + ", expected " +
                shape_string(expected_shape));
  const std::span<const std::byte> src = bytes(t);
  const size_t n = static_cast<size_t>(t.numel());
  // memcpy per element: the data section need not be aligned for the element type.
  switch (t.dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(dst, src.data(), src.size());  // a 0-element tensor may come with null pointers
      break;
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double x;
        std::memcpy(&x, src.data() + 8 * i, 8);
        dst[i] = static_cast<float>(x);
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t x;
        std::memcpy(&x, src.data() + 2 * i, 2);
        dst[i] = std::bit_cast<float>(static_cast<uint32_t>(x) << 16);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t x;
        std::memcpy(&x, src.data() + 2 * i, 2);
        dst[i] = half_to_float(x);
      }
      break;
    default:
      throw Error(path_ + ": tensor '" + t.name + "' has dtype " + std::string(dtype_name(t.dtype)) +
                  ", not a floating-point type convertible to F32");
  }
}

}  // namespace lmforge::checkpoint
