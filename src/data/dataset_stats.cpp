// defines: compute_dataset_stats(), percentile_linear(), format_dataset_stats_json()
#include "data/dataset_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace lmforge::data {

double percentile_linear(const int32_t* sorted, uint64_t n, double q) {
  // numpy: position (n-1)·q/100 between the order statistics around it.
  const double pos = (static_cast<double>(n) - 1.0) * q / 100.0;
  const uint64_t lo = static_cast<uint64_t>(std::floor(pos));
  const uint64_t hi = std::min<uint64_t>(lo + 1, n - 1);
  const double frac = pos - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) + (static_cast<double>(sorted[hi]) - static_cast<double>(sorted[lo])) * frac;
}

DatasetStats compute_dataset_stats(const IndexedDataset& ds) {
  DatasetStats s;
  s.prefix = ds.prefix();
  s.dtype = ds.dtype();
  s.sequences = ds.sequence_count();
  s.documents = ds.document_count();
  s.tokens = ds.token_count();
  s.bin_bytes = ds.bin_bytes();
  s.idx_bytes = ds.idx_bytes();
  for (uint64_t j = 0; j < s.documents; ++j) s.empty_documents += ds.document_index(j) == ds.document_index(j + 1);
  if (s.sequences == 0) return s;
  std::vector<int32_t> lengths(s.sequences);
  for (uint64_t i = 0; i < s.sequences; ++i) lengths[i] = ds.sequence_length(i);
  std::sort(lengths.begin(), lengths.end());
  LengthPercentiles& p = s.sequence_lengths;
  p.min = lengths.front();
  p.max = lengths.back();
  p.p50 = percentile_linear(lengths.data(), s.sequences, 50);
  p.p90 = percentile_linear(lengths.data(), s.sequences, 90);
  p.p99 = percentile_linear(lengths.data(), s.sequences, 99);
  p.mean = static_cast<double>(s.tokens) / static_cast<double>(s.sequences);
  return s;
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string format_dataset_stats_json(const DatasetStats& s) {
  const LengthPercentiles& p = s.sequence_lengths;
  std::string out = "{";
  out += "\"prefix\": " + json_quote(s.prefix);
  out += ", \"dtype\": " + json_quote(dtype_name(s.dtype));
  out += ", \"dtype_code\": " + std::to_string(static_cast<int>(s.dtype));
  out += ", \"sequences\": " + std::to_string(s.sequences);
  out += ", \"documents\": " + std::to_string(s.documents);
  out += ", \"empty_documents\": " + std::to_string(s.empty_documents);
  out += ", \"tokens\": " + std::to_string(s.tokens);
  out += ", \"bin_bytes\": " + std::to_string(s.bin_bytes);
  out += ", \"idx_bytes\": " + std::to_string(s.idx_bytes);
  out += ", \"sequence_length\": {\"min\": " + std::to_string(p.min) + ", \"p50\": " + num(p.p50) +
         ", \"p90\": " + num(p.p90) + ", \"p99\": " + num(p.p99) + ", \"max\": " + std::to_string(p.max) +
         ", \"mean\": " + num(p.mean) + "}";
  return out + "}";
}

}  // namespace lmforge::data
