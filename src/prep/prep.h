// defines: PrepOptions, PrepSummary, run_prep(): loose-JSON corpora to Megatron indexed datasets, one per JSON key;
//          InputPiece, prepare_pieces(): the pipeline over an ordered list of files or byte ranges (used by shards)
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "data/line_reader.h"
#include "prep/nvidia_instances.h"
#include "text/tokenizer_factory.h"

namespace lmforge {
class ProgressLine;
}
namespace lmforge::data {
class IndexedDatasetWriter;
}

namespace lmforge::prep {

struct PrepOptions {
  std::vector<std::string> inputs;                 // files, directories or glob patterns, in order
  std::string output_prefix;                       // writes <prefix>_<key>_<level>.{bin,idx} (dataset_level())
  std::vector<std::string> json_keys{"text"};      // one dataset per key
  text::TokenizerOptions tokenizer;
  bool append_eod = false;                         // EOD id after each non-empty document
  int workers = 0;                                 // tokenizing threads; 0 = every core
  bool skip_invalid = false;                       // count and skip bad lines instead of stopping
  size_t report_invalid = 10;                      // with skip_invalid: how many bad lines to name
  double progress_seconds = -1;                    // progress interval; <0 = 1 s on a terminal, else 10 s
  size_t block_bytes = size_t(1) << 20;            // lines are handed to workers in blocks of about this size
  // --max-line-bytes: a longer line is invalid ("line longer than N bytes", skipped under skip_invalid) and is
  // never held in memory whole, so input that never ends a line cannot exhaust memory.
  size_t max_line_bytes = data::kDefaultMaxLineBytes;
  // Megatron's --split-sentences: each string value is split into sentences (text/sentence_splitter.h: ICU's
  // sentence rules where Megatron uses NLTK punkt), one sequence per sentence that has tokens, EOD after the last;
  // a list value stays as its pre-split items. Output level "sentence".
  bool split_sentences = false;
  bool keep_newlines = false;                      // --keep-newlines: whitespace after a sentence stays in it
  std::string lang = "english";                    // --lang: punkt language name (or ICU locale) for splitting
  // --input-format: "json" (one JSON object per line, --json-keys), "text" (one document per line: the whole line,
  // lines as Python's text-mode readlines() cuts them; output level "sentence" as the word-level scripts name it),
  // "sentences" (one sentence per line, a blank line between documents: Google's, NVIDIA's and ELECTRA's input).
  std::string input_format = "json";
  // --output-format: "megatron" (.bin/.idx) or "nvidia-hdf5" (prep/output_formats.h lists them).
  std::string output_format = "megatron";
  // nvidia-hdf5: create_pretraining_data.py's flags (--max-seq-length, --max-predictions-per-seq, --masked-lm-prob,
  // --short-seq-prob, --dupe-factor, --random-seed) with its defaults.
  NvidiaInstanceOptions nvidia;
  bool do_lower_case = true;                       // nvidia-hdf5: the script always lower-cases (store_true, default True)
  int n_training_shards = 1;                       // nvidia-hdf5: bertPrep.py's --n_training_shards
  int n_test_shards = 0;                           // nvidia-hdf5: bertPrep.py's --n_test_shards
  double fraction_test_set = 0.1;                  // nvidia-hdf5 with test shards: share of sentences for test
  int num_output_files = 1000;                     // electra-tfrecord: <prefix>.tfrecord-<i>-of-<n> (the builder's 1000)
  int num_processes = 1;                           // electra-tfrecord: the builder's --num-processes (jobs)
};

// "sentence" with split_sentences, else "document": the <level> of the dataset names.
std::string dataset_level(const PrepOptions& options);
// Refuses (lmforge::Error naming both) an input file that is one of the outputs' .bin/.idx files (the same file by
// any path: symlinks, "./", hard links), which a run would overwrite after reading it.
void refuse_output_over_input(const PrepOptions& options, const std::vector<std::string>& input_files);
// --json-keys: at least one key, none given twice (a second dataset under the same name would overwrite the first).
void check_json_keys(const PrepOptions& options);
// Creates the directory the output prefix is in. A part of the path that is a regular file, or any other failure,
// is an Error naming --output-prefix, the part and the reason (not a bare filesystem error).
void create_output_dir(const std::string& output_prefix);
// Errors for the sentence flags before any work: --keep-newlines or --lang without --split-sentences, an
// unknown --lang.
void check_sentence_options(const PrepOptions& options);

struct PrepSummary {
  uint64_t documents = 0;          // documents written (lines accepted)
  uint64_t empty_documents = 0;    // of which produced no tokens (written as empty documents, as Megatron)
  uint64_t sequences = 0;
  uint64_t tokens = 0;             // over all keys, EOD included
  uint64_t skipped_lines = 0;      // invalid lines skipped under skip_invalid
  uint64_t invalid_utf8_replaced = 0;
  uint64_t lone_surrogates_replaced = 0;
  uint64_t instances = 0;          // nvidia-hdf5: training instances written
  uint64_t input_bytes = 0;        // bytes read from disk (compressed size for compressed files)
  uint64_t text_bytes = 0;         // bytes of JSON lines after decompression
  double seconds = 0;
  std::vector<std::string> outputs;  // dataset prefixes written
};

// Runs the whole job; progress goes to stderr. Any user-caused failure throws lmforge::Error naming the file,
// line and reason, after removing partial outputs: a dataset never appears under its final name unless complete.
PrepSummary run_prep(const PrepOptions& options);

// One unit of input for prepare_pieces(): a whole file (any compression), or the byte range [begin, end) of a
// plain file whose ends are line starts (see prep/range_reader.h).
struct InputPiece {
  std::string path;
  bool whole_file = true;
  uint64_t begin = 0, end = 0;  // only when !whole_file
  uint64_t size = 0;            // bytes on disk this piece covers (for progress)
};

// The pipeline of run_prep() over `pieces` in order, appending documents to `writers` (one per JSON key, opened
// and finished by the caller) and adding to `summary` (documents, tokens, bytes, skips; not seconds/outputs).
// `on_block(bytes_done)` runs after each written block with the bytes of the pieces consumed so far. Errors name
// the file and its line (for a range, counted from the start of the file). `progress`, if given, is ended
// before skipped lines are named on stderr.
// Per-thread JSON parsers and tokenizer encoders (with their word caches) kept across prepare_pieces() calls, so
// that many small pieces (shards) do not each start with cold caches. Calls sharing one must come from one
// long-lived thread (entries are per thread) and use the same options and tokenizer, which must outlive it.
class PieceEncoders {
 public:
  PieceEncoders(const PrepOptions& options, const text::Tokenizer& tokenizer);
  ~PieceEncoders();
  struct Impl;
  std::unique_ptr<Impl> impl;
};

void prepare_pieces(const PrepOptions& options, const text::Tokenizer& tokenizer,
                    const std::vector<InputPiece>& pieces, const std::vector<data::IndexedDatasetWriter*>& writers,
                    PrepSummary& summary, const std::function<void(uint64_t bytes_done)>& on_block,
                    lmforge::ProgressLine* progress, PieceEncoders* encoders = nullptr);

// Error when --append-eod is asked of a tokenizer without an end-of-document id.
void check_eod(const PrepOptions& options, const text::Tokenizer& tokenizer);

// The summary as printed at the end of `lmforge prep`.
void print_summary(const PrepSummary& summary, std::ostream& out);

}  // namespace lmforge::prep
