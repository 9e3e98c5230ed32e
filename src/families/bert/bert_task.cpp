// defines: BertTask
#include "families/bert/bert_task.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::train {

BertTask::BertTask(datasets::BertDatasets datasets, bool binary_head)
    : SentenceTask(std::move(datasets)), binary_head_(binary_head) {}

std::vector<std::string> BertTask::loss_names() const {
  if (binary_head_) return {"lm loss", "sop loss"};
  return {"lm loss"};
}

void BertTask::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  const int B = micro_batch;
  for (int b = 0; b < B; b++) {
    dataset(split, first + b).sample(first + b, sample_);
    const int T = (int)sample_.text.size();
    if (b == 0) {
      batch.B = B;
      batch.T = T;
      const size_t n = (size_t)B * T;
      batch.tokens.resize(n);
      batch.targets.resize(n);
      batch.loss_mask.resize(n);
      batch.token_types.resize(binary_head_ ? n : 0);
      batch.padding.resize(n);
      batch.labels.resize(binary_head_ ? B : 0);
    }
    const size_t at = (size_t)b * T;
    std::copy(sample_.text.begin(), sample_.text.end(), batch.tokens.begin() + at);
    std::copy(sample_.labels.begin(), sample_.labels.end(), batch.targets.begin() + at);
    std::transform(sample_.loss_mask.begin(), sample_.loss_mask.end(), batch.loss_mask.begin() + at,
                   [](int32_t m) { return (float)m; });
    if (binary_head_) {
      std::copy(sample_.types.begin(), sample_.types.end(), batch.token_types.begin() + at);
      batch.labels[b] = sample_.is_random;
    }
    std::copy(sample_.padding_mask.begin(), sample_.padding_mask.end(), batch.padding.begin() + at);
  }
}

std::string BertTask::sample_line(datasets::Split split, int64_t index, const datasets::BertSample& sample) const {
  return datasets::bert_sample_json(split, index, sample);
}

}  // namespace lmforge::train
