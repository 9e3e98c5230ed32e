// defines: SentenceDocuments (tokenized documents as lists of sentences), NvidiaInstanceOptions, NvidiaInstances and
//          create_nvidia_instances(): NVIDIA DeepLearningExamples' create_training_instances() — NSP pairs, truncation
//          and static masking — drawing from CPython's Mersenne Twister in exactly the script's order.
//
// The algorithm and the order of its random draws are ../shared/docs/nvidia-hdf5-creation-notes.md §4-§6:
//   shuffle(documents); for each dupe, for each (shuffled) document: target length, chunks of sentences, A/B split,
//   random or actual next, truncation, masking; then shuffle(instances).
// Instances are held as token ids (the script holds strings and converts them when writing; the vocabulary maps
// each string to one id, so comparing ids with [CLS]/[SEP]'s ids is comparing the strings).
#pragma once
#include <cstdint>
#include <vector>

namespace lmforge::prep {

// Documents of sentences of token ids, in input order. Empty documents are never stored.
struct SentenceDocuments {
  std::vector<int32_t> ids;                     // every sentence's ids, back to back
  std::vector<uint64_t> sentence_begin{0};      // sentence s is ids[sentence_begin[s], sentence_begin[s + 1])
  std::vector<uint64_t> document_begin{0};      // document d is sentences [document_begin[d], document_begin[d + 1])

  size_t documents() const { return document_begin.size() - 1; }
  size_t sentences() const { return sentence_begin.size() - 1; }
  // Appends one sentence to the document being built (ids must not be empty).
  void add_sentence(const int32_t* data, size_t n) {
    ids.insert(ids.end(), data, data + n);
    sentence_begin.push_back(ids.size());
  }
  // Ends the document being built; a document without sentences is not kept (the script drops empty ones).
  void end_document() {
    if (document_begin.back() != sentences()) document_begin.push_back(sentences());
  }
};

struct NvidiaInstanceOptions {
  int max_seq_length = 128;           // L: [CLS] A [SEP] B [SEP], padded to L
  int max_predictions_per_seq = 20;   // P
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  int dupe_factor = 10;               // create_pretraining_data.py's default (bertPrep.py passes 5)
  int64_t random_seed = 12345;
};

// The vocabulary facts the algorithm needs.
struct NvidiaVocabIds {
  int32_t cls = -1, sep = -1, mask = -1;
  // list(vocab.keys()): distinct tokens in first-appearance order, each as the id the vocabulary maps it to
  // (a repeated token's last line); random replacements draw an index into this list.
  std::vector<int32_t> words;
};

// Every instance of one output file, in the script's final (shuffled) order.
struct NvidiaInstances {
  int seq_length = 0, max_predictions = 0;
  std::vector<int32_t> tokens;            // masked tokens of instance i: [token_begin[i], token_begin[i + 1])
  std::vector<uint64_t> token_begin{0};
  std::vector<uint16_t> a_length;         // tokens with segment id 0: [CLS] A [SEP]
  std::vector<int32_t> masked_positions;  // ascending; instance i: [mask_begin[i], mask_begin[i + 1])
  std::vector<int32_t> masked_ids;        // the original ids at those positions
  std::vector<uint64_t> mask_begin{0};
  std::vector<uint8_t> is_random_next;
  std::vector<uint32_t> order;            // row r of the output file is instance order[r]

  size_t size() const { return is_random_next.size(); }
};

// Checks the options (Error naming the flag) before any input is read.
void check_nvidia_instance_options(const NvidiaInstanceOptions& options);

NvidiaInstances create_nvidia_instances(const SentenceDocuments& documents, const NvidiaVocabIds& vocab,
                                        const NvidiaInstanceOptions& options);

}  // namespace lmforge::prep
