// defines: SamplesMap and build_samples_map() — Megatron's BERT/T5 samples map (helpers.cpp build_mapping), its
//   cache file name and .npy load/save; masked_lm_split_bounds() (--split over documents)
// Rules: ../shared/docs/bert-t5-reference-notes.md §2.2–§2.3 (M23 legacy dataset_utils.get_samples_mapping and
// megatron/core/datasets/helpers.cpp). Same documents, sizes and options → the same rows in the same order as
// Megatron, and a map file Megatron cached loads here (and ours in Megatron).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"

namespace lmforge::datasets {

// One sample: sentences [first, end) (global sentence ids) and the target length drawn for it.
struct SamplesMapRow {
  uint64_t first = 0;
  uint64_t end = 0;
  uint64_t target = 0;
};

// The rows, flat [n × 3], as Megatron stores them: uint32, or uint64 when the dataset has more than 2^32−1
// sentences (only one of the two vectors is used).
class SamplesMap {
 public:
  SamplesMap() = default;
  explicit SamplesMap(std::vector<uint32_t> rows) : rows32_(std::move(rows)) {}
  explicit SamplesMap(std::vector<uint64_t> rows) : rows64_(std::move(rows)), wide_(true) {}

  int64_t size() const { return int64_t(wide_ ? rows64_.size() / 3 : rows32_.size() / 3); }
  bool wide() const { return wide_; }
  SamplesMapRow row(int64_t i) const {
    const size_t k = size_t(i) * 3;
    if (wide_) return {rows64_[k], rows64_[k + 1], rows64_[k + 2]};
    return {rows32_[k], rows32_[k + 1], rows32_[k + 2]};
  }
  const std::vector<uint32_t>& rows32() const { return rows32_; }
  const std::vector<uint64_t>& rows64() const { return rows64_; }

 private:
  std::vector<uint32_t> rows32_;
  std::vector<uint64_t> rows64_;
  bool wide_ = false;
};

struct SamplesMapOptions {
  int64_t max_num_samples = 0;  // rows wanted (≥ 1); whole epochs are built until at least this many
  int32_t max_len = 0;          // seq_length − 3 (BERT: [CLS] A [SEP] B [SEP]) or encoder_seq_length − 2 (T5)
  double short_seq_prob = 0.1;  // a target below max_len with probability ≈ 1/round(1/p)
  int32_t seed = 1234;          // > 0 (Megatron's helper asserts it)
  int32_t min_sentences = 2;    // 2 with BERT's binary head, else 1
};

// Megatron's build_mapping over one split's documents. doc_idx is the split's view of the document index
// (documents d = 0 .. doc_idx.size()−2 own sentences [doc_idx[d], doc_idx[d+1])), sizes the whole dataset's sentence
// lengths; total_sentences decides uint32 vs uint64 rows (Megatron: sizes.size() > 2^32−1).
// Targets: one std::mt19937(seed) stream; shuffle: std::mt19937_64(seed + 1), row i ↔ row (draw mod (i+1)).
// Errors (where Megatron asserts or would loop ~2^31 epochs): seed ≤ 0, max_len < 2, short_seq_prob outside [0, 1],
// max_num_samples < 1, and no document of the split qualifying (fewer than min_sentences sentences, or a sentence
// longer than 512 tokens in a multi-sentence document) — e.g. document-level data with the binary head.
SamplesMap build_samples_map(std::span<const int64_t> doc_idx, std::span<const int32_t> sizes,
                             const SamplesMapOptions& options, const std::string& what = "samples map");

// "<prefix>_<split>_indexmap_<N>mns_<max_len>msl_<ssp:.2f>ssp_<seed>s.npy" — Megatron's name (legacy
// get_samples_mapping with num_epochs=None, as its BERT/T5 builders call it). It does not include the binary head
// or mask_prob; see SamplesMapCache.
std::string samples_map_file_name(const std::string& prefix, const std::string& split_name,
                                  const SamplesMapOptions& options);

// .npy [n, 3] '<u4' or '<u8', as np.save writes it.
void save_samples_map(const std::string& path, const SamplesMap& map);
// Reads and validates shape, dtype, first < end ≤ sentences, 1 ≤ target ≤ max_len; an Error names the file.
SamplesMap load_samples_map(const std::string& path, uint64_t sentences, int32_t max_len);

// The cached map of one split: loaded when the file exists, else built and saved (temporary name, then rename).
// A loaded map whose rows do not span exactly the sentences of the split's qualifying documents (one built for
// another --split or dataset: the name records neither) is an Error naming the file.
// cache_dir empty: beside the data ("<prefix>_<split>_indexmap…", as Megatron); else
// "<cache_dir>/<basename(prefix)>_<split>_indexmap…" (--data-cache-path).
struct CachedSamplesMap {
  SamplesMap map;
  std::string path;
  bool loaded = false;  // true: read from path; false: built and written there
};
CachedSamplesMap cached_samples_map(const std::string& prefix, const std::string& split_name,
                                    const std::string& cache_dir, std::span<const int64_t> doc_idx,
                                    std::span<const int32_t> sizes, const SamplesMapOptions& options);

// A sentence-level dataset split over documents, shared by the BERT/T5 datasets of its three splits.
struct SentenceSplits {
  std::string prefix;
  std::shared_ptr<const data::IndexedDataset> dataset;
  std::shared_ptr<const std::vector<int32_t>> sizes;  // every sentence's length
  std::vector<int64_t> doc_idx;                        // the whole document index, documents + 1 entries
  std::array<int64_t, 4> bounds{};                     // split k = documents [bounds[k], bounds[k+1])
  // Split k's view of doc_idx (doc_idx[b_k : b_{k+1} + 1]); sentence ids stay global.
  std::span<const int64_t> view(int k) const {
    return std::span<const int64_t>(doc_idx).subspan(size_t(bounds[size_t(k)]),
                                                     size_t(bounds[size_t(k) + 1] - bounds[size_t(k)] + 1));
  }
};
// Opens PREFIX.{bin,idx} and splits its documents by --split with M23's shift rule (megatron-data-format.md §6.1;
// Megatron's BERT/T5 split documents, not sequences).
SentenceSplits open_sentence_splits(const std::string& prefix, const std::string& split);

}  // namespace lmforge::datasets
