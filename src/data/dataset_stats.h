// defines: DatasetStats and compute_dataset_stats(): the counts and sequence-length distribution `lmforge inspect`
//          prints, plus format_dataset_stats_json()
#pragma once
#include "util/json_text.h"
#include <cstdint>
#include <string>

#include "data/indexed_dataset.h"

namespace lmforge::data {

struct LengthPercentiles {
  int64_t min = 0, max = 0;
  double p50 = 0, p90 = 0, p99 = 0;  // numpy.percentile's default (linear interpolation between order statistics)
  double mean = 0;
};

struct DatasetStats {
  std::string prefix;
  DType dtype = DType::UInt16;
  uint64_t sequences = 0;
  uint64_t documents = 0;
  uint64_t empty_documents = 0;  // documents with 0 sequences (repeated document-index entries)
  uint64_t tokens = 0;
  uint64_t bin_bytes = 0;
  uint64_t idx_bytes = 0;
  LengthPercentiles sequence_lengths;  // over sequences; all zero when there are none
};

// One pass over the index; keeps a copy of the lengths (4 bytes per sequence) to take the percentiles.
DatasetStats compute_dataset_stats(const IndexedDataset& dataset);

// q in [0, 100] over ascending `sorted` (non-empty), as numpy.percentile(..., method="linear").
double percentile_linear(const int32_t* sorted, uint64_t n, double q);

// One JSON object holding every field, for scripts.
std::string format_dataset_stats_json(const DatasetStats& stats);

}  // namespace lmforge::data
