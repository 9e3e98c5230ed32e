// defines: BertTask, T5Task
#include "families/bert/bert_task.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::train {

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

template class SentenceTask<datasets::BertDataset, datasets::BertSample>;
template class SentenceTask<datasets::T5Dataset, datasets::T5Sample>;

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
