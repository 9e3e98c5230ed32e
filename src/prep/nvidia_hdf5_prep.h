// defines: run_nvidia_hdf5_prep() (`lmforge prep --output-format nvidia-hdf5`), read_sentence_documents(),
//          nvidia_vocab_ids(), nvidia_output_files(): NVIDIA DeepLearningExamples' BERT HDF5 shards, value for
//          value what its create_pretraining_data.py writes for the same text, vocabulary and flags.
//
// How the work is spread over cores while the random stream stays the script's:
//  1. Reading and tokenizing (the script's dominant cost) run on every core: blocks of lines are tokenized in
//     parallel and appended to the document list in input order (a TBB pipeline, as the Megatron path).
//  2. The random stream is inherently sequential (each draw depends on all before it; rejection sampling consumes
//     a varying number of outputs), so one thread replays it in the script's order. It only draws: the draws
//     depend on the sentences' lengths, not on their tokens, so each instance is recorded as its recipe (A and B
//     as runs of the token ids, the masked positions and their replacements) and no token is copied there.
//     Several output shards (--n-training-shards, --n-test-shards) each restart from the seed, as NVIDIA runs one
//     process per shard, so shards are replayed in parallel.
//  3. Building the rows from the recipes (copying, masking, labelling) and deflating them (HDF5's gzip filter,
//     otherwise single-threaded; here run_deflate.h's coder) run on every core; the compressed chunks are handed to
//     HDF5 whole (H5Dwrite_chunk).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "prep/nvidia_instances.h"
#include "prep/prep.h"
#include "text/tokenizer.h"

namespace lmforge::prep {

PrepSummary run_nvidia_hdf5_prep(const PrepOptions& options);

// The checks run_nvidia_hdf5_prep() makes before reading anything (Error naming the flag).
void check_nvidia_hdf5_options(const PrepOptions& options);
// The --input specs as files (sentences: .txt files of directories; json: JSON-lines files; megatron: prefixes).
std::vector<std::string> nvidia_input_files(const PrepOptions& options);
// --workers, 0 meaning every core.
int nvidia_workers(const PrepOptions& options);

// NVIDIA's tokenizer (WordPieceFlavor::kNvidia) and the vocabulary facts the instances need.
struct NvidiaTokenizer {
  explicit NvidiaTokenizer(const PrepOptions& options);
  NvidiaVocabIds vocab;
  std::unique_ptr<text::Tokenizer> tokenizer;
};
// The documents of `files` read as options.input_format says.
SentenceDocuments read_nvidia_documents(const std::vector<std::string>& files, const NvidiaTokenizer& tokenizer,
                                        const PrepOptions& options, PrepSummary& summary);

// The script's reading of `files` in order: one sentence per line (universal newlines), a line that is empty after
// Python's str.strip() ends the document, a line that tokenizes to nothing is dropped; documents continue across
// files, as in the script. Invalid UTF-8 (the script's strict decoding fails on it) is an Error naming file:line.
SentenceDocuments read_sentence_documents(const std::vector<std::string>& files, const text::Tokenizer& tokenizer,
                                          const PrepOptions& options, PrepSummary& summary);

// --input-format json: each JSON line is one document, its --json-keys value split into sentences by
// --split-sentences (a list value is its pre-split sentences; without --split-sentences a string is one sentence),
// each sentence stripped and tokenized as a line of the sentences format. Bad lines: Error naming file:line, or
// skipped and counted under --skip-invalid.
SentenceDocuments read_json_sentence_documents(const std::vector<std::string>& files, const text::Tokenizer& tokenizer,
                                               const PrepOptions& options, PrepSummary& summary);

// --input-format megatron: Megatron sentence-level datasets (each --input a .bin/.idx prefix): a document's
// sequences are its sentences, their ids taken as they are (Error naming the dataset if an id is outside
// `vocabulary_size`: it was made with another vocabulary).
SentenceDocuments read_megatron_sentence_documents(const std::vector<std::string>& prefixes, size_t vocabulary_size,
                                                   PrepSummary& summary);

// [CLS], [SEP], [MASK] and list(vocab.keys()) from the vocab.txt (Error naming the file if one is missing).
NvidiaVocabIds nvidia_vocab_ids(const std::string& vocab_file);
// The same from the file's lines as text::read_wordpiece_vocab(vocab_file, kNvidia) read them.
NvidiaVocabIds nvidia_vocab_ids(const std::vector<std::string>& lines, const std::string& vocab_file);

// One output file and the documents (input order) it is made from.
struct NvidiaOutputFile {
  std::string path;
  size_t first_document = 0, end_document = 0;
};
// <prefix>.hdf5 for one training shard and no test shard; else <prefix>_training_<i>.hdf5 and <prefix>_test_<i>.hdf5
// (bertPrep.py's names). Documents are cut in input order: the first (1 - fraction_test) of the sentences go to
// training, the rest to test, each part into consecutive runs of about equal sentence counts.
std::vector<NvidiaOutputFile> nvidia_output_files(const PrepOptions& options, const SentenceDocuments& documents);

}  // namespace lmforge::prep
