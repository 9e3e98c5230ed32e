// defines: ElectraDataOptions, ElectraPretrainingData: ELECTRA's pretraining examples as a training data source
//          (for `train electra`), made in memory from Megatron sentence-level datasets (`prep --split-sentences`)
//          or from text files of one sentence per line, example for example what build_pretraining_dataset.py
//          writes for the same inputs (prep/electra_examples.h has the algorithm).
//
// The examples are those of the script's single process (--num-processes 1), in the order it writes them: the
// inputs in the order given are random.shuffle()d by a generator seeded with `random_seed` (as the script's file
// list; one input draws nothing), then read one after another through one builder whose state and generator carry
// across inputs; the end of each input ends a document. `prep --output-format electra-tfrecord` with the same
// inputs, vocabulary, length and seed writes example k to file k mod n as record k div n.
// The script's examples carry no masking: it is dynamic, drawn per step by the trainer (electra-reference-notes §3).
// Memory: the examples' tokens unpadded (4 bytes per token of the corpus, less what the cuts drop), plus 12 bytes
// per example.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "prep/electra_examples.h"

namespace lmforge::datasets {

struct ElectraDataOptions {
  int max_seq_length = 128;            // the builder's --max-seq-length (at least 5)
  int64_t random_seed = 12345;         // Python's random.seed() before the builder starts
  prep::ElectraReadOptions read;       // text inputs: tokenizing threads, block size, longest line
};

class ElectraPretrainingData {
 public:
  // Megatron sentence-level datasets (each a .bin/.idx prefix, made with this vocabulary): a document's sequences
  // are its sentences. `vocab_file` gives [CLS] and [SEP]; an id outside it is an Error naming the dataset.
  static ElectraPretrainingData from_megatron(const std::vector<std::string>& prefixes, const std::string& vocab_file,
                                              const ElectraDataOptions& options);
  // Text files (plain, .gz, .zst, .xz): one sentence per line, a blank line between documents, tokenized with
  // ELECTRA's FullTokenizer (lower-cased and accent-stripped when `lower_case`, the script's default).
  static ElectraPretrainingData from_text_files(const std::vector<std::string>& files, const std::string& vocab_file,
                                                bool lower_case, const ElectraDataOptions& options);

  size_t size() const { return examples_.size(); }
  int seq_length() const { return examples_.max_seq_length; }
  // Example i (< size()): input_ids [CLS] A [SEP] (B [SEP]), input_mask 1 on those tokens, segment_ids 0 then 1 on
  // B [SEP]; all padded with 0. Each span holds seq_length() values.
  void get(size_t i, std::span<int32_t> input_ids, std::span<int32_t> input_mask,
           std::span<int32_t> segment_ids) const;
  const prep::ElectraExamples& examples() const { return examples_; }
  const prep::ElectraReadStats& stats() const { return stats_; }

 private:
  ElectraPretrainingData() = default;
  prep::ElectraExamples examples_;
  prep::ElectraReadStats stats_;
};

}  // namespace lmforge::datasets
