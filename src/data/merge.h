// defines: merge_datasets() (Megatron's tools/merge_datasets.py on IndexedDatasetWriter), dataset_prefixes_in_directory()
// Rule (../shared/docs/megatron-data-format.md §4): lengths concatenated, each further document index appended
// without its leading 0 and shifted by the sequences already present, .bin files copied byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace lmforge::data {

struct MergeSummary {
  std::vector<std::string> inputs;  // prefixes, in merge order
  DType dtype = DType::UInt16;
  uint64_t documents = 0;
  uint64_t empty_documents = 0;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  uint64_t bin_bytes = 0;
  uint64_t idx_bytes = 0;
};

// Prefixes of the X.bin/X.idx pairs in `dir`, sorted by file name as merge_datasets.py takes them. Files with other
// extensions are ignored; a .bin without its .idx (or the reverse), or no pair at all, is an Error.
std::vector<std::string> dataset_prefixes_in_directory(const std::string& dir);

// Validates every input first (format, one shared dtype, none is the output), then writes output_prefix.bin/.idx
// through IndexedDatasetWriter (temporary names, renamed when complete). Memory: the inputs' index sizes, never
// their .bin sizes.
MergeSummary merge_datasets(const std::vector<std::string>& input_prefixes, const std::string& output_prefix);

}  // namespace lmforge::data
