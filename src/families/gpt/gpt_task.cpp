// defines: GPTTask
#include "families/gpt/gpt_task.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"

namespace lmforge::train {

GPTTask::GPTTask(std::unique_ptr<datasets::GptSampleSource> source, int seq_length)
    : source_(std::move(source)), seq_length_(seq_length) {}

bool GPTTask::has_split(SplitKind split) const { return source_->has_split((datasets::Split)split); }

int64_t GPTTask::split_size(SplitKind split) const {
  return source_->has_split((datasets::Split)split) ? source_->size((datasets::Split)split) : 0;
}

void GPTTask::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  const int T = seq_length_, B = micro_batch;
  const auto s = (datasets::Split)split;
  const int64_t available = split_size(split);
  batch.B = B;
  batch.T = T;
  batch.tokens.resize((size_t)B * T);
  batch.targets.resize((size_t)B * T);
  for (int b = 0; b < B; b++) {
    const int64_t index = first + b;
    if (index >= available)
      throw Error(std::string("the ") + datasets::split_name(s) + " split has " + std::to_string(available) +
                  " samples; sample " + std::to_string(index) +
                  " was asked (the flags differ from the run that built it?)");
    source_->sample(s, index, sample_);
    std::copy(sample_.begin(), sample_.begin() + T, batch.tokens.begin() + (size_t)b * T);
    std::copy(sample_.begin() + 1, sample_.begin() + T + 1, batch.targets.begin() + (size_t)b * T);
  }
}

// Megatron's GPTDataset returns {"text": the seq_length + 1 tokens} per sample.
std::string GPTTask::sample_json(SplitKind split, int64_t index) {
  const auto s = (datasets::Split)split;
  if (index >= split_size(split))
    throw Error(std::string("the ") + datasets::split_name(s) + " split has " + std::to_string(split_size(split)) +
                " samples; sample " + std::to_string(index) + " was asked");
  source_->sample(s, index, sample_);
  std::string line = sample_json_head(split, index);
  append_json_field(line, "text", sample_.data(), sample_.size());
  return line + "}";
}

}  // namespace lmforge::train
