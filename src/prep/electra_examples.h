// defines: ElectraExamples, ElectraExampleBuilder, ElectraTokenizer, ElectraReadOptions/ElectraReadStats,
//          add_electra_text_file(), add_electra_megatron_dataset(), electra_job_inputs(): ELECTRA's pretraining
//          examples as google-research/electra's build_pretraining_dataset.py builds them (ExampleBuilder, and
//          ExampleWriter.write_examples' reading), example for example and with the same draws from CPython's
//          global `random` (../shared/docs/electra-reference-notes.md §1).
//
// The builder (state: the sentences so far, their total length, a target length that starts at M = max length):
//   add_line(line): a blank line with sentences pending emits an example; otherwise the line's ids are appended and,
//     once the total reaches the target, an example is emitted. The end of each input file is one more blank line.
//   emit: random() < 0.1 -> one segment only (first target 100000), else first target = (target - 3) // 2;
//     each sentence in order goes to A if A is empty, or |A| + |s| < first target, or (B is empty and
//     |A| < first target and random() < 0.5) -- Python's short-circuit decides which draws happen -- else to B;
//     A = A[:M - 2]; B = B[:max(0, M - |A| - 3)] (the cut tokens are lost); random() < 0.05 -> next target =
//     randint(5, M), else M. Example: [CLS] A [SEP] (B [SEP] if B is not empty), segment 0 then 1, padded with 0.
// A line that tokenizes to nothing is appended as an empty sentence in the script; it never changes the total,
// never draws and adds no ids, so it is dropped here.
//
// Randomness: the script never seeds `random` (the reference run seeds 12345 first); with --num-processes J each
// process j inherits the parent's state, takes the corpus files with index = j (mod J), random.shuffle()s them and
// then builds, all from that state. electra_job_inputs() is that split and shuffle for one job.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/line_reader.h"
#include "prep/python_random.h"
#include "text/tokenizer.h"

namespace lmforge::prep {

// Examples in the builder's order, stored without padding.
struct ElectraExamples {
  int max_seq_length = 128;
  int32_t cls_id = 0, sep_id = 0;
  std::vector<int32_t> tokens;         // example i: A then B, tokens[begin[i], begin[i + 1])
  std::vector<uint64_t> begin{0};
  std::vector<uint32_t> first_length;  // |A| of example i

  size_t size() const { return first_length.size(); }
  // Row i as _make_tf_example writes it: input_ids [CLS] A [SEP] (B [SEP]), input_mask 1 on those tokens,
  // segment_ids 0 on [CLS] A [SEP] and 1 on B [SEP]; every array padded with 0 to max_seq_length.
  template <class T>
  void row(size_t i, T* input_ids, T* input_mask, T* segment_ids) const {
    const size_t m = size_t(max_seq_length), a = first_length[i], n = size_t(begin[i + 1] - begin[i]);
    const int32_t* t = tokens.data() + begin[i];
    size_t k = 0;
    auto put = [&](int32_t id, int segment) {
      input_ids[k] = T(id);
      input_mask[k] = T(1);
      segment_ids[k] = T(segment);
      ++k;
    };
    put(cls_id, 0);
    for (size_t j = 0; j < a; ++j) put(t[j], 0);
    put(sep_id, 0);
    if (n > a) {
      for (size_t j = a; j < n; ++j) put(t[j], 1);
      put(sep_id, 1);
    }
    for (; k < m; ++k) input_ids[k] = input_mask[k] = segment_ids[k] = T(0);
  }
};

class ElectraExampleBuilder {
 public:
  // `random` is the process's global generator: the caller owns it (it shuffled the files before).
  ElectraExampleBuilder(int max_seq_length, PythonRandom& random);
  // add_line() of a line with tokens (`ids` not empty).
  void add_sentence(std::span<const int32_t> ids, ElectraExamples& out);
  // add_line("") (a blank line, or the end of a file): emits an example if any tokens are pending.
  void end_document(ElectraExamples& out);

 private:
  void create_example(ElectraExamples& out);
  int max_length_, target_length_;
  PythonRandom& random_;
  std::vector<int32_t> ids_;             // the pending sentences' ids back to back
  std::vector<size_t> sentence_end_;     // end of each pending sentence in ids_
  std::vector<int32_t> first_, second_;  // scratch
};

// ELECTRA's model/tokenization.py FullTokenizer: Google's BERT rules with NVIDIA's clean text (every C* character
// deleted: _is_control is cat.startswith("C")), 200-character words, no never_split list (text "[SEP]" is
// "[", "sep", "]"), accents stripped exactly when lower-casing (the script's defaults). vocab["[CLS]"] and
// vocab["[SEP]"] are the ids of the last lines holding them (load_vocab fills an OrderedDict line by line).
struct ElectraTokenizer {
  ElectraTokenizer(const std::string& vocab_file, bool lower_case);
  std::unique_ptr<text::Tokenizer> tokenizer;
  int32_t cls_id = -1, sep_id = -1;
  size_t vocab_lines = 0;
};

struct ElectraReadOptions {
  int workers = 0;                                  // tokenizing threads; 0: every core
  size_t block_bytes = size_t(1) << 20;             // lines are tokenized in blocks of about this size
  size_t max_line_bytes = data::kDefaultMaxLineBytes;
};
struct ElectraReadStats {
  uint64_t input_bytes = 0, text_bytes = 0, sentences = 0, tokens = 0;
};

// ExampleWriter.write_examples(path): the file's lines read as TensorFlow's GFile reads them (split at '\n', every
// '\r' dropped by its BufferedInputStream::ReadLine, strict UTF-8), each Python-str.strip()ped; a blank line ends
// a document, a line is tokenized and added; the file's end is one more blank line. Lines are tokenized in blocks
// on `options.workers` threads and reach the builder in order. Plain, .gz, .zst or .xz. Invalid UTF-8 or an
// over-long line is an Error naming file:line.
void add_electra_text_file(const std::string& path, const ElectraTokenizer& tokenizer,
                           const ElectraReadOptions& options, ElectraExampleBuilder& builder, ElectraExamples& out,
                           ElectraReadStats& stats);

// A Megatron sentence-level dataset (`prefix`.bin/.idx, as `prep --split-sentences` writes) as if it were such a
// file: each sequence one line, each document followed by a blank line. Ids at or above `vocabulary_size` are an
// Error naming the dataset (it was made with another vocabulary).
void add_electra_megatron_dataset(const std::string& prefix, size_t vocabulary_size, ElectraExampleBuilder& builder,
                                  ElectraExamples& out, ElectraReadStats& stats);

// Job `job` of `jobs` (the script's --num-processes): the inputs at positions = job (mod jobs), in the order the
// job reads them after random.shuffle() with `random`.
std::vector<std::string> electra_job_inputs(const std::vector<std::string>& inputs, int job, int jobs,
                                            PythonRandom& random);

}  // namespace lmforge::prep
