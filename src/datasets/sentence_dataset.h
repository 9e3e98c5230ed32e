// defines: SentenceDataset (what BertDataset and T5Dataset share: one split of a sentence-level dataset and its
//   samples map, loaded from or written to the cache), SentenceDatasets<D> (the three splits of one dataset) and
//   build_sentence_datasets<D>()
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "datasets/gpt_indices.h"
#include "datasets/samples_map.h"

namespace lmforge::datasets {

class SentenceDataset {
 public:
  // Megatron's len(dataset): rows of the samples map (whole epochs, ≥ the number requested).
  int64_t size() const { return map_.map.size(); }
  Split split() const { return split_; }
  const SamplesMap& samples_map() const { return map_.map; }
  const std::string& cache_file() const { return map_.path; }
  bool loaded_from_cache() const { return map_.loaded; }

 protected:
  SentenceDataset(std::shared_ptr<const SentenceSplits> data, Split split) : data_(std::move(data)), split_(split) {}
  // This split's samples map, from the cache (--data-cache-path; empty: beside the data) or built and written there.
  void load_samples_map(const std::string& cache_dir, const SamplesMapOptions& options) {
    map_ = cached_samples_map(data_->prefix, split_name(split_), cache_dir, data_->view(int(split_)), *data_->sizes,
                              options);
  }

  std::shared_ptr<const SentenceSplits> data_;
  Split split_;
  CachedSamplesMap map_;
};

// The three splits. split[k] is null when its document range is empty or no sample is asked of it (Megatron would
// build ~2^31 epochs for a count of 0). The map of each split is loaded from or written to the cache.
template <class Dataset>
struct SentenceDatasets {
  std::shared_ptr<const SentenceSplits> data;
  std::array<std::shared_ptr<const Dataset>, kNumSplits> split;
};

// Opens config.prefix, splits its documents by config.split and builds Dataset(data, split, count, config) for each
// split with documents and a positive count. samples_per_split: as Megatron's trainer asks them, e.g.
// samples_per_split(train_iters, global_batch, eval_iters, eval_interval) from gpt_indices.h (or --train-samples for
// the first).
template <class Dataset, class Config>
SentenceDatasets<Dataset> build_sentence_datasets(const Config& config,
                                                  const std::array<int64_t, 3>& samples_per_split) {
  SentenceDatasets<Dataset> out;
  out.data = std::make_shared<const SentenceSplits>(open_sentence_splits(config.prefix, config.split));
  for (int k = 0; k < kNumSplits; ++k) {
    if (out.data->bounds[size_t(k) + 1] <= out.data->bounds[size_t(k)] || samples_per_split[size_t(k)] <= 0) continue;
    out.split[size_t(k)] = std::make_shared<const Dataset>(out.data, Split(k), samples_per_split[size_t(k)], config);
  }
  return out;
}

}  // namespace lmforge::datasets
