// defines: SentenceDocuments (tokenized documents as lists of sentences), NvidiaInstanceOptions, NvidiaInstance(s) and
//          create_nvidia_instances(): NVIDIA DeepLearningExamples' create_training_instances() — NSP pairs, truncation
//          and static masking — drawing from CPython's Mersenne Twister in exactly the script's order.
//
// The algorithm and the order of its random draws are ../shared/docs/nvidia-hdf5-creation-notes.md §4-§6:
//   shuffle(documents); for each dupe, for each (shuffled) document: target length, chunks of sentences, A/B split,
//   random or actual next, truncation, masking; then shuffle(instances).
// Instances are held as runs of token ids (the script holds strings and converts them when writing; the vocabulary
// maps each string to one id, so comparing ids with [CLS]/[SEP]'s ids is comparing the strings).
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

// One instance as the random stream chose it: A and B as runs of the documents' ids (a document's sentences lie
// back to back, so both stay one run after truncation), and where its masked positions are listed.
struct NvidiaInstance {
  uint64_t a_begin = 0, b_begin = 0;  // A is ids[a_begin, a_begin + a_length), B likewise
  uint64_t mask_begin = 0;            // its masked positions: [mask_begin, mask_begin + mask_count)
  uint16_t a_length = 0, b_length = 0, mask_count = 0;
  uint8_t is_random_next = 0;
};

// Every instance of one output file as recipes, in the file's row order (the script's final shuffle applied), and
// laid out in that order so building the rows reads them front to back (their masks are in the order the
// instances were made). The tokens are copied, masked and labelled
// when the rows are built, on every core (nvidia_hdf5_writer.cpp); the replay only draws.
struct NvidiaInstances {
  static constexpr int32_t kKeep = -1;  // replacement: the original token stays (the 10 % "keep" draw)

  int seq_length = 0, max_predictions = 0;
  int32_t cls = -1, sep = -1;
  const int32_t* ids = nullptr;              // SentenceDocuments::ids of the documents replayed; must outlive this
  std::vector<NvidiaInstance> rows;          // row r of the output file
  std::vector<uint16_t> masked_positions;    // ascending within an instance
  std::vector<int32_t> replacements;         // the id written at that position, or kKeep

  size_t size() const { return rows.size(); }
  // [CLS] A [SEP] B [SEP]
  static size_t length(const NvidiaInstance& r) { return size_t(r.a_length) + r.b_length + 3; }
  // The unmasked token at `position` of instance r (the label a masked position gets).
  int32_t token(const NvidiaInstance& r, size_t position) const {
    const size_t a = r.a_length;
    if (position == 0) return cls;
    if (position <= a) return ids[r.a_begin + position - 1];
    if (position == a + 1) return sep;
    if (position <= a + 1 + r.b_length) return ids[r.b_begin + position - a - 2];
    return sep;
  }
};

// Checks the options (Error naming the flag) before any input is read.
void check_nvidia_instance_options(const NvidiaInstanceOptions& options);

// The instances of documents [first_document, end_document) of `documents` (input order), as the script makes them
// from a file holding just those documents. `documents` must outlive the result (it points into documents.ids).
NvidiaInstances create_nvidia_instances(const SentenceDocuments& documents, size_t first_document, size_t end_document,
                                        const NvidiaVocabIds& vocab, const NvidiaInstanceOptions& options);
// All of `documents`.
inline NvidiaInstances create_nvidia_instances(const SentenceDocuments& documents, const NvidiaVocabIds& vocab,
                                               const NvidiaInstanceOptions& options) {
  return create_nvidia_instances(documents, 0, documents.documents(), vocab, options);
}

}  // namespace lmforge::prep
