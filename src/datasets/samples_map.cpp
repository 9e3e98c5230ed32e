// defines: build_samples_map (Megatron's build_mapping), its cache name, .npy load/save, cached_samples_map
#include "datasets/samples_map.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "datasets/gpt_dataset.h"
#include "datasets/gpt_indices.h"
#include "datasets/npy.h"
#include "util/error.h"

namespace lmforge::datasets {

namespace {

// Megatron's LONG_SENTENCE_LEN: a multi-sentence document with a longer sentence is skipped, whatever seq_length is.
constexpr int32_t kLongSentence = 512;

// get_target_sample_len: with ratio r > 0, one 32-bit draw u gives 2 + u mod (max_len − 1) when u mod r == 0, else
// max_len; with r = 0 no draw. The short targets lie in [2, max_len].
uint32_t draw_target(int32_t ratio, int32_t max_len, std::mt19937& rng) {
  if (ratio == 0) return uint32_t(max_len);
  const uint32_t u = uint32_t(rng());
  if (u % uint32_t(ratio) == 0) return 2 + u % uint32_t(max_len - 1);
  return uint32_t(max_len);
}

// The rows of all epochs, unshuffled, appended to `rows` (uint32 or uint64 elements).
template <typename T>
void emit_epochs(std::span<const int64_t> doc_idx, std::span<const int32_t> sizes, const SamplesMapOptions& o,
                 int32_t ratio, const std::string& what, std::vector<T>& rows) {
  std::mt19937 rng(uint32_t(o.seed));
  const size_t docs = doc_idx.size() - 1;
  // Megatron's epoch limit is 2^31−2; an epoch that adds no row means none ever will (the error below), and every
  // other epoch adds ≥ 1 row per qualifying document, so the count limit always ends the loop first.
  while (int64_t(rows.size() / 3) < o.max_num_samples) {
    const size_t before = rows.size();
    for (size_t d = 0; d < docs; ++d) {
      const int64_t first = doc_idx[d], last = doc_idx[d + 1];
      int64_t remain = last - first;
      if (remain < o.min_sentences) continue;
      if (remain > 1) {
        bool long_sentence = false;
        for (int64_t s = first; s < last && !long_sentence; ++s) long_sentence = sizes[size_t(s)] > kLongSentence;
        if (long_sentence) continue;
      }
      // Walk the sentences; close a row once the target is reached with ≥ 2 sentences left after it and enough
      // sentences in it, or at the document's end. A new target is drawn after every row (the last one is unused).
      int64_t start = first, len = 0, count = 0;
      uint32_t target = draw_target(ratio, o.max_len, rng);
      for (int64_t s = first; s < last; ++s) {
        len += sizes[size_t(s)];
        ++count;
        --remain;
        if ((len >= int64_t(target) && remain > 1 && count >= o.min_sentences) || remain == 0) {
          rows.push_back(T(start));
          rows.push_back(T(s + 1));
          rows.push_back(T(target));
          start = s + 1;
          target = draw_target(ratio, o.max_len, rng);
          len = 0;
          count = 0;
        }
      }
    }
    if (rows.size() == before)
      throw Error(what + ": no document qualifies for a sample (each needs ≥ " + std::to_string(o.min_sentences) +
                  " sentence(s), and a multi-sentence document none longer than 512 tokens); " +
                  (o.min_sentences > 1 ? "document-level data (one sequence per document) needs "
                                         "--bert-no-binary-head or sentence-level data (prep --split-sentences); "
                                       : "") +
                  "Megatron would loop 2^31 epochs here and end with an empty dataset");
  }
}

// Fisher–Yates from the end with std::mt19937_64(seed + 1): row i ↔ row (draw mod (i + 1)), each row as a whole.
template <typename T>
void shuffle_rows(std::vector<T>& rows, int32_t seed) {
  std::mt19937_64 rng(uint64_t(int64_t(seed) + 1));
  const int64_t n = int64_t(rows.size() / 3);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = int64_t(rng() % uint64_t(i + 1));
    for (int k = 0; k < 3; ++k) std::swap(rows[size_t(3 * i + k)], rows[size_t(3 * j + k)]);
  }
}

void check_options(const SamplesMapOptions& o, const std::string& what) {
  if (o.seed <= 0) throw Error(what + ": seed must be > 0 (Megatron's build_mapping asserts seed > 0), got " +
                               std::to_string(o.seed));
  if (o.max_num_samples < 1) throw Error(what + ": at least one sample must be requested");
  if (!(o.short_seq_prob >= 0 && o.short_seq_prob <= 1))
    throw Error(what + ": short_seq_prob must be in [0, 1], got " + std::to_string(o.short_seq_prob));
  if (o.max_len < (o.short_seq_prob > 0 ? 2 : 1))
    throw Error(what + ": sequence length too short (target length " + std::to_string(o.max_len) + ")");
  if (o.min_sentences < 1) throw Error(what + ": min_sentences must be ≥ 1");
}

// Whether build_samples_map emits rows for document d of the view: ≥ min_sentences sentences, and no sentence over
// 512 tokens unless it is the only one.
bool qualifies(std::span<const int64_t> doc_idx, std::span<const int32_t> sizes, size_t d, int32_t min_sentences) {
  const int64_t first = doc_idx[d], last = doc_idx[d + 1];
  if (last - first < min_sentences) return false;
  if (last - first > 1)
    for (int64_t s = first; s < last; ++s)
      if (sizes[size_t(s)] > kLongSentence) return false;
  return true;
}

// A cached map belongs to this split only if its rows span exactly the sentences the split's qualifying documents
// span: whole epochs start a row at the first qualifying document's first sentence and end one at the last
// qualifying document's end, and no row leaves the split. Megatron's cache name records neither --split nor the
// dataset, so a map built for another split of the same prefix is found under the same name (Megatron uses it
// silently: its samples then all differ from a fresh run's).
void check_map_fits_split(const SamplesMap& map, const std::string& path, std::span<const int64_t> doc_idx,
                          std::span<const int32_t> sizes, int32_t min_sentences) {
  if (doc_idx.size() < 2) throw Error(path + ": the split has no document");
  const size_t docs = doc_idx.size() - 1;
  int64_t lo = -1, hi = -1;
  for (size_t d = 0; d < docs && lo < 0; ++d)
    if (qualifies(doc_idx, sizes, d, min_sentences)) lo = doc_idx[d];
  for (size_t d = docs; d > 0 && hi < 0; --d)
    if (qualifies(doc_idx, sizes, d - 1, min_sentences)) hi = doc_idx[d];
  uint64_t first = std::numeric_limits<uint64_t>::max(), end = 0;
  for (int64_t i = 0; i < map.size(); ++i) {
    const SamplesMapRow r = map.row(i);
    first = std::min(first, r.first);
    end = std::max(end, r.end);
  }
  if (map.size() > 0 && lo >= 0 && first == uint64_t(lo) && end == uint64_t(hi)) return;
  throw Error(path + ": this cached samples map's rows span sentences [" +
              (map.size() > 0 ? std::to_string(first) + ", " + std::to_string(end) : std::string("none")) +
              ") but this split's samples span [" + std::to_string(lo) + ", " + std::to_string(hi) +
              ") (its documents hold sentences [" + std::to_string(doc_idx.front()) + ", " +
              std::to_string(doc_idx.back()) + ")): the map was built for another --split, dataset or binary-head "
              "setting, none of which Megatron's cache name records; delete the file (or give --data-cache-path "
              "another directory)");
}

}  // namespace

SamplesMap build_samples_map(std::span<const int64_t> doc_idx, std::span<const int32_t> sizes,
                             const SamplesMapOptions& options, const std::string& what) {
  check_options(options, what);
  if (doc_idx.size() < 2) throw Error(what + ": the split has no document");
  for (size_t d = 0; d + 1 < doc_idx.size(); ++d)
    if (doc_idx[d] < 0 || doc_idx[d] > doc_idx[d + 1] || uint64_t(doc_idx[d + 1]) > sizes.size())
      throw Error(what + ": document index entry " + std::to_string(d) + " is out of order or beyond the " +
                  std::to_string(sizes.size()) + " sentences");
  // short_seq_ratio = C round(1/p) (half away from zero), 0 when p = 0.
  const int32_t ratio = options.short_seq_prob > 0 ? int32_t(std::round(1.0 / options.short_seq_prob)) : 0;
  if (sizes.size() > std::numeric_limits<uint32_t>::max()) {
    std::vector<uint64_t> rows;
    emit_epochs(doc_idx, sizes, options, ratio, what, rows);
    shuffle_rows(rows, options.seed);
    return SamplesMap(std::move(rows));
  }
  std::vector<uint32_t> rows;
  emit_epochs(doc_idx, sizes, options, ratio, what, rows);
  shuffle_rows(rows, options.seed);
  return SamplesMap(std::move(rows));
}

std::string samples_map_file_name(const std::string& prefix, const std::string& split_name,
                                  const SamplesMapOptions& options) {
  char ssp[64];
  std::snprintf(ssp, sizeof ssp, "%.2f", options.short_seq_prob);  // '{:0.2f}': exact value, ties to even as Python
  return prefix + "_" + split_name + "_indexmap_" + std::to_string(options.max_num_samples) + "mns_" +
         std::to_string(options.max_len) + "msl_" + ssp + "ssp_" + std::to_string(options.seed) + "s.npy";
}

void save_samples_map(const std::string& path, const SamplesMap& map) {
  const std::vector<int64_t> shape = {map.size(), 3};
  if (map.wide()) write_npy(path, "<u8", shape, map.rows64().data());
  else write_npy(path, "<u4", shape, map.rows32().data());
}

SamplesMap load_samples_map(const std::string& path, uint64_t sentences, int32_t max_len) {
  NpyArray a = read_npy(path);
  if (a.shape.size() != 2 || a.shape[1] != 3)
    throw Error(path + ": a samples map has shape (n, 3); this file is not one");
  if (a.descr != "<u4" && a.descr != "<u8")
    throw Error(path + ": samples map dtype " + a.descr + ", expected uint32 or uint64");
  const size_t n = size_t(a.shape[0]) * 3;
  SamplesMap map;
  if (a.descr == "<u4") {
    std::vector<uint32_t> rows(n);
    if (n) std::memcpy(rows.data(), a.data.data(), n * 4);
    map = SamplesMap(std::move(rows));
  } else {
    std::vector<uint64_t> rows(n);
    if (n) std::memcpy(rows.data(), a.data.data(), n * 8);
    map = SamplesMap(std::move(rows));
  }
  for (int64_t i = 0; i < map.size(); ++i) {
    const SamplesMapRow r = map.row(i);
    if (!(r.first < r.end && r.end <= sentences && r.target >= 1 && r.target <= uint64_t(max_len)))
      throw Error(path + ": row " + std::to_string(i) + " (" + std::to_string(r.first) + ", " +
                  std::to_string(r.end) + ", " + std::to_string(r.target) + ") does not fit a dataset of " +
                  std::to_string(sentences) + " sentences and target length " + std::to_string(max_len) +
                  " (a stale or foreign cache file: delete it)");
  }
  return map;
}

CachedSamplesMap cached_samples_map(const std::string& prefix, const std::string& split_name,
                                    const std::string& cache_dir, std::span<const int64_t> doc_idx,
                                    std::span<const int32_t> sizes, const SamplesMapOptions& options) {
  namespace fs = std::filesystem;
  const std::string where =
      cache_dir.empty() ? prefix : (fs::path(cache_dir) / fs::path(prefix).filename()).string();
  CachedSamplesMap out;
  out.path = samples_map_file_name(where, split_name, options);
  check_options(options, out.path);
  if (fs::exists(out.path)) {
    out.map = load_samples_map(out.path, sizes.size(), options.max_len);
    check_map_fits_split(out.map, out.path, doc_idx, sizes, options.min_sentences);
    out.loaded = true;
    return out;
  }
  out.map = build_samples_map(doc_idx, sizes, options, prefix + " (" + split_name + " split)");
  if (!cache_dir.empty()) {
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    if (ec) throw Error(cache_dir + ": cannot create the cache directory: " + ec.message());
  }
  save_samples_map(out.path, out.map);
  return out;
}

SentenceSplits open_sentence_splits(const std::string& prefix, const std::string& split) {
  SentenceSplits s;
  s.prefix = prefix;
  s.dataset = data::IndexedDataset::open(prefix);
  s.sizes = sequence_sizes(*s.dataset);
  const uint64_t docs = s.dataset->document_count();
  s.doc_idx.resize(docs + 1);
  for (uint64_t j = 0; j <= docs; ++j) s.doc_idx[j] = s.dataset->document_index(j);
  s.bounds = split_bounds(parse_split(split), int64_t(docs));
  return s;
}

}  // namespace lmforge::datasets
