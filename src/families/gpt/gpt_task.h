// defines: lmforge::train::GPTTask (next-token prediction over Megatron's GPT samples as a train::Task)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/gpt_dataset.h"
#include "train/model.h"

namespace lmforge::train {

// Megatron's GPT data: each sample is seq_length + 1 tokens of the (blended) dataset in GPTDataset's order; the
// inputs are its first seq_length tokens, the targets the last seq_length.
class GPTTask final : public Task {
 public:
  GPTTask(std::unique_ptr<datasets::GptSampleSource> source, int seq_length);
  std::string name() const override { return "gpt"; }
  std::vector<std::string> loss_names() const override { return {"lm loss"}; }
  bool has_split(SplitKind split) const override;
  int64_t split_size(SplitKind split) const override;
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;
  std::string summary() const override { return source_->summary(); }
  std::string sample_json(SplitKind split, int64_t index) override;

 private:
  std::unique_ptr<datasets::GptSampleSource> source_;
  int seq_length_;
  std::vector<int32_t> sample_;
};

}  // namespace lmforge::train
