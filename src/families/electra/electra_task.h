// defines: lmforge::train::ElectraTask (ELECTRA's pretraining examples, datasets::ElectraPretrainingData, as a
//          train::Task: the --split of the examples, each split an endless seeded stream), ElectraTaskConfig
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/electra_pretraining_data.h"
#include "train/model.h"

namespace lmforge::train {

struct ElectraTaskConfig {
  std::string source;          // what the examples were made from (the --data-path entry), for the log
  std::string split = "969, 30, 1";  // --split: train, validation, test weights over the examples
  uint64_t seed = 1234;        // --seed: the order of every epoch
  double disc_weight = 50.0;   // the objective's weight of the disc loss
  std::array<int64_t, 3> samples_per_split{};  // Megatron's counts (train, validation, test), for split_size()
};

// The examples as build_pretraining_dataset.py writes them (in its order) cut by --split into contiguous ranges
// (datasets::split_bounds, Megatron's rule over the example count). Sample i of a split with n examples:
//   epoch e = i / n, offset o = i mod n; example = first example of the split + σ_{s,e}(o),
//   σ_{s,e} = datasets::splitmix_permutation(n, mix(mix(mix(seed ^ 0x454C4543545241) ^ s) ^ e))   ("ELECTRA")
// with s the split's number (0 train, 1 validation, 2 test) — so sample i depends only on the examples, the split,
// the seed and i: any rank and any resume point reads the same example for the same index, and each example is
// read once per epoch. (ELECTRA's own order, TF's sloppy interleave and shuffle buffers, is not reproducible.)
// Batch: tokens = input_ids, padding = input_mask, token_types = segment_ids, split and first_sample set.
class ElectraTask final : public Task {
 public:
  ElectraTask(std::shared_ptr<const datasets::ElectraPretrainingData> data, const ElectraTaskConfig& config);
  std::string name() const override { return "electra"; }
  std::vector<std::string> loss_names() const override;
  std::vector<double> objective_weights() const override { return {1.0, config_.disc_weight, 0.0}; }
  bool has_split(SplitKind split) const override { return count(split) > 0; }
  // The requested samples rounded up to whole epochs; fill() reads any index, beyond it too.
  int64_t split_size(SplitKind split) const override;
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;
  std::string summary() const override;
  // ELECTRA's feature names: input_ids, input_mask, segment_ids, and "example" (its number in the builder's order).
  std::string sample_json(SplitKind split, int64_t index) override;
  // The example (in the builder's order) that sample `index` of `split` reads.
  int64_t example_of(SplitKind split, int64_t index);

 private:
  int64_t count(SplitKind split) const { return bounds_[(int)split + 1] - bounds_[(int)split]; }

  std::shared_ptr<const datasets::ElectraPretrainingData> data_;
  ElectraTaskConfig config_;
  std::array<int64_t, 4> bounds_{};
  struct Order {
    int64_t epoch = -1;
    std::vector<int64_t> permutation;
  };
  std::array<Order, 3> orders_;
  std::vector<int32_t> ids_, mask_, segments_;  // one example's rows
};

}  // namespace lmforge::train
