// defines: ElectraTask
#include "families/electra/electra_task.h"

#include <algorithm>
#include <cstdio>

#include "datasets/gpt_indices.h"
#include "datasets/hdf5_bert_shards.h"
#include "util/error.h"

namespace lmforge::train {

ElectraTask::ElectraTask(std::shared_ptr<const datasets::ElectraPretrainingData> data, const ElectraTaskConfig& config)
    : data_(std::move(data)), config_(config) {
  bounds_ = datasets::split_bounds(datasets::parse_split(config_.split), (int64_t)data_->size());
  const size_t L = (size_t)data_->seq_length();
  ids_.resize(L), mask_.resize(L), segments_.resize(L);
}

std::vector<std::string> ElectraTask::loss_names() const { return {"mlm loss", "disc loss", "disc accuracy"}; }

int64_t ElectraTask::split_size(SplitKind split) const {
  const int64_t n = count(split);
  if (n == 0) return 0;
  const int64_t wanted = std::max<int64_t>(config_.samples_per_split[(size_t)split], 1);
  return (wanted + n - 1) / n * n;
}

int64_t ElectraTask::example_of(SplitKind split, int64_t index) {
  const int64_t n = count(split);
  if (n == 0) throw Error(std::string("ELECTRA: the ") + split_kind_name(split) + " split has no examples");
  if (index < 0) throw Error("ELECTRA: sample index " + std::to_string(index) + " is negative");
  const int64_t epoch = index / n;
  Order& order = orders_[(size_t)split];
  if (order.epoch != epoch) {
    using datasets::splitmix_mix;
    const uint64_t state =
        splitmix_mix(splitmix_mix(splitmix_mix(config_.seed ^ 0x454C4543545241ULL) ^ (uint64_t)split) ^ (uint64_t)epoch);
    order.permutation = datasets::splitmix_permutation(n, state);
    order.epoch = epoch;
  }
  return bounds_[(int)split] + order.permutation[(size_t)(index % n)];
}

void ElectraTask::fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) {
  const int B = micro_batch, T = data_->seq_length();
  const size_t n = (size_t)B * T;
  batch.B = B;
  batch.T = T;
  batch.split = split;
  batch.first_sample = first;
  batch.tokens.resize(n);
  batch.padding.resize(n);
  batch.token_types.resize(n);
  batch.targets.clear();
  batch.loss_mask.clear();
  batch.labels.clear();
  for (int b = 0; b < B; b++) {
    const size_t at = (size_t)b * T;
    data_->get((size_t)example_of(split, first + b), {batch.tokens.data() + at, (size_t)T},
               {batch.padding.data() + at, (size_t)T}, {batch.token_types.data() + at, (size_t)T});
  }
}

std::string ElectraTask::summary() const {
  const prep::ElectraReadStats& s = data_->stats();
  char line[600];
  std::snprintf(line, sizeof line,
                "ELECTRA examples of %s: %zu at length %d (%llu sentences, %llu tokens); split %s: train %lld, "
                "validation %lld, test %lld examples, each split read in a seeded order per epoch\n",
                config_.source.c_str(), data_->size(), data_->seq_length(), (unsigned long long)s.sentences,
                (unsigned long long)s.tokens, config_.split.c_str(), (long long)count(SplitKind::TRAIN),
                (long long)count(SplitKind::VALID), (long long)count(SplitKind::TEST));
  return line;
}

std::string ElectraTask::sample_json(SplitKind split, int64_t index) {
  const int64_t example = example_of(split, index);
  const size_t T = (size_t)data_->seq_length();
  data_->get((size_t)example, ids_, mask_, segments_);
  std::string line = sample_json_head(split, index);
  line += ", \"example\": " + std::to_string(example);
  append_json_field(line, "input_ids", ids_.data(), T);
  append_json_field(line, "input_mask", mask_.data(), T);
  append_json_field(line, "segment_ids", segments_.data(), T);
  line += "}";
  return line;
}

}  // namespace lmforge::train
