// defines: T5DatasetConfig, T5Sample (+ its three attention masks on demand), T5Dataset (one split of Megatron's
//   legacy T5Dataset), build_t5_datasets(), t5_sample_json() (--print-samples)
// Rules: ../shared/docs/bert-t5-reference-notes.md §3.2 (M23 megatron/data/t5_dataset.py): the BERT samples map with
// max_len = encoder_seq_length − 2 and no binary head, RandomState(seed + idx) (not reduced mod 2^32), whole-word
// spans with geometric lengths, one sentinel per span. Field for field equal to Megatron's samples.
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

struct T5DatasetConfig {
  std::string prefix;                // --data-path: one sentence-level dataset
  std::string split = "969, 30, 1";  // --split, over documents
  int32_t encoder_seq_length = 512;  // --encoder-seq-length (or --seq-length)
  int32_t decoder_seq_length = 128;  // --decoder-seq-length
  double mask_prob = 0.15;           // --mask-prob
  double short_seq_prob = 0.1;       // --short-seq-prob
  int32_t seed = 1234;               // --seed (> 0)
  std::string cache_dir;             // --data-cache-path; empty: beside the data
  MaskedLmVocab vocab;               // load_bert_vocab(vocab.txt, --vocab-extra-ids): needs sentinels, [BOS], [EOS]
};

// One sample with Megatron's fields. The three 2-D masks follow from the padding (ids ≥ 1 are real tokens, as
// Megatron computes them), so they are built only on request.
struct T5Sample {
  std::vector<int32_t> text_enc;   // encoder_seq_length: tokens with each span replaced by its sentinel, then pad 0
  std::vector<int32_t> text_dec;   // decoder_seq_length: [BOS] <x0> span0 <x1> span1 …, then pad 0
  std::vector<int32_t> labels;     // decoder_seq_length: text_dec shifted left, [EOS] after the last span, then −1
  std::vector<int32_t> loss_mask;  // 1 for the len(decoder input) real positions
  int32_t truncated = 0;           // 1 when the row's sentences were cut to the target length

  // enc_mask[i][j] = (enc_i ≥ 1)(enc_j ≥ 1), [Le × Le] row-major.
  void enc_mask(std::vector<int32_t>& out) const;
  // dec_mask[i][j] = (dec_i ≥ 1)(dec_j ≥ 1)[j ≤ i], [Ld × Ld].
  void dec_mask(std::vector<int32_t>& out) const;
  // enc_dec_mask[i][j] = (dec_i ≥ 1)(enc_j ≥ 1), [Ld × Le].
  void enc_dec_mask(std::vector<int32_t>& out) const;

  std::vector<int32_t> scratch_sentence, scratch_tokens, scratch_span_order;
  MaskingWorkspace scratch_masking;
};

class T5Dataset : public SentenceDataset {
 public:
  T5Dataset(std::shared_ptr<const SentenceSplits> data, Split split, int64_t num_samples,
            const T5DatasetConfig& config);

  // Sample i into `out`. Errors where Megatron fails: more spans than sentinels, an encoder or decoder side longer
  // than its sequence length (the decoder needs 1 + spans + masked tokens), seed + i ≥ 2^32 (RandomState rejects it).
  void sample(int64_t i, T5Sample& out) const;

 private:
  T5DatasetConfig config_;
};

// The three splits (see build_sentence_datasets).
using T5Datasets = SentenceDatasets<T5Dataset>;
T5Datasets build_t5_datasets(const T5DatasetConfig& config, const std::array<int64_t, 3>& samples_per_split);

// One JSON line: {"split", "index", "text_enc", "text_dec", "labels", "loss_mask", "truncated"} and, with
// with_masks, "enc_mask", "dec_mask", "enc_dec_mask" as nested lists of 0/1.
std::string t5_sample_json(Split split, int64_t index, const T5Sample& sample, bool with_masks = false);

}  // namespace lmforge::datasets
