// defines: BertDatasetConfig, BertSample, BertDataset (one split of Megatron's legacy BertDataset),
//   build_bert_datasets() (the three splits as pretrain_bert.py builds them), bert_sample_json() (--print-samples)
// Rules: ../shared/docs/bert-t5-reference-notes.md §2 (M23 megatron/data/bert_dataset.py, dataset_utils.py).
// Same data, --split, sample counts, seq_length, mask_prob, short_seq_prob, seed and binary head → the same samples
// as Megatron, field for field, in the same order; the samples maps are Megatron's cache files.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/gpt_indices.h"
#include "datasets/masked_lm.h"
#include "datasets/samples_map.h"
#include "datasets/sentence_dataset.h"

namespace lmforge::datasets {

struct BertDatasetConfig {
  std::string prefix;                // --data-path: one sentence-level dataset (Megatron does not blend BERT data)
  std::string split = "969, 30, 1";  // --split, over documents
  int32_t seq_length = 512;          // --seq-length
  double mask_prob = 0.15;           // --mask-prob
  double short_seq_prob = 0.1;       // --short-seq-prob
  int32_t seed = 1234;               // --seed (> 0)
  bool binary_head = true;           // off: --bert-no-binary-head
  std::string cache_dir;             // --data-cache-path; empty: the maps go beside the data, as Megatron's
  MaskedLmVocab vocab;               // load_bert_vocab(vocab.txt) for BertWordPieceLowerCase/Case
};

// One sample, Megatron's fields (each seq_length long except the two scalars). Megatron returns int64 arrays; the
// values are the same. The scratch buffers make a reused BertSample allocation-free after the first few samples.
struct BertSample {
  std::vector<int32_t> text;          // tokens after masking, then [PAD]
  std::vector<int32_t> types;         // 0 for [CLS] A [SEP], 1 for B [SEP], then the pad id (Megatron's filler)
  std::vector<int32_t> labels;        // original token at masked positions, −1 elsewhere
  std::vector<int32_t> loss_mask;     // 1 at masked positions
  std::vector<int32_t> padding_mask;  // 1 for real tokens, 0 for padding
  int32_t is_random = 0;              // 1 when A and B were swapped (sentence-order prediction target)
  int32_t truncated = 0;              // 1 when tokens were dropped to fit the target length

  std::vector<int32_t> scratch_sentence, scratch_a, scratch_b;
  MaskingWorkspace scratch_masking;
};

class BertDataset : public SentenceDataset {
 public:
  BertDataset(std::shared_ptr<const SentenceSplits> data, Split split, int64_t num_samples,
              const BertDatasetConfig& config);

  // Sample i (0 ≤ i < size()) into `out`, overwriting every field. Const and thread-safe with one BertSample per
  // thread. Error when a row has one sentence with the binary head (a map cached without it: Megatron's cache name
  // does not record the head).
  void sample(int64_t i, BertSample& out) const;

 private:
  BertDatasetConfig config_;  // vocab included
};

// The three splits (see build_sentence_datasets).
using BertDatasets = SentenceDatasets<BertDataset>;
BertDatasets build_bert_datasets(const BertDatasetConfig& config, const std::array<int64_t, 3>& samples_per_split);

// One JSON line (with '\n') for --print-samples: {"split": "train", "index": 0, "text": [...], "types": [...],
// "labels": [...], "is_random": 0, "loss_mask": [...], "padding_mask": [...], "truncated": 0}.
std::string bert_sample_json(Split split, int64_t index, const BertSample& sample);

// Shared by the JSON writers: `"name": [a, b, …]`.
void append_json_array(std::string& out, const char* name, const std::vector<int32_t>& values);

}  // namespace lmforge::datasets
