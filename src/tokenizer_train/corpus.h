// defines: CorpusOptions, LineSink, read_corpus(): a training corpus (prep's inputs, or plain text) as the lines
//          Hugging Face's train_from_files would read, handed to per-thread sinks
//
// HF trains from text files read line by line with the line ending kept ("a\n", "\r\n" stays), each line one
// sequence. A JSON-lines document trains as HF would on a text file holding its text followed by "\n": the text
// is cut after each '\n' and the last piece gets the "\n". A list value (pre-split sentences, as prep reads it)
// is each sentence followed by "\n"; several --json-keys are each key's text in that order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/line_reader.h"

namespace lmforge::tokenizer_train {

enum class InputFormat {
  kAuto,       // by file name: .jsonl / .json (before any .gz/.zst/.xz) are JSON lines, anything else text
  kJsonLines,  // one JSON object per line, texts under json_keys
  kText,       // each line is training text
};

struct CorpusOptions {
  std::vector<std::string> inputs;             // files, directories, globs (data::expand_input_specs)
  std::vector<std::string> json_keys{"text"};  // JSON lines: the keys whose texts are trained on
  InputFormat format = InputFormat::kAuto;
  int threads = 0;                             // 0: every core
  size_t max_line_bytes = data::kDefaultMaxLineBytes;
  double progress_seconds = -1;                // <0: 1 s on a terminal, 10 s otherwise
  // Sinks see the lines in corpus order, one block at a time (SentencePiece's loader wants the order); otherwise
  // blocks go to the threads' sinks as they come.
  bool ordered = false;
};

// Receives training lines; one per thread, never shared.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // One line, '\n' included except possibly at the end of a text file. Valid UTF-8 (invalid bytes were
  // replaced by U+FFFD as Python's errors="replace" does).
  virtual void add_line(std::string_view line) = 0;
};

struct CorpusSummary {
  uint64_t files = 0;
  uint64_t input_bytes = 0;       // bytes on disk
  uint64_t lines = 0;             // training lines handed to sinks
  uint64_t documents = 0;         // JSON documents (text files: their lines)
  uint64_t replaced = 0;          // invalid UTF-8 sequences and lone surrogate escapes replaced by U+FFFD
  double seconds = 0;
};

// Reads every input and hands each line to a sink made by make_sink (one per thread that processes blocks).
// `status` is shown on the progress line after the counts (e.g. the number of distinct words so far). Bad input
// (not JSON, missing key, wrong type, over-long line, unreadable or corrupt file) throws Error naming file:line
// and the reason.
CorpusSummary read_corpus(const CorpusOptions& options, const std::function<std::unique_ptr<LineSink>()>& make_sink,
                          std::vector<std::unique_ptr<LineSink>>& sinks,
                          const std::function<std::string()>& status = {});

// The lines of `text` as HF reads a file of it: cut after every '\n'; the last piece (if any) as it is.
template <class F>
void for_each_line(std::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    f(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace lmforge::tokenizer_train
