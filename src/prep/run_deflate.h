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
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lmforge::prep {

class RunDeflater {
 public:
  // Runs of at least this many equal bytes become a literal and distance-1 matches.
  static constexpr size_t kMinRun = 8;

  // `data` [n bytes, n > 0] as one zlib stream (header, one final dynamic-Huffman block, Adler-32) at the start of
  // `out`; returns its size. `out` is grown to the worst case as needed and never shrunk (reused between calls
  // without clearing it again).
  size_t compress(const unsigned char* data, size_t n, std::vector<unsigned char>& out);

 private:
  std::vector<uint32_t> freq_;  // scratch for the literal/length counts
};

// Code lengths of an optimal prefix code for `freq` limited to `max_bits` (0 for an unused symbol). At least two
// symbols get a length (an unused one is added where fewer than two are used): zlib's inflate refuses an
// incomplete code for the code lengths and literals, and a two-symbol code is always complete.
std::vector<uint8_t> huffman_lengths(const std::vector<uint32_t>& freq, int max_bits);

}  // namespace lmforge::prep
