// defines: T5Task
#include "families/t5/t5_task.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::train {

T5Task::T5Task(datasets::T5Datasets datasets) : SentenceTask(std::move(datasets)) {}

void T5Task::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  const int B = micro_batch;
  // Megatron's T5 masks treat every id >= 1 as a token and 0 ([PAD]) as padding.
  const auto real = [](int32_t id) { return id >= 1 ? 1 : 0; };
  for (int b = 0; b < B; b++) {
    dataset(split, first + b).sample(first + b, sample_);
    const int Te = (int)sample_.text_enc.size(), Td = (int)sample_.text_dec.size();
    if (b == 0) {
      batch.B = B;
      batch.T = Te;
      batch.Td = Td;
      batch.tokens.resize((size_t)B * Te);
      batch.padding.resize((size_t)B * Te);
      batch.decoder_tokens.resize((size_t)B * Td);
      batch.decoder_padding.resize((size_t)B * Td);
      batch.targets.resize((size_t)B * Td);
      batch.loss_mask.resize((size_t)B * Td);
      batch.token_types.clear();
      batch.labels.clear();
    }
    const size_t e = (size_t)b * Te, d = (size_t)b * Td;
    std::copy(sample_.text_enc.begin(), sample_.text_enc.end(), batch.tokens.begin() + e);
    std::transform(sample_.text_enc.begin(), sample_.text_enc.end(), batch.padding.begin() + e, real);
    std::copy(sample_.text_dec.begin(), sample_.text_dec.end(), batch.decoder_tokens.begin() + d);
    std::transform(sample_.text_dec.begin(), sample_.text_dec.end(), batch.decoder_padding.begin() + d, real);
    std::copy(sample_.labels.begin(), sample_.labels.end(), batch.targets.begin() + d);
    std::transform(sample_.loss_mask.begin(), sample_.loss_mask.end(), batch.loss_mask.begin() + d,
                   [](int32_t m) { return (float)m; });
  }
}

std::string T5Task::sample_line(datasets::Split split, int64_t index, const datasets::T5Sample& sample) const {
  return datasets::t5_sample_json(split, index, sample);
}

}  // namespace lmforge::train
