// defines: libFuzzer target for the .idx reader: the input is a .idx file (beside a .bin whose size the first
//          byte chooses); IndexedDataset::open must refuse anything inconsistent with an Error, and every
//          sequence of a dataset it accepts must be readable without touching memory outside the files
#include <cstdint>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<uint8_t> bin(size_t(data[0]) * 8, 7);
  lmforge::fuzz::FileGuard idx{lmforge::fuzz::input_file(data + 1, size - 1, ".idx")};
  const std::string prefix = idx.path.substr(0, idx.path.size() - 4);
  lmforge::fuzz::FileGuard bin_file{lmforge::fuzz::input_file(bin.data(), bin.size(), ".bin")};
  try {
    auto ds = lmforge::data::IndexedDataset::open(prefix);
    std::vector<int32_t> tokens;
    for (uint64_t i = 0; i < ds->sequence_count() && i < 4096; ++i) ds->read_sequence(i, tokens);
    for (uint64_t j = 0; j <= ds->document_count() && j < 4096; ++j) (void)ds->document_index(j);
  } catch (const lmforge::Error&) {
  }
  return 0;
}
