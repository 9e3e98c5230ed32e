// defines: .npy v1.0 read/write (numpy 1.24's exact header bytes) and md5_hex — for Megatron's index cache files
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lmforge::datasets {

// A little-endian C-order array as np.save writes it; descr is "<i2", "<i4", "<u4" or "<i8".
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // raw little-endian bytes
};

// The full header (magic, version 1.0, length, dict, padding to 64 bytes, '\n'), byte-identical to numpy 1.24
// np.save: keys sorted, 21-digit growth room after the first axis, padded with spaces so data starts at a multiple of 64.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);
size_t npy_itemsize(const std::string& descr);

// Writes to "<path>.tmp-<pid>" and renames into place, so a reader never sees a half-written file.
void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data);
// Reads a v1.0/v2.0 file; Error (with the path) for a bad magic, a Fortran-order array, big-endian data or a size that
// does not match the shape.
NpyArray read_npy(const std::string& path);

// MD5 of the bytes, as 32 lowercase hex digits (hashlib.md5(...).hexdigest()).
std::string md5_hex(const std::string& bytes);

}  // namespace lmforge::datasets
