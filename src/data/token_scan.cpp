// defines: max_token_id()
#include "data/token_scan.h"

#include <sys/mman.h>

#include <algorithm>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "util/error.h"

namespace lmforge::data {
namespace {

template <class T>
int64_t max_of(const uint8_t* bytes, size_t n) {
  const T* p = reinterpret_cast<const T*>(bytes);
  int64_t m = -1;
#pragma omp parallel for reduction(max : m) schedule(static)
  for (size_t i = 0; i < n; i++) m = std::max<int64_t>(m, (int64_t)p[i]);
  return m;
}

}  // namespace

int64_t max_token_id(const std::string& prefix) {
  const DType dtype = IndexedDataset::open(prefix)->dtype();  // validates the .idx and names the dtype
  MappedFile bin(prefix + ".bin");
  if (bin.size() == 0) return -1;
  const size_t width = dtype_size(dtype);
  if (bin.size() % width != 0)
    throw Error(bin.path() + ": " + std::to_string(bin.size()) + " bytes is not a whole number of " +
                dtype_name(dtype) + " tokens");
  ::madvise(const_cast<uint8_t*>(bin.data()), bin.size(), MADV_SEQUENTIAL);
  const size_t n = bin.size() / width;
  switch (dtype) {
    case DType::UInt8: return max_of<uint8_t>(bin.data(), n);
    case DType::Int16: return max_of<int16_t>(bin.data(), n);
    case DType::UInt16: return max_of<uint16_t>(bin.data(), n);
    case DType::Int32: return max_of<int32_t>(bin.data(), n);
    case DType::Int64: return max_of<int64_t>(bin.data(), n);
    default: throw Error(bin.path() + ": token dtype " + dtype_name(dtype) + " cannot hold token ids");
  }
}

}  // namespace lmforge::data
