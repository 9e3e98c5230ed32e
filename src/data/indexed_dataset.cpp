// defines: IndexedDatasetWriter and the mmap IndexedDataset readers for Megatron's "MMIDIDX" version-1 format (and the
//          legacy fairseq "TNTIDX" index)
// Layout (../shared/docs/megatron-data-format.md §2): 34-byte header, int32 lengths[S], int64 pointers[S],
// int64 doc_idx[D]; the arrays start at offset 34, so every read goes through memcpy (unaligned).
#include "data/indexed_dataset.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "data/file_util.h"
#include "util/error.h"

namespace lmforge::data {

static_assert(std::endian::native == std::endian::little, "the .bin/.idx format is little-endian");

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kHeaderBytes = 34;
constexpr size_t kWriteBuffer = 8u << 20;  // big writes: the .bin is the volume of a prep run

bool valid_dtype_code(uint8_t code) { return code >= 1 && code <= 8; }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }

// Inclusive range of ids an integer dtype can hold, clipped to int32 (ids come in as int32).
void id_range(DType d, int64_t& lo, int64_t& hi) {
  switch (d) {
    case DType::UInt8: lo = 0; hi = 255; return;
    case DType::Int8: lo = -128; hi = 127; return;
    case DType::Int16: lo = -32768; hi = 32767; return;
    case DType::UInt16: lo = 0; hi = 65535; return;
    default: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); return;
  }
}

template <typename T>
void convert_out(std::span<const int32_t> ids, uint8_t* dst) {
  for (size_t i = 0; i < ids.size(); ++i) {
    T v = static_cast<T>(ids[i]);
    std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::UInt8: case DType::Int8: return 1;
    case DType::Int16: case DType::UInt16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float64: return "float64";
    case DType::Float32: return "float32";
    case DType::UInt16: return "uint16";
  }
  return "unknown";
}

DType dtype_for_vocab_size(size_t vocab_size) {
  return vocab_size < 65500 ? DType::UInt16 : DType::Int32;
}

// ---------------------------------------------------------------------------------------------------------------
// Writer

struct IndexedDatasetWriter::Impl {
  std::string prefix;
  DType dtype;
  std::string bin_final, idx_final, bin_tmp, idx_tmp;
  UniqueFd bin_fd;
  std::vector<uint8_t> buffer;  // pending .bin bytes
  size_t buffered = 0;
  std::vector<int32_t> lengths;
  std::vector<int64_t> doc_idx{0};
  uint64_t tokens = 0;
  bool finished = false;
  bool idx_tmp_created = false;

  void flush() {
    if (buffered == 0) return;
    write_all(bin_fd.get(), buffer.data(), buffered, bin_tmp);
    buffered = 0;
  }
};

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, DType dtype) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (is_float(dtype) || !valid_dtype_code(static_cast<uint8_t>(dtype)))
    throw Error(prefix + ": cannot write token ids as " + dtype_name(dtype));
  m.prefix = std::move(prefix);
  m.dtype = dtype;
  m.bin_final = m.prefix + ".bin";
  m.idx_final = m.prefix + ".idx";
  std::string suffix = ".tmp-" + std::to_string(::getpid());
  m.bin_tmp = m.bin_final + suffix;
  m.idx_tmp = m.idx_final + suffix;
  m.bin_fd = open_write_truncate(m.bin_tmp);
  m.buffer.resize(kWriteBuffer);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!impl_ || impl_->finished) return;
  impl_->bin_fd.reset();
  ::unlink(impl_->bin_tmp.c_str());
  if (impl_->idx_tmp_created) ::unlink(impl_->idx_tmp.c_str());
}

void IndexedDatasetWriter::add_sequence(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  if (m.finished) throw Error(m.prefix + ": add_sequence after finish()");
  if (ids.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error(m.bin_final + ": sequence " + std::to_string(m.lengths.size()) + " has " +
                std::to_string(ids.size()) + " tokens, more than an int32 length can record");
  int64_t lo, hi;
  id_range(m.dtype, lo, hi);
  if (lo > std::numeric_limits<int32_t>::min() || hi < std::numeric_limits<int32_t>::max()) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < lo || ids[i] > hi)
        throw Error(m.bin_final + ": token id " + std::to_string(ids[i]) + " (sequence " +
                    std::to_string(m.lengths.size()) + ", position " + std::to_string(i) +
                    ") does not fit the dataset dtype " + dtype_name(m.dtype) +
                    (m.dtype == DType::UInt16 ? " (vocabularies of 65500 or more need int32)" : ""));
    }
  }
  const size_t item = dtype_size(m.dtype);
  size_t done = 0;
  while (done < ids.size()) {
    if (m.buffered == m.buffer.size()) m.flush();
    size_t room = (m.buffer.size() - m.buffered) / item;
    size_t n = std::min(room, ids.size() - done);
    uint8_t* dst = m.buffer.data() + m.buffered;
    auto part = ids.subspan(done, n);
    switch (m.dtype) {
      case DType::UInt8: convert_out<uint8_t>(part, dst); break;
      case DType::Int8: convert_out<int8_t>(part, dst); break;
      case DType::Int16: convert_out<int16_t>(part, dst); break;
      case DType::UInt16: convert_out<uint16_t>(part, dst); break;
      case DType::Int32: std::memcpy(dst, part.data(), n * 4); break;
      case DType::Int64: convert_out<int64_t>(part, dst); break;
      default: break;
    }
    m.buffered += n * item;
    done += n;
  }
  m.lengths.push_back(static_cast<int32_t>(ids.size()));
  m.tokens += ids.size();
}

void IndexedDatasetWriter::end_document() {
  Impl& m = *impl_;
  if (m.finished) throw Error(m.prefix + ": end_document after finish()");
  m.doc_idx.push_back(static_cast<int64_t>(m.lengths.size()));
}

void IndexedDatasetWriter::append_dataset(const std::string& other_prefix) {
  Impl& m = *impl_;
  if (m.finished) throw Error(m.prefix + ": append_dataset after finish()");
  auto other = IndexedDataset::open(other_prefix);
  if (other->dtype() != m.dtype)
    throw Error(other_prefix + ".idx: dtype " + dtype_name(other->dtype()) + " differs from " +
                dtype_name(m.dtype) + " of " + m.bin_final + " (all merged datasets must share one dtype)");
  m.flush();
  // Byte-for-byte copy of the other .bin: copy_file_range lets the kernel (or a reflinking filesystem) move the
  // data without a round trip through user space; a plain buffered copy covers filesystems that refuse it.
  const std::string other_bin = other_prefix + ".bin";
  UniqueFd in = open_read(other_bin);
  uint64_t remaining = other->bin_bytes();
  bool use_cfr = true;
  while (remaining > 0) {
    if (use_cfr) {
      ssize_t n = ::copy_file_range(in.get(), nullptr, m.bin_fd.get(), nullptr, remaining, 0);
      if (n > 0) { remaining -= static_cast<uint64_t>(n); continue; }
      if (n == 0) throw Error(other_bin + ": file shrank while being merged");
      if (errno == EINTR) continue;
      if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != EBADF)
        throw Error(os_error(other_bin, "copy into " + m.bin_tmp + " failed"));
      use_cfr = false;  // fall through to the buffered copy from the current offsets
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(remaining, m.buffer.size()));
    size_t got = read_some(in.get(), m.buffer.data(), want, other_bin);
    if (got == 0) throw Error(other_bin + ": file shrank while being merged");
    write_all(m.bin_fd.get(), m.buffer.data(), got, m.bin_tmp);
    remaining -= got;
  }
  const uint64_t shift = m.lengths.size();
  const uint64_t s = other->sequence_count();
  m.lengths.reserve(m.lengths.size() + s);
  for (uint64_t i = 0; i < s; ++i) m.lengths.push_back(other->sequence_length(i));
  const uint64_t d = other->document_count();
  m.doc_idx.reserve(m.doc_idx.size() + d);
  for (uint64_t j = 1; j <= d; ++j) m.doc_idx.push_back(other->document_index(j) + static_cast<int64_t>(shift));
  m.tokens += other->token_count();
}

void IndexedDatasetWriter::finish() {
  Impl& m = *impl_;
  if (m.finished) return;
  // Megatron's reader requires doc_idx[-1] == S; a caller that added sequences without closing the last document
  // would otherwise write a dataset nobody can read.
  if (m.doc_idx.back() != static_cast<int64_t>(m.lengths.size()))
    throw Error(m.prefix + ": finish() with " + std::to_string(m.lengths.size() - m.doc_idx.back()) +
                " sequence(s) after the last end_document()");
  m.flush();
  if (::fsync(m.bin_fd.get()) != 0) throw Error(os_error(m.bin_tmp, "fsync failed"));
  m.bin_fd.reset();

  UniqueFd idx = open_write_truncate(m.idx_tmp);
  m.idx_tmp_created = true;
  const uint64_t S = m.lengths.size(), D = m.doc_idx.size();
  uint8_t header[kHeaderBytes];
  std::memcpy(header, kMagic, 9);
  uint64_t version = 1;
  std::memcpy(header + 9, &version, 8);
  header[17] = static_cast<uint8_t>(m.dtype);
  std::memcpy(header + 18, &S, 8);
  std::memcpy(header + 26, &D, 8);
  write_all(idx.get(), header, kHeaderBytes, m.idx_tmp);
  write_all(idx.get(), m.lengths.data(), S * 4, m.idx_tmp);
  // Pointers are recomputed from the lengths (as Megatron's finalize does), streamed through the buffer.
  const int64_t item = static_cast<int64_t>(dtype_size(m.dtype));
  int64_t ptr = 0;
  size_t fill = 0;
  for (uint64_t i = 0; i < S; ++i) {
    if (fill + 8 > m.buffer.size()) { write_all(idx.get(), m.buffer.data(), fill, m.idx_tmp); fill = 0; }
    std::memcpy(m.buffer.data() + fill, &ptr, 8);
    fill += 8;
    ptr += static_cast<int64_t>(m.lengths[i]) * item;
  }
  write_all(idx.get(), m.buffer.data(), fill, m.idx_tmp);
  write_all(idx.get(), m.doc_idx.data(), D * 8, m.idx_tmp);
  if (::fsync(idx.get()) != 0) throw Error(os_error(m.idx_tmp, "fsync failed"));
  idx.reset();

  m.finished = true;  // from here publish_dataset() owns the temporaries
  publish_dataset(m.bin_tmp, m.idx_tmp, m.bin_final, m.idx_final);
  std::vector<uint8_t>().swap(m.buffer);
}

uint64_t IndexedDatasetWriter::sequences() const { return impl_->lengths.size(); }
uint64_t IndexedDatasetWriter::documents() const { return impl_->doc_idx.size() - 1; }
uint64_t IndexedDatasetWriter::tokens() const { return impl_->tokens; }
DType IndexedDatasetWriter::dtype() const { return impl_->dtype; }

// ---------------------------------------------------------------------------------------------------------------
// Reader

namespace {

// What both index layouts share: the mapped files, the counts, bounds checks and the token reads. A layout supplies
// the raw array reads and validates its own header.
class MappedIndexedDataset : public IndexedDataset {
 public:
  explicit MappedIndexedDataset(const std::string& prefix)
      : prefix_(prefix), idx_(prefix + ".idx"), bin_(prefix + ".bin") {}

  DType dtype() const override { return dtype_; }
  uint64_t sequence_count() const override { return S_; }
  uint64_t document_count() const override { return D_ - 1; }
  int32_t sequence_length(uint64_t i) const override {
    check_sequence(i);
    return raw_length(i);
  }
  int64_t sequence_pointer(uint64_t i) const override {
    check_sequence(i);
    return raw_pointer(i);
  }
  int64_t document_index(uint64_t j) const override {
    if (j >= D_)
      throw Error(idx_.path() + ": document index entry " + std::to_string(j) + " out of range (" +
                  std::to_string(D_) + " entries)");
    return raw_doc(j);
  }
  uint64_t token_count() const override { return tokens_; }
  uint64_t bin_bytes() const override { return bin_.size(); }
  uint64_t idx_bytes() const override { return idx_.size(); }
  const std::string& prefix() const override { return prefix_; }

  void read_sequence(uint64_t i, std::vector<int32_t>& out, int64_t offset, int64_t count) const override {
    const int64_t len = sequence_length(i);
    if (offset < 0 || offset > len)
      throw Error(bin_.path() + ": offset " + std::to_string(offset) + " outside sequence " + std::to_string(i) +
                  " of " + std::to_string(len) + " tokens");
    if (count < 0) count = len - offset;
    if (offset + count > len)
      throw Error(bin_.path() + ": tokens [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                  ") outside sequence " + std::to_string(i) + " of " + std::to_string(len) + " tokens");
    const size_t item = dtype_size(dtype_);
    const uint8_t* src = bin_.data() + raw_pointer(i) + offset * static_cast<int64_t>(item);
    out.resize(static_cast<size_t>(count));
    int32_t* dst = out.data();
    switch (dtype_) {
      case DType::UInt16:
        for (int64_t k = 0; k < count; ++k) dst[k] = load<uint16_t>(src + 2 * k);
        break;
      case DType::Int32: if (count) std::memcpy(dst, src, static_cast<size_t>(count) * 4); break;
      case DType::UInt8:
        for (int64_t k = 0; k < count; ++k) dst[k] = src[k];
        break;
      case DType::Int8:
        for (int64_t k = 0; k < count; ++k) dst[k] = static_cast<int8_t>(src[k]);
        break;
      case DType::Int16:
        for (int64_t k = 0; k < count; ++k) dst[k] = load<int16_t>(src + 2 * k);
        break;
      case DType::Int64:
        for (int64_t k = 0; k < count; ++k) {
          int64_t v = load<int64_t>(src + 8 * k);
          if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
            throw Error(bin_.path() + ": token " + std::to_string(v) + " in sequence " + std::to_string(i) +
                        " does not fit int32");
          dst[k] = static_cast<int32_t>(v);
        }
        break;
      case DType::Float32: case DType::Float64:
        throw Error(idx_.path() + ": dtype " + dtype_name(dtype_) + " holds no token ids");
    }
  }

 protected:
  virtual int32_t raw_length(uint64_t i) const = 0;
  virtual int64_t raw_pointer(uint64_t i) const = 0;  // bytes
  virtual int64_t raw_doc(uint64_t j) const = 0;

  void check_sequence(uint64_t i) const {
    if (i >= S_)
      throw Error(idx_.path() + ": sequence " + std::to_string(i) + " out of range (" + std::to_string(S_) +
                  " sequences)");
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(idx_.path() + ": " + what); }

  // The checks both layouts share, once S_, D_, dtype_ and the raw arrays are set: document index from 0,
  // non-decreasing, ending at S; .bin exactly as long as the lengths say. `expect_ptr` is Σ len · itemsize.
  void validate_documents_and_bin(uint64_t expect_ptr) {
    if (D_ == 0) fail("document index is empty (it must hold at least the leading 0)");
    int64_t prev = raw_doc(0);
    if (prev != 0) fail("document index starts at " + std::to_string(prev) + ", expected 0");
    for (uint64_t j = 1; j < D_; ++j) {
      const int64_t v = raw_doc(j);
      if (v < prev)
        fail("document index decreases at entry " + std::to_string(j) + " (" + std::to_string(prev) + " then " +
             std::to_string(v) + ")");
      prev = v;
    }
    if (static_cast<uint64_t>(prev) != S_)
      fail("document index ends at " + std::to_string(prev) + ", expected the sequence count " + std::to_string(S_));
    if (bin_.size() != expect_ptr)
      throw Error(bin_.path() + ": size " + std::to_string(bin_.size()) + " bytes, expected " +
                  std::to_string(expect_ptr) + " (" + std::to_string(tokens_) + " tokens of " + dtype_name(dtype_) +
                  " as " + idx_.path() + " records)");
    if (bin_.data()) ::madvise(const_cast<uint8_t*>(bin_.data()), bin_.size(), MADV_RANDOM);
  }

  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  DType dtype_ = DType::UInt16;
  uint64_t S_ = 0, D_ = 0, tokens_ = 0;
};

// Megatron's "MMIDIDX" version 1: int32 lengths[S], int64 byte pointers[S], int64 doc_idx[D] from offset 34.
class MmapIndexedDataset final : public MappedIndexedDataset {
 public:
  explicit MmapIndexedDataset(const std::string& prefix) : MappedIndexedDataset(prefix) { validate(); }

 protected:
  int32_t raw_length(uint64_t i) const override { return load<int32_t>(lengths_ + 4 * i); }
  int64_t raw_pointer(uint64_t i) const override { return load<int64_t>(pointers_ + 8 * i); }
  int64_t raw_doc(uint64_t j) const override { return load<int64_t>(doc_idx_ + 8 * j); }

 private:
  void validate() {
    const uint8_t* p = idx_.data();
    const uint64_t size = idx_.size();
    if (size < kHeaderBytes)
      fail("size " + std::to_string(size) + " bytes, too small for the 34-byte MMIDIDX header (truncated?)");
    if (std::memcmp(p, kMagic, 9) != 0) fail("bad magic (expected \"MMIDIDX\\0\\0\"): not a Megatron mmap index");
    const uint64_t version = load<uint64_t>(p + 9);
    if (version != 1) fail("index version " + std::to_string(version) + ", expected 1");
    const uint8_t code = p[17];
    if (!valid_dtype_code(code)) fail("unknown dtype code " + std::to_string(code) + " at offset 17");
    dtype_ = static_cast<DType>(code);
    S_ = load<uint64_t>(p + 18);
    D_ = load<uint64_t>(p + 26);
    // Counts come from the file: absurd ones are refused before 34 + 12·S + 8·D can overflow.
    if (S_ > (uint64_t{1} << 59) || D_ > (uint64_t{1} << 59))
      fail("header claims " + std::to_string(S_) + " sequences and " + std::to_string(D_) +
           " document-index entries, more than a " + std::to_string(size) + "-byte file can hold (corrupt header)");
    const uint64_t expected = kHeaderBytes + 12 * S_ + 8 * D_;
    if (size != expected) {
      std::string msg = "size " + std::to_string(size) + " bytes, expected " + std::to_string(expected) + " for " +
                        std::to_string(S_) + " sequences and " + std::to_string(D_) + " document-index entries";
      if (size == expected + S_ && S_ > 0) msg += " (multimodal indices with per-sequence modes are not supported)";
      fail(msg);
    }
    lengths_ = p + kHeaderBytes;
    pointers_ = lengths_ + 4 * S_;
    doc_idx_ = pointers_ + 8 * S_;

    const uint64_t item = dtype_size(dtype_);
    uint64_t expect_ptr = 0;
    for (uint64_t i = 0; i < S_; ++i) {
      const int32_t len = raw_length(i);
      if (len < 0) fail("sequence " + std::to_string(i) + " has negative length " + std::to_string(len));
      const int64_t ptr = raw_pointer(i);
      if (ptr < 0 || static_cast<uint64_t>(ptr) != expect_ptr)
        fail("pointer of sequence " + std::to_string(i) + " is " + std::to_string(ptr) + ", expected " +
             std::to_string(expect_ptr) + " (pointers must follow from the lengths)");
      expect_ptr += static_cast<uint64_t>(len) * item;
      tokens_ += static_cast<uint64_t>(len);
    }
    validate_documents_and_bin(expect_ptr);
  }

  const uint8_t* lengths_ = nullptr;
  const uint8_t* pointers_ = nullptr;
  const uint8_t* doc_idx_ = nullptr;
};

// The fairseq-style "TNTIDX" index of old Megatron and Megatron-DeepSpeed (--dataset-impl lazy/cached):
// 56-byte header (magic, version, dtype code, element size, N, s, D as u64), then int64 dim_offsets[N+1],
// int64 data_offsets[N+1] (in elements), int64 sizes[s], int64 doc_idx[D]. Token data is one-dimensional, so
// s = N and sizes[i] is sequence i's length.
class LegacyIndexedDataset final : public MappedIndexedDataset {
 public:
  explicit LegacyIndexedDataset(const std::string& prefix) : MappedIndexedDataset(prefix) { validate(); }

 protected:
  int32_t raw_length(uint64_t i) const override { return static_cast<int32_t>(load<int64_t>(sizes_ + 8 * i)); }
  int64_t raw_pointer(uint64_t i) const override { return load<int64_t>(data_offsets_ + 8 * i) * item_; }
  int64_t raw_doc(uint64_t j) const override { return load<int64_t>(doc_idx_ + 8 * j); }

 private:
  static constexpr uint64_t kLegacyHeader = 56;

  void validate() {
    const uint8_t* p = idx_.data();
    const uint64_t size = idx_.size();
    if (size < kLegacyHeader)
      fail("size " + std::to_string(size) + " bytes, too small for the 56-byte TNTIDX header (truncated?)");
    const uint64_t version = load<uint64_t>(p + 8);
    if (version != 1) fail("TNTIDX index version " + std::to_string(version) + ", expected 1");
    const uint64_t code = load<uint64_t>(p + 16);
    // Legacy codes agree with Megatron's table for the integer types; 6 and 7 are floating point in either table.
    if (code == 6 || code == 7) fail("TNTIDX dtype code " + std::to_string(code) + " is floating point, not token ids");
    if (code < 1 || code > 8) fail("unknown TNTIDX dtype code " + std::to_string(code) + " at offset 16");
    dtype_ = static_cast<DType>(code);
    const uint64_t element_size = load<uint64_t>(p + 24);
    if (element_size != dtype_size(dtype_))
      fail("TNTIDX element size " + std::to_string(element_size) + " does not match dtype " + dtype_name(dtype_));
    item_ = static_cast<int64_t>(element_size);
    S_ = load<uint64_t>(p + 32);
    const uint64_t s = load<uint64_t>(p + 40);
    D_ = load<uint64_t>(p + 48);
    if (S_ > (uint64_t{1} << 58) || s > (uint64_t{1} << 58) || D_ > (uint64_t{1} << 58))
      fail("header claims " + std::to_string(S_) + " items, " + std::to_string(s) + " sizes and " +
           std::to_string(D_) + " document-index entries, more than a " + std::to_string(size) +
           "-byte file can hold (corrupt header)");
    const uint64_t expected = kLegacyHeader + 16 * (S_ + 1) + 8 * s + 8 * D_;
    if (size != expected)
      fail("size " + std::to_string(size) + " bytes, expected " + std::to_string(expected) + " for a TNTIDX index of " +
           std::to_string(S_) + " items, " + std::to_string(s) + " sizes and " + std::to_string(D_) +
           " document-index entries");
    if (s != S_)
      fail("TNTIDX index has " + std::to_string(s) + " sizes for " + std::to_string(S_) +
           " items: multi-dimensional items are not token sequences");
    const uint8_t* dim_offsets = p + kLegacyHeader;
    data_offsets_ = dim_offsets + 8 * (S_ + 1);
    sizes_ = data_offsets_ + 8 * (S_ + 1);
    doc_idx_ = sizes_ + 8 * s;
    if (load<int64_t>(data_offsets_) != 0) fail("data offset of item 0 is not 0");
    for (uint64_t i = 0; i < S_; ++i) {
      if (load<int64_t>(dim_offsets + 8 * (i + 1)) != static_cast<int64_t>(i + 1))
        fail("dim offset " + std::to_string(i + 1) + " is not " + std::to_string(i + 1) +
             " (items must be one-dimensional)");
      const int64_t len = load<int64_t>(sizes_ + 8 * i);
      if (len < 0 || len > std::numeric_limits<int32_t>::max())
        fail("item " + std::to_string(i) + " has length " + std::to_string(len));
      const int64_t a = load<int64_t>(data_offsets_ + 8 * i), b = load<int64_t>(data_offsets_ + 8 * (i + 1));
      if (b - a != len)
        fail("data offsets of item " + std::to_string(i) + " span " + std::to_string(b - a) +
             " elements but its size is " + std::to_string(len));
      tokens_ += static_cast<uint64_t>(len);
    }
    validate_documents_and_bin(tokens_ * element_size);
  }

  int64_t item_ = 2;
  const uint8_t* data_offsets_ = nullptr;
  const uint8_t* sizes_ = nullptr;
  const uint8_t* doc_idx_ = nullptr;
};

}  // namespace

std::unique_ptr<IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  // A writer killed while replacing this dataset may have left it moved aside: put it back first.
  if (::access((prefix + ".idx").c_str(), F_OK) != 0 || ::access((prefix + ".bin").c_str(), F_OK) != 0)
    recover_interrupted_publish(prefix);
  // The magic picks the layout; everything else is validated by the layout's reader.
  {
    MappedFile idx(prefix + ".idx");
    if (idx.size() >= 8 && std::memcmp(idx.data(), "TNTIDX\0\0", 8) == 0)
      return std::make_unique<LegacyIndexedDataset>(prefix);
  }
  return std::make_unique<MmapIndexedDataset>(prefix);
}

}  // namespace lmforge::data
