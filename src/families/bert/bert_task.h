// defines: lmforge::train::BertTask (Megatron's BertDataset samples as a train::Task: masked-LM labels and the
//          sentence-order target), T5Task (Megatron's T5Dataset samples: span corruption with sentinels)
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datasets/bert_dataset.h"
#include "datasets/t5_dataset.h"
#include "train/model.h"

namespace lmforge::train {

// What BertTask and T5Task share: the three splits of one sentence-level dataset (datasets::SentenceDatasets), the
// bounds check of a sample index, the summary lines and the --print-samples line. Instantiated for both in
// bert_task.cpp.
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

// One sample per row of the micro-batch, as Megatron's pretrain_bert.py get_batch hands them to the model:
// tokens = text, targets = labels (−1 where nothing is predicted), loss_mask, token_types = types, padding =
// padding_mask, labels = is_random (one per row). Losses: "lm loss" and, with the binary head, "sop loss".
class BertTask final : public SentenceTask<datasets::BertDataset, datasets::BertSample> {
 public:
  BertTask(datasets::BertDatasets datasets, bool binary_head);
  std::string name() const override { return "bert"; }
  std::vector<std::string> loss_names() const override;
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;

 private:
  std::string sample_line(datasets::Split split, int64_t index, const datasets::BertSample& sample) const override;

  bool binary_head_;
};

// Megatron's T5Dataset samples as pretrain_t5.py hands them to the model: tokens = text_enc [B,T], padding = its
// padding (id >= 1, Megatron's mask rule), decoder_tokens = text_dec [B,Td], decoder_padding, targets = labels (−1
// where nothing is predicted) and loss_mask over the decoder positions. One loss, "lm loss".
class T5Task final : public SentenceTask<datasets::T5Dataset, datasets::T5Sample> {
 public:
  explicit T5Task(datasets::T5Datasets datasets);
  std::string name() const override { return "t5"; }
  std::vector<std::string> loss_names() const override { return {"lm loss"}; }
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;

 private:
  // The fields Megatron's T5Dataset returns except the three 2-D masks, which follow from the padding.
  std::string sample_line(datasets::Split split, int64_t index, const datasets::T5Sample& sample) const override;
};

}  // namespace lmforge::train
