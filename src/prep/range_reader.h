// defines: RangeLineReader (whole lines from a byte range of a plain file), count_lines_before(),
//          next_line_start(), is_compressed_file()
#pragma once
#include <cstdint>
#include <string>

#include "data/file_util.h"
#include "data/line_reader.h"

namespace lmforge::prep {

// True when the file starts with a gzip, zstd, xz or bzip2 signature: such a file can only be read whole, from
// its start (the same signatures data::LineReader::open() decodes by).
bool is_compressed_file(const std::string& path);

// The first line start at or after `offset` in a plain file: `offset` itself when it is 0 or the byte before
// it is '\n', else one past the next '\n' (the file size when there is none).
uint64_t next_line_start(const std::string& path, uint64_t offset, uint64_t file_size);

// Number of '\n' bytes in [0, offset): the line number of a range's first line is this + 1. Only error messages
// need it, so it is computed on demand rather than for every range.
uint64_t count_lines_before(const std::string& path, uint64_t offset);

// Lines of [begin, end) of a plain file, where begin and end are line starts (or end == file size). Blocks and
// line numbers follow data::LineReader's contract (over-long lines included), with line 1 being the range's first
// line.
class RangeLineReader final : public data::LineReader {
 public:
  RangeLineReader(const std::string& path, uint64_t begin, uint64_t end,
                  size_t max_line_bytes = data::kDefaultMaxLineBytes);
  bool next_block(data::LineBlock& block, size_t target_bytes) override;
  uint64_t file_bytes_read() const override { return pos_ - begin_; }  // bytes of the range consumed
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  data::UniqueFd fd_;
  uint64_t begin_, end_, pos_;
  data::LineBlocker blocker_;
};

}  // namespace lmforge::prep
