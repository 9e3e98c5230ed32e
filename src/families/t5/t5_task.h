// defines: lmforge::train::T5Task (Megatron's T5Dataset samples as a train::Task: span corruption with sentinels)
#pragma once
#include <string>
#include <vector>

#include "datasets/t5_dataset.h"
#include "families/sentence_task.h"
#include "train/model.h"

namespace lmforge::train {

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
