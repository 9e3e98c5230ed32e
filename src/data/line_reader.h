// defines: LineReader (streams one input file, plain or .gz/.zst/.xz, in blocks of whole lines),
//          expand_input_specs() (files, globs and directories to an ordered file list)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lmforge::data {

// A block of complete lines from one file. Lines are separated by '\n' (a trailing '\r' is kept: JSON parsing
// treats it as whitespace); the final line may lack its '\n'.
struct LineBlock {
  std::string bytes;          // whole lines, each ending in '\n' except possibly the file's last
  uint64_t first_line = 0;    // 1-based line number of the block's first line within its file
  uint64_t line_count = 0;
};

class LineReader {
 public:
  // Chooses the decoder from the file's magic bytes (gzip 1f 8b, zstd 28 b5 2f fd, xz fd 37 7a 58 5a 00), so a
  // misnamed file still reads. Unreadable path: Error naming it and the OS reason.
  static std::unique_ptr<LineReader> open(const std::string& path);
  virtual ~LineReader() = default;
  // Fills `block` with the shortest run of whole lines holding at least `target_bytes` (fewer only at the end of
  // the input; always at least one line, however long); false at end of input.
  // A truncated or corrupt compressed stream is an Error naming the file and the line reached.
  virtual bool next_block(LineBlock& block, size_t target_bytes) = 0;
  // Bytes consumed from the file on disk so far (compressed bytes for compressed input), for progress.
  virtual uint64_t file_bytes_read() const = 0;
  virtual const std::string& path() const = 0;
};

// Expands each spec in order: an existing file stays as is; a directory gives its regular files whose names end
// in .jsonl/.json/.jsonl.gz/.jsonl.zst/.jsonl.xz (and .json.* likewise), sorted by name; anything else is a glob
// pattern whose matches (files only; matched directories are skipped) are sorted. A spec matching nothing is an
// Error. Duplicates (by real path) are kept out.
std::vector<std::string> expand_input_specs(const std::vector<std::string>& specs);

}  // namespace lmforge::data
