// defines: lmforge::train::BertTask (Megatron's BertDataset samples as a train::Task: masked-LM labels and the
//          sentence-order target)
#pragma once
#include <string>
#include <vector>

#include "datasets/bert_dataset.h"
#include "families/sentence_task.h"
#include "train/model.h"

namespace lmforge::train {

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

}  // namespace lmforge::train
