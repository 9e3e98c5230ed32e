// defines: RangeLineReader, count_lines_before(), next_line_start(), is_compressed_file()
// All reads are pread() at explicit offsets, so many readers may share a file and none depends on another's
// position; a range is read once, in large chunks.
#include "prep/range_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace lmforge::prep {
namespace {

constexpr size_t kChunk = 1u << 20;

size_t pread_some(int fd, void* dst, size_t size, uint64_t offset, const std::string& path) {
  for (;;) {
    const ssize_t n = ::pread(fd, dst, size, static_cast<off_t>(offset));
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) throw Error(data::os_error(path, "read at offset " + std::to_string(offset) + " failed"));
  }
}

}  // namespace

bool is_compressed_file(const std::string& path) {
  data::UniqueFd fd = data::open_read(path);
  uint8_t m[10] = {};
  size_t len = 0;
  while (len < sizeof m) {
    size_t n = pread_some(fd.get(), m + len, sizeof m - len, len, path);
    if (n == 0) break;
    len += n;
  }
  if (len >= 2 && m[0] == 0x1f && m[1] == 0x8b) return true;
  if (len >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) return true;
  if (len >= 6 && std::memcmp(m, "\xfd" "7zXZ\0", 6) == 0) return true;
  if (len >= 3 && std::memcmp(m, "BZh", 3) == 0) return true;
  return false;
}

uint64_t next_line_start(const std::string& path, uint64_t offset, uint64_t file_size) {
  if (offset == 0 || offset >= file_size) return std::min(offset, file_size);
  data::UniqueFd fd = data::open_read(path);
  std::vector<char> buf(64u << 10);
  uint64_t pos = offset - 1;  // a '\n' right before `offset` makes `offset` itself a line start
  while (pos < file_size) {
    const size_t n = pread_some(fd.get(), buf.data(), std::min<uint64_t>(buf.size(), file_size - pos), pos, path);
    if (n == 0) break;
    if (const void* nl = std::memchr(buf.data(), '\n', n))
      return pos + static_cast<uint64_t>(static_cast<const char*>(nl) - buf.data()) + 1;
    pos += n;
  }
  return file_size;
}

uint64_t count_lines_before(const std::string& path, uint64_t offset) {
  data::UniqueFd fd = data::open_read(path);
  std::vector<char> buf(kChunk);
  uint64_t lines = 0, pos = 0;
  while (pos < offset) {
    const size_t n = pread_some(fd.get(), buf.data(), std::min<uint64_t>(buf.size(), offset - pos), pos, path);
    if (n == 0) break;
    lines += static_cast<uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
    pos += n;
  }
  return lines;
}

RangeLineReader::RangeLineReader(const std::string& path, uint64_t begin, uint64_t end)
    : path_(path), fd_(data::open_read(path)), begin_(begin), end_(end), pos_(begin) {
  ::posix_fadvise(fd_.get(), static_cast<off_t>(begin), static_cast<off_t>(end - begin), POSIX_FADV_SEQUENTIAL);
}

bool RangeLineReader::next_block(data::LineBlock& block, size_t target_bytes) {
  block.first_line = next_line_;
  block.line_count = 0;
  block.bytes.swap(carry_);
  carry_.clear();
  if (target_bytes == 0) target_bytes = 1;
  size_t scanned = 0;
  size_t cut = std::string::npos;  // one past the '\n' that ends the block
  for (;;) {
    // The shortest run of whole lines reaching target_bytes: the first '\n' at or after target_bytes − 1.
    const size_t from = std::max(scanned, target_bytes - 1);
    if (from < block.bytes.size()) {
      if (const void* nl = std::memchr(block.bytes.data() + from, '\n', block.bytes.size() - from)) {
        cut = static_cast<size_t>(static_cast<const char*>(nl) - block.bytes.data()) + 1;
        break;
      }
      scanned = block.bytes.size();
    }
    if (pos_ >= end_) break;
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(std::max(kChunk, target_bytes - std::min(target_bytes, block.bytes.size())), end_ - pos_));
    const size_t old = block.bytes.size();
    block.bytes.resize(old + want);
    const size_t got = pread_some(fd_.get(), block.bytes.data() + old, want, pos_, path_);
    block.bytes.resize(old + got);
    if (got == 0)
      throw Error(path_ + ": file ended at byte " + std::to_string(pos_) + ", before the planned end " +
                  std::to_string(end_) + " (was it changed during the run?)");
    pos_ += got;
  }
  if (block.bytes.empty()) return false;
  if (cut == std::string::npos) cut = block.bytes.size();  // the rest of the range (the file's last line)
  carry_.assign(block.bytes, cut, std::string::npos);
  block.bytes.resize(cut);
  block.line_count = static_cast<uint64_t>(std::count(block.bytes.begin(), block.bytes.end(), '\n'));
  if (block.bytes.back() != '\n') ++block.line_count;
  next_line_ += block.line_count;
  return true;
}

}  // namespace lmforge::prep
