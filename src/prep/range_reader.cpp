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
  if (data::is_zstd_magic(m, len)) return true;
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

RangeLineReader::RangeLineReader(const std::string& path, uint64_t begin, uint64_t end, size_t max_line_bytes)
    : path_(path), fd_(data::open_read(path)), begin_(begin), end_(end), pos_(begin),
      blocker_(path, max_line_bytes, begin == 0) {
  ::posix_fadvise(fd_.get(), static_cast<off_t>(begin), static_cast<off_t>(end - begin), POSIX_FADV_SEQUENTIAL);
}

bool RangeLineReader::next_block(data::LineBlock& block, size_t target_bytes) {
  return blocker_.next_block(block, target_bytes, [this](char* dst, size_t cap) -> size_t {
    if (pos_ >= end_) return 0;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(cap, end_ - pos_));
    const size_t got = pread_some(fd_.get(), dst, want, pos_, path_);
    if (got == 0)
      throw Error(path_ + ": file ended at byte " + std::to_string(pos_) + ", before the planned end " +
                  std::to_string(end_) + " (was it changed during the run?)");
    pos_ += got;
    return got;
  });
}

}  // namespace lmforge::prep
