// defines: lmforge::train::SentenceTask (a train::Task over the three splits of one sentence-level dataset: what the
//          masked-LM tasks of BERT and T5 share)
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "datasets/sentence_dataset.h"
#include "train/model.h"
#include "util/error.h"

namespace lmforge::train {

// What the masked-LM tasks share (BertTask, T5Task): the three splits of one sentence-level dataset
// (datasets::SentenceDatasets), the bounds check of a sample index, the summary lines and the --print-samples line.
template <class Dataset, class Sample>
class SentenceTask : public Task {
 public:
  bool has_split(SplitKind split) const override { return datasets_.split[(int)split] != nullptr; }
  int64_t split_size(SplitKind split) const override;
  std::string summary() const override;
  std::string sample_json(SplitKind split, int64_t index) override;

 protected:
  explicit SentenceTask(datasets::SentenceDatasets<Dataset> datasets) : datasets_(std::move(datasets)) {}
  // The split's dataset when it holds sample `index`; an Error naming both otherwise.
  const Dataset& dataset(SplitKind split, int64_t index) const;
  // One sample as its dataset's JSON line (bert_sample_json, t5_sample_json).
  virtual std::string sample_line(datasets::Split split, int64_t index, const Sample& sample) const = 0;

  datasets::SentenceDatasets<Dataset> datasets_;
  Sample sample_;
};

template <class Dataset, class Sample>
int64_t SentenceTask<Dataset, Sample>::split_size(SplitKind split) const {
  const auto& d = datasets_.split[(int)split];
  return d ? d->size() : 0;
}

template <class Dataset, class Sample>
const Dataset& SentenceTask<Dataset, Sample>::dataset(SplitKind split, int64_t index) const {
  const auto& d = datasets_.split[(int)split];
  const int64_t available = d ? d->size() : 0;
  if (index < 0 || index >= available)
    throw Error(std::string("the ") + split_kind_name(split) + " split has " + std::to_string(available) +
                " samples; sample " + std::to_string(index) +
                " was asked (the flags differ from the run that built it?)");
  return *d;
}

template <class Dataset, class Sample>
std::string SentenceTask<Dataset, Sample>::summary() const {
  std::string out;
  for (int k = 0; k < 3; k++) {
    const auto& d = datasets_.split[k];
    if (!d) continue;
    out += name() + " " + split_kind_name(SplitKind(k)) + ": " + std::to_string(d->size()) +
           " samples, samples map " + d->cache_file() + (d->loaded_from_cache() ? " (cached)" : " (built)") + "\n";
  }
  return out;
}

template <class Dataset, class Sample>
std::string SentenceTask<Dataset, Sample>::sample_json(SplitKind split, int64_t index) {
  dataset(split, index).sample(index, sample_);
  std::string line = sample_line((datasets::Split)split, index, sample_);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

}  // namespace lmforge::train
