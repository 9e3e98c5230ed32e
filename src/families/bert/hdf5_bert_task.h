// defines: lmforge::train::Hdf5BertTask (NVIDIA DeepLearningExamples' pre-masked BERT .hdf5 shards as a train::Task:
//          masked-LM labels from masked_lm_positions/ids and the next-sentence-prediction target, as
//          run_pretraining.py feeds its model), Hdf5BertTaskConfig
// Format and loader: ../shared/docs/bert-t5-reference-notes.md §5.1–5.2; the sample order: datasets::Hdf5BertShards.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/hdf5_bert_shards.h"
#include "train/model.h"

namespace lmforge::train {

struct Hdf5BertTaskConfig {
  std::string spec;            // --data-path: a directory, a glob pattern or one .hdf5/.h5 file
  uint64_t seed = 1234;        // --seed: the shard and row order of every epoch
  int64_t seq_length = 0;      // --seq-length: must equal the shards' L
  bool binary_head = true;     // off (--bert-no-binary-head): next_sentence_labels and segment_ids are not used
  int64_t vocab_size = 0;      // the tokenizer's ids: every input id and label must be below it
  std::string tokenizer_note;  // "BertWordPieceLowerCase from vocab.txt", for the error naming a shard's bad id
  int64_t type_vocab_size = 2;    // the model's token types (with the binary head every segment_ids value is below it)
  std::string type_vocab_source;  // where that number comes from ("bert_config.json's \"type_vocab_size\"")
  std::array<int64_t, 3> samples_per_split{};  // Megatron's counts (train, validation, test), for split_size()
};

// One sample per row of the micro-batch, as run_pretraining.py's batch (input_ids, segment_ids, input_mask,
// masked_lm_labels, next_sentence_labels) is handed to the model: tokens = input_ids, token_types = segment_ids,
// padding = input_mask, targets = the labels (−1 where nothing is predicted), loss_mask = 1 where a label is set,
// labels = next_sentence_labels. Losses: "lm loss" (mean cross-entropy over the labelled positions of the
// micro-batch, NVIDIA's CrossEntropyLoss(ignore_index=−1)) and, with the binary head, "nsp loss" (next-sentence
// prediction, mean over rows; Megatron's own data logs "sop loss" for its sentence-order task).
//
// Splits by file name (datasets::list_hdf5_bert_shards): train = the *training* shards; validation = the
// *test*/*valid*/*eval* shards (none: no evaluation); there is no test split. Each split is an endless stream:
// sample i of a split is datasets::Hdf5BertShards(files, seed).sample(i), so any rank and any resume point reads
// the same sample for the same index, and epochs follow each other without a boundary in the global batches.
class Hdf5BertTask final : public Task {
 public:
  explicit Hdf5BertTask(const Hdf5BertTaskConfig& config);
  std::string name() const override { return "bert"; }
  std::vector<std::string> loss_names() const override;
  bool has_split(SplitKind split) const override { return streams_[(int)split] != nullptr; }
  // The requested samples rounded up to whole epochs (as Megatron's samples maps hold whole epochs); fill() reads
  // any index, beyond it too.
  int64_t split_size(SplitKind split) const override;
  void fill(SplitKind split, int64_t first, int micro_batch, Batch& batch) override;
  std::string summary() const override;
  // Megatron BertDataset's field names: text, types, labels, is_random (here the NSP label), loss_mask,
  // padding_mask, truncated (always 0).
  std::string sample_json(SplitKind split, int64_t index) override;

 private:
  // Sample `index` of `split` into sample_, its ids checked against the vocabulary and (with the binary head) its
  // segment_ids against the model's token types (Error naming shard and row). The constructor reads the first training
  // sample so, so that shards and a model that do not fit are named before any work.
  void read(SplitKind split, int64_t index);

  Hdf5BertTaskConfig config_;
  std::array<std::unique_ptr<datasets::Hdf5BertShards>, 3> streams_;
  std::string no_validation_;  // why there is no validation split ("" when there is one)
  datasets::BertExample sample_;
};

}  // namespace lmforge::train
