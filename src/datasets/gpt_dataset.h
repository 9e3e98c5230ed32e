// defines: GptDataset (one indexed dataset, one split: Megatron M23 GPTDataset with its .npy index cache),
//   GptSampleSource (what the trainer reads: --data-path blend × --split → L+1-token samples per split),
//   gpt_description() and python_json_string() (the cache key text, byte-identical to Megatron's json.dumps)
// Rules: ../shared/docs/megatron-data-format.md §6 (M23). Same seed, split, lengths and data → same samples, in the
// same order, as Megatron's GPTDataset / BlendedDataset; index files interchangeable with Megatron's cache.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "datasets/gpt_indices.h"

namespace lmforge::datasets {

// All sequence lengths of a dataset, as Megatron's int32 sizes array (Error beyond 2^31−1 sequences).
std::shared_ptr<const std::vector<int32_t>> sequence_sizes(const data::IndexedDataset& dataset);

// Python json.dumps of a str (ensure_ascii): \" \\ \n \r \t \b \f, other bytes outside ' '..'~' as \uXXXX
// (surrogate pairs above U+FFFF; bytes that are not UTF-8 as \udcXX, as Python's surrogateescape paths are).
std::string python_json_string(const std::string& s);
// json.dumps(OrderedDict(class, path_prefix, num_samples, index_split, split, random_seed, sequence_length), indent=4).
std::string gpt_description(const std::string& path_prefix, int64_t num_samples, Split index_split,
                            const std::string& split, uint32_t seed, int32_t seq_length);

struct GptDatasetConfig {
  std::string split = "969, 30, 1";  // the --split text as given: it enters the cache key verbatim
  uint32_t seed = 1234;
  int32_t seq_length = 1024;
  std::string cache_path;  // --data-cache-path; empty: <path_prefix>/cache/GPTDataset_indices (M23's default)
};

// One split of one dataset. The constructor loads the indices from the cache when all four files exist (their
// shapes, dtypes and values are validated; a bad cache is an Error naming the file), else builds them and writes
// the cache (each file under a temporary name, then renamed). An unwritable cache directory is an Error.
class GptDataset {
 public:
  GptDataset(std::shared_ptr<const data::IndexedDataset> dataset, std::string path_prefix, Split index_split,
             int64_t begin, int64_t end, int64_t num_samples, const GptDatasetConfig& config);
  // The same, with the dataset's sequence lengths already read (shared by the splits of one dataset).
  GptDataset(std::shared_ptr<const data::IndexedDataset> dataset, std::shared_ptr<const std::vector<int32_t>> sizes,
             std::string path_prefix, Split index_split, int64_t begin, int64_t end, int64_t num_samples,
             const GptDatasetConfig& config);

  // Megatron's len(dataset): samples in whole epochs, ≥ the number requested.
  int64_t size() const { return int64_t(indices_.shuffle_index.size()); }
  // Sample i: the L+1 token ids (tokens = [:-1], labels = [1:]).
  void sample(int64_t i, std::vector<int32_t>& tokens) const;

  const GptIndices& indices() const { return indices_; }
  const std::string& description() const { return description_; }
  const std::string& md5() const { return md5_; }
  const std::string& cache_dir() const { return cache_dir_; }
  bool loaded_from_cache() const { return from_cache_; }
  // "<cache_dir>/<md5>-GPTDataset-<suffix>", suffix one of description.txt, document_index.npy, sample_index.npy,
  // shuffle_index.npy.
  std::string cache_file(const std::string& suffix) const;

 private:
  bool try_load_cache(int64_t begin, int64_t end, int64_t num_samples);
  void write_cache() const;

  std::shared_ptr<const data::IndexedDataset> dataset_;
  std::shared_ptr<const std::vector<int32_t>> sizes_;
  int32_t seq_length_;
  GptIndices indices_;
  std::string description_, md5_, cache_dir_;
  bool from_cache_ = false;
};

// The trainer's view: --data-path (one prefix, or "w1 p1 w2 p2 …"), --split, seed, seq_length and the samples wanted
// per split (samples_per_split()). With a blend each dataset's split asks ceil(w·n·1.005) samples and a split's size
// is their sum, interleaved by Megatron's greedy blending indices (not cached: they are cheap to rebuild).
// A single weighted pair ("1 p") is a blend of one, as in Megatron. A split is built when its weight in --split is > 0, its range is non-empty and samples are asked of it.
class GptSampleSource {
 public:
  GptSampleSource(const std::vector<std::string>& data_path, const GptDatasetConfig& config,
                  const std::array<int64_t, 3>& samples_per_split);
  ~GptSampleSource();

  bool has_split(Split split) const;
  // Samples available in the split (0 if it was not built); ≥ the number asked.
  int64_t size(Split split) const;
  // Sample i of the split, L+1 token ids. Thread-safe (the data is read through mmap).
  void sample(Split split, int64_t i, std::vector<int32_t>& tokens) const;
  int32_t seq_length() const { return config_.seq_length; }
  // One line per split and dataset: range, epochs, samples, cache hit/miss and file — for the training log.
  std::string summary() const;

 private:
  struct SplitData;
  GptDatasetConfig config_;
  std::vector<std::shared_ptr<const data::IndexedDataset>> datasets_;
  std::vector<std::unique_ptr<SplitData>> splits_;  // kNumSplits entries, null when not built
};

}  // namespace lmforge::datasets
