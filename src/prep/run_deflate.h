// defines: RunDeflater: a zlib-format (RFC 1950/1951) compressor for the arrays of NVIDIA's BERT HDF5 shards that
//          codes literals with one dynamic Huffman table and runs of a repeated byte as distance-1 matches, and
//          finds no other matches.
//
// Why not libdeflate or zlib: their match finders hash every byte position, which made deflating 38 % of
// `prep --output-format nvidia-hdf5` (libdeflate level 1, ~190 MB/s on the token ids; zlib at h5py's level 4 took
// 61 %). These arrays are small integers in little-endian words, padded with zeros, and 0/1 masks: their
// redundancy is the skewed byte values (Huffman coding) and the runs (padding, masks), which cost one pass here;
// repeated phrases, which a match finder would add, are few within a chunk. The output is plain deflate, read by
// HDF5's gzip filter (h5py, NVIDIA's loader, lmforge's reader) like any other.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace lmforge::prep {

// An allocator whose resize() leaves new bytes uninitialized: a stream buffer is sized for the worst case (about
// 1.75 times the input) and written only as far as the stream goes, so zero-filling it touched pages for nothing.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialization: no zeroing
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using StreamBuffer = std::vector<unsigned char, UninitializedAllocator<unsigned char>>;

// One literal/length code (lengths at most 14 bits, so four literals fit between two flushes of the 64-bit bit
// buffer) and its block header, for one stream or for many similar ones.
class DeflateCode {
 public:
  static constexpr int kMaxBits = 14;
  // Fitted to these counts of the 286 literal/length symbols (the end of block is given a count if it has none).
  explicit DeflateCode(const std::vector<uint32_t>& counts);
  // Shaped by the symbols of `sample` and covering every byte and match length, so it codes any data: the chunks
  // of one dataset, which all look alike, are compressed with their first chunk's code instead of each counting its
  // symbols and building its own (that took a third of the compressing).
  static DeflateCode covering(const unsigned char* sample, size_t n);

 private:
  friend class RunDeflater;
  std::vector<uint8_t> lengths_;
  std::vector<uint16_t> codes_;             // bit-reversed for LSB-first output
  std::array<uint32_t, 256> literal_{};     // code | length << 16: one load per literal
  std::vector<std::pair<uint32_t, int>> header_;  // the block header's fields as (bits, count)
};

class RunDeflater {
 public:
  // Runs of at least this many equal bytes become a literal and distance-1 matches.
  static constexpr size_t kMinRun = 8;

  // `data` [n bytes, n > 0] as one zlib stream (header, one final dynamic-Huffman block, Adler-32) at the start of
  // `out`; returns its size. `out` is grown to the worst case as needed and never shrunk (reused between calls
  // without clearing it again). This one fits the code to the data.
  size_t compress(const unsigned char* data, size_t n, StreamBuffer& out);
  // The same with a given code (DeflateCode::covering for data it was not fitted to).
  size_t compress(const unsigned char* data, size_t n, const DeflateCode& code, StreamBuffer& out);

 private:
  std::vector<uint32_t> freq_;  // scratch for the literal/length counts
};

// Code lengths of an optimal prefix code for `freq` limited to `max_bits` (0 for an unused symbol). At least two
// symbols get a length (an unused one is added where fewer than two are used): zlib's inflate refuses an
// incomplete code for the code lengths and literals, and a two-symbol code is always complete.
std::vector<uint8_t> huffman_lengths(const std::vector<uint32_t>& freq, int max_bits);

}  // namespace lmforge::prep
