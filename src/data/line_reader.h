// defines: LineReader (streams one input file, plain or .gz/.zst/.xz, in blocks of whole lines), LineBlocker
//          (the block-of-lines rules every reader shares, with a bound on line length),
//          expand_input_specs() (files, globs and directories to an ordered file list)
#pragma once
#include <cstdint>
#include <functional>
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
  // 0-based indexes (ascending) of the block's lines that were longer than the reader's limit: their bytes are
  // dropped and the line is empty in `bytes`, so a caller reports (or skips) it by number.
  std::vector<uint64_t> overlong;
};

// Lines longer than this many bytes ('\n' excluded) are not held in memory: a file that never ends a line
// (/dev/zero, a gzip of gigabytes of NUL bytes) would otherwise grow memory until the process dies.
constexpr size_t kDefaultMaxLineBytes = size_t(256) << 20;

// Cuts a byte stream into LineBlocks: the shortest run of whole lines holding at least target_bytes. A line that
// grows past max_line_bytes ends the block at once as an empty line listed in `overlong`; its remaining bytes are
// read and dropped up to its '\n', and while that lasts next_block() returns blocks of no lines (true, empty
// bytes), one per target_bytes dropped, so callers keep reporting progress.
class LineBlocker {
 public:
  // Up to `cap` bytes into dst; 0 only at the end of the data.
  using Read = std::function<size_t(char* dst, size_t cap)>;
  // `path` names the input in errors. When the stream is the start of a file (`at_file_start`), a UTF-8
  // byte-order mark there is skipped (Megatron's json.loads would reject it) and UTF-16 text is an Error saying
  // so and how to convert it (rather than a JSON syntax error on every line).
  LineBlocker(std::string path, size_t max_line_bytes, bool at_file_start)
      : path_(std::move(path)), max_line_(max_line_bytes ? max_line_bytes : 1), start_checked_(!at_file_start) {}
  // False at end of input. If `read` throws, the block holds the whole lines read so far (for the line reached).
  bool next_block(LineBlock& block, size_t target_bytes, const Read& read);
  uint64_t next_line() const { return next_line_; }

 private:
  bool drop_overlong_rest(size_t target_bytes, const Read& read);
  void check_file_start(std::string& bytes);
  std::string path_;
  std::string carry_;  // bytes read past the previous block's end
  uint64_t next_line_ = 1;
  bool at_end_ = false;
  bool dropping_ = false;  // inside an over-long line, dropping its bytes
  size_t max_line_;
  bool start_checked_;
};

class LineReader {
 public:
  // Chooses the decoder from the file's magic bytes (gzip 1f 8b, zstd 28 b5 2f fd, xz fd 37 7a 58 5a 00), so a
  // misnamed file still reads. Unreadable path: Error naming it and the OS reason. Lines longer than
  // max_line_bytes are reported in LineBlock::overlong (see LineBlocker).
  static std::unique_ptr<LineReader> open(const std::string& path, size_t max_line_bytes = kDefaultMaxLineBytes);
  virtual ~LineReader() = default;
  // Fills `block` with the shortest run of whole lines holding at least `target_bytes` (fewer only at the end of
  // the input or before an over-long line; no lines while one is being dropped, see LineBlocker); false at end
  // of input.
  // A truncated or corrupt compressed stream is an Error naming the file and the line reached.
  virtual bool next_block(LineBlock& block, size_t target_bytes) = 0;
  // Bytes consumed from the file on disk so far (compressed bytes for compressed input), for progress.
  virtual uint64_t file_bytes_read() const = 0;
  virtual const std::string& path() const = 0;
};

// True when the bytes start a zstd stream: a frame's magic 28 b5 2f fd, or a skippable frame's 5? 2a 4d 18.
bool is_zstd_magic(const uint8_t* first_bytes, size_t len);

// Expands each spec in order: an existing file stays as is; a directory gives its regular files whose names end
// in .jsonl/.json/.jsonl.gz/.jsonl.zst/.jsonl.xz (and .json.* likewise), sorted by name; anything else is a glob
// pattern whose matches (files only; matched directories are skipped) are sorted. A spec matching nothing is an
// Error. Duplicates (by real path) are kept out.
std::vector<std::string> expand_input_specs(const std::vector<std::string>& specs);

}  // namespace lmforge::data
