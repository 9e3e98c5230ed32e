// defines: LineReader (plain, gzip, zstd and xz decoders behind one block-of-lines reader) and expand_input_specs()
// Memory is bounded by the block target plus one compressed input buffer: no file is ever read whole. A compressed
// stream that ends before its format says it is complete is an error, not an early end of file.
#include "data/line_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <lzma.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "data/file_util.h"
#include "util/error.h"

namespace lmforge::data {
namespace {

constexpr size_t kInputBuffer = 1u << 20;
constexpr size_t kMinRead = 64u << 10;

// Thrown by decoders with the reason only; next_block() adds the file and the line reached.
struct DecodeError {
  std::string reason;
};

// The file on disk, read in large chunks into `buf`; decoders consume [pos, len).
struct Source {
  std::string path;
  UniqueFd fd;
  std::vector<uint8_t> buf;
  size_t pos = 0, len = 0;
  bool eof = false;
  uint64_t bytes_read = 0;

  // Reads the next chunk once the current one is consumed; false at end of file.
  bool refill() {
    if (pos < len) return true;
    if (eof) return false;
    pos = 0;
    len = read_some(fd.get(), buf.data(), buf.size(), path);
    bytes_read += len;
    if (len == 0) eof = true;
    return len > 0;
  }
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Up to `cap` decoded bytes into dst; 0 only at the end of the data. A stream that turns out corrupt or
  // truncated first yields every byte decoded before the fault and throws at the next call, so the line
  // number in the error counts every line that was decoded (as zcat | wc -l would).
  size_t read(char* dst, size_t cap) {
    if (pending_) throw DecodeError{*pending_};
    size_t produced = 0;
    try {
      return decode(dst, cap, produced);
    } catch (const DecodeError& e) {
      if (produced == 0) throw;
      pending_ = e.reason;
      return produced;
    }
  }

 protected:
  // The decoder proper; keeps `produced` current so a throw can report what was decoded before it.
  virtual size_t decode(char* dst, size_t cap, size_t& produced) = 0;

 private:
  std::optional<std::string> pending_;
};

class PlainDecoder final : public Decoder {
 public:
  explicit PlainDecoder(Source& src) : src_(src) {}
  size_t decode(char* dst, size_t cap, size_t&) override {
    size_t done = 0;
    if (src_.pos < src_.len) {  // the bytes read for format detection
      done = std::min(cap, src_.len - src_.pos);
      std::memcpy(dst, src_.buf.data() + src_.pos, done);
      src_.pos += done;
    }
    while (done < cap && !src_.eof) {  // then straight from the file into the caller's block
      size_t n = read_some(src_.fd.get(), dst + done, cap - done, src_.path);
      src_.bytes_read += n;
      if (n == 0) src_.eof = true;
      done += n;
    }
    return done;
  }

 private:
  Source& src_;
};

class GzipDecoder final : public Decoder {
 public:
  explicit GzipDecoder(Source& src) : src_(src) {
    std::memset(&z_, 0, sizeof(z_));
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw DecodeError{"cannot initialise zlib"};
  }
  ~GzipDecoder() override { inflateEnd(&z_); }

  size_t decode(char* dst, size_t cap, size_t& produced) override {
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(cap, UINT_MAX));
    const uInt want = z_.avail_out;
    while (z_.avail_out > 0) {
      produced = want - z_.avail_out;
      if (!src_.refill()) {
        if (in_member_) throw DecodeError{"truncated gzip data (unexpected end of file)"};
        break;
      }
      if (!in_member_) {
        if (src_.buf[src_.pos] == 0) {  // zero padding after the last member, as gzip(1) accepts (tape blocks)
          skip_zero_padding();
          break;
        }
        inflateReset(&z_);  // another member follows (concatenated .gz files, pigz/bgzip output)
        in_member_ = true;
      }
      z_.next_in = src_.buf.data() + src_.pos;
      z_.avail_in = static_cast<uInt>(src_.len - src_.pos);
      int rc = inflate(&z_, Z_NO_FLUSH);
      src_.pos = src_.len - z_.avail_in;
      produced = want - z_.avail_out;
      if (rc == Z_STREAM_END) {
        in_member_ = false;
      } else if (rc == Z_BUF_ERROR) {
        continue;  // needs more input: refill() above decides whether there is any
      } else if (rc != Z_OK) {
        throw DecodeError{std::string("corrupt gzip data: ") + (z_.msg ? z_.msg : zError(rc))};
      }
    }
    return want - z_.avail_out;
  }

 private:
  // Consumes the rest of the file, which must be zero bytes.
  void skip_zero_padding() {
    while (src_.refill()) {
      for (; src_.pos < src_.len; ++src_.pos)
        if (src_.buf[src_.pos] != 0) throw DecodeError{"data after the gzip stream's zero padding (not gzip data)"};
    }
  }
  Source& src_;
  z_stream z_;
  bool in_member_ = true;
};

class ZstdDecoder final : public Decoder {
 public:
  explicit ZstdDecoder(Source& src) : src_(src), ctx_(ZSTD_createDStream()) {
    if (!ctx_) throw DecodeError{"cannot initialise zstd"};
  }
  ~ZstdDecoder() override { ZSTD_freeDStream(ctx_); }

  size_t decode(char* dst, size_t cap, size_t& produced) override {
    ZSTD_outBuffer out{dst, cap, 0};
    while (out.pos < out.size) {
      produced = out.pos;
      if (src_.refill()) {
        ZSTD_inBuffer in{src_.buf.data(), src_.len, src_.pos};
        last_rc_ = ZSTD_decompressStream(ctx_, &out, &in);
        src_.pos = in.pos;
        produced = out.pos;
        if (ZSTD_isError(last_rc_)) throw DecodeError{std::string("corrupt zstd data: ") + ZSTD_getErrorName(last_rc_)};
        continue;
      }
      if (last_rc_ == 0) break;  // every frame complete and flushed: a clean end
      // Input is used up but the frame is not complete: output held back by a full buffer may still come out.
      const size_t before = out.pos;
      ZSTD_inBuffer none{nullptr, 0, 0};
      last_rc_ = ZSTD_decompressStream(ctx_, &out, &none);
      produced = out.pos;
      if (ZSTD_isError(last_rc_)) throw DecodeError{std::string("corrupt zstd data: ") + ZSTD_getErrorName(last_rc_)};
      if (out.pos == before && last_rc_ != 0)
        throw DecodeError{"truncated zstd data (unexpected end of file inside a frame)"};
    }
    return out.pos;
  }

 private:
  Source& src_;
  ZSTD_DStream* ctx_;
  size_t last_rc_ = 1;  // 0 once the last frame seen is complete
};

class XzDecoder final : public Decoder {
 public:
  explicit XzDecoder(Source& src) : src_(src) {
    // LZMA_CONCATENATED: several .xz streams back to back decode as one, as xz(1) does.
    if (lzma_stream_decoder(&s_, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
      throw DecodeError{"cannot initialise liblzma"};
  }
  ~XzDecoder() override { lzma_end(&s_); }

  size_t decode(char* dst, size_t cap, size_t& produced) override {
    s_.next_out = reinterpret_cast<uint8_t*>(dst);
    s_.avail_out = cap;
    while (s_.avail_out > 0 && !done_) {
      produced = cap - s_.avail_out;
      bool more = src_.refill();
      s_.next_in = more ? src_.buf.data() + src_.pos : nullptr;
      s_.avail_in = more ? src_.len - src_.pos : 0;
      lzma_ret rc = lzma_code(&s_, more ? LZMA_RUN : LZMA_FINISH);
      if (more) src_.pos = src_.len - s_.avail_in;
      produced = cap - s_.avail_out;
      if (rc == LZMA_STREAM_END) {
        done_ = true;
      } else if (rc == LZMA_BUF_ERROR) {
        if (!more) throw DecodeError{"truncated xz data (unexpected end of file)"};
      } else if (rc != LZMA_OK) {
        throw DecodeError{std::string("corrupt xz data: ") + message(rc)};
      }
    }
    return cap - s_.avail_out;
  }

 private:
  static const char* message(lzma_ret rc) {
    switch (rc) {
      case LZMA_DATA_ERROR: return "compressed data is corrupt";
      case LZMA_FORMAT_ERROR: return "not in .xz format";
      case LZMA_OPTIONS_ERROR: return "unsupported options";
      case LZMA_MEM_ERROR: return "out of memory";
      case LZMA_UNSUPPORTED_CHECK: return "unsupported integrity check";
      default: return "decoder error";
    }
  }
  Source& src_;
  lzma_stream s_ = LZMA_STREAM_INIT;
  bool done_ = false;
};

}  // namespace

bool is_zstd_magic(const uint8_t* m, size_t len) {
  if (len < 4) return false;
  if (m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) return true;
  // A skippable frame (magic 0x184D2A50..5F, little-endian) may come first: zstd(1) and libzstd skip it.
  return (m[0] & 0xF0) == 0x50 && m[1] == 0x2A && m[2] == 0x4D && m[3] == 0x18;
}

namespace {

// Counts the lines of `bytes` (the last may lack its '\n') and empties those longer than max_line bytes in place,
// listing their 0-based indexes in `overlong`: whether a line is too long must not depend on how it was read.
uint64_t drop_long_lines(std::string& bytes, size_t max_line, std::vector<uint64_t>& overlong) {
  size_t r = 0, w = 0;
  uint64_t n = 0;
  while (r < bytes.size()) {
    const void* nl = std::memchr(bytes.data() + r, '\n', bytes.size() - r);
    const size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - bytes.data()) : bytes.size();
    if (end - r > max_line) {
      overlong.push_back(n);
    } else {
      if (w != r) std::memmove(bytes.data() + w, bytes.data() + r, end - r);
      w += end - r;
    }
    if (nl) bytes[w++] = '\n';
    r = end + (nl ? 1 : 0);
    ++n;
  }
  bytes.resize(w);
  return n;
}

class FileLineReader final : public LineReader {
 public:
  FileLineReader(const std::string& path, size_t max_line_bytes) : blocker_(path, max_line_bytes, true) {
    src_.path = path;
    src_.fd = open_read(path);
    ::posix_fadvise(src_.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    src_.buf.resize(kInputBuffer);
    // Fill at least the 10 bytes the magic checks look at (a short read from a pipe may return fewer).
    while (src_.len < 10 && !src_.eof) {
      size_t n = read_some(src_.fd.get(), src_.buf.data() + src_.len, src_.buf.size() - src_.len, path);
      src_.bytes_read += n;
      if (n == 0) src_.eof = true;
      src_.len += n;
    }
    const uint8_t* m = src_.buf.data();
    try {
      if (src_.len >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
        decoder_ = std::make_unique<GzipDecoder>(src_);
      } else if (is_zstd_magic(m, src_.len)) {
        decoder_ = std::make_unique<ZstdDecoder>(src_);
      } else if (src_.len >= 6 && std::memcmp(m, "\xfd" "7zXZ\0", 6) == 0) {
        decoder_ = std::make_unique<XzDecoder>(src_);
      } else if (src_.len >= 10 && std::memcmp(m, "BZh", 3) == 0 && std::memcmp(m + 4, "1AY&SY", 6) == 0) {
        throw Error(path + ": bzip2-compressed input is not supported (use gzip, zstd or xz, or decompress it)");
      } else {
        decoder_ = std::make_unique<PlainDecoder>(src_);
      }
    } catch (const DecodeError& e) {
      throw Error(path + ": " + e.reason);
    }
  }

  bool next_block(LineBlock& block, size_t target_bytes) override {
    try {
      return blocker_.next_block(block, target_bytes,
                                 [this](char* dst, size_t cap) { return decoder_->read(dst, cap); });
    } catch (const DecodeError& e) {
      const auto newlines = static_cast<uint64_t>(std::count(block.bytes.begin(), block.bytes.end(), '\n'));
      throw Error(input_location(src_.path, blocker_.next_line() + newlines) + ": " + e.reason);
    }
  }

  uint64_t file_bytes_read() const override { return src_.bytes_read; }
  const std::string& path() const override { return src_.path; }

 private:
  Source src_;
  std::unique_ptr<Decoder> decoder_;
  LineBlocker blocker_;
};

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

bool is_input_name(const std::string& name) {
  static const char* const kSuffixes[] = {".jsonl", ".json", ".jsonl.gz", ".jsonl.zst", ".jsonl.xz",
                                          ".json.gz", ".json.zst", ".json.xz"};
  for (const char* s : kSuffixes) {
    size_t n = std::strlen(s);
    if (name.size() > n && name.compare(name.size() - n, n, s) == 0) return true;
  }
  return false;
}

std::vector<std::string> list_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw Error(os_error(dir, "cannot read directory"));
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (!is_input_name(name)) continue;
    std::string full = dir + (dir.back() == '/' ? "" : "/") + name;
    struct stat st;
    if (::stat(full.c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(full);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty())
    throw Error(dir + ": directory holds no input files (*.jsonl, *.json, optionally .gz/.zst/.xz)");
  return names;
}

}  // namespace

std::unique_ptr<LineReader> LineReader::open(const std::string& path, size_t max_line_bytes) {
  return std::make_unique<FileLineReader>(path, max_line_bytes);
}

bool LineBlocker::next_block(LineBlock& block, size_t target_bytes, const Read& read) {
  block.first_line = next_line_;
  block.line_count = 0;
  block.overlong.clear();
  block.bytes.clear();
  if (target_bytes == 0) target_bytes = 1;
  if (dropping_ && !drop_overlong_rest(target_bytes, read)) return true;  // a block of no lines, for progress
  block.bytes.swap(carry_);  // the partial line left over from the previous block
  carry_.clear();
  constexpr size_t npos = std::string::npos;
  size_t scanned = 0;       // bytes searched for the '\n' that ends the block
  size_t tail_scanned = 0;  // bytes searched for the start of the last (unfinished) line
  size_t line_start = 0;    // where the last line starts: one past the last '\n'
  size_t cut = npos;        // one past the '\n' that ends the block
  bool overlong = false;
  for (;;) {
    if (!start_checked_ && (block.bytes.size() >= 4 || at_end_)) check_file_start(block.bytes);
    if (start_checked_) {
      // The block is the shortest run of whole lines reaching target_bytes: look for the first '\n' at or after
      // position target_bytes-1, resuming where the last search stopped (a many-MB line is scanned once).
      const size_t from = std::max(scanned, target_bytes - 1);
      if (from < block.bytes.size()) {
        if (const void* nl = std::memchr(block.bytes.data() + from, '\n', block.bytes.size() - from)) {
          cut = static_cast<size_t>(static_cast<const char*>(nl) - block.bytes.data()) + 1;
          break;
        }
        scanned = block.bytes.size();
      }
      if (tail_scanned < block.bytes.size()) {
        if (const void* nl = ::memrchr(block.bytes.data() + tail_scanned, '\n', block.bytes.size() - tail_scanned))
          line_start = static_cast<size_t>(static_cast<const char*>(nl) - block.bytes.data()) + 1;
        tail_scanned = block.bytes.size();
      }
      if (block.bytes.size() - line_start > max_line_) {
        overlong = true;
        break;
      }
    }
    if (at_end_) break;
    const size_t want = std::max(kMinRead, target_bytes - std::min(target_bytes, block.bytes.size()));
    const size_t old = block.bytes.size();
    block.bytes.resize(old + want);
    size_t got = 0;
    try {
      got = read(block.bytes.data() + old, want);
    } catch (...) {
      block.bytes.resize(old);
      throw;
    }
    block.bytes.resize(old + got);
    if (got == 0) at_end_ = true;
  }
  if (overlong) {  // the last line stays as an empty line; its bytes here and to its '\n' are dropped
    block.bytes.resize(line_start);
    block.bytes.push_back('\n');
    dropping_ = true;
  }
  if (block.bytes.empty()) return false;
  // A full block ends at that '\n' and the rest waits for the next call; at the end of the input everything left
  // is emitted, including a last line without '\n'.
  if (cut == npos) cut = block.bytes.size();
  carry_.assign(block.bytes, cut, npos);
  block.bytes.resize(cut);
  block.line_count = drop_long_lines(block.bytes, max_line_, block.overlong);
  if (overlong) block.overlong.push_back(block.line_count - 1);
  next_line_ += block.line_count;
  return true;
}

// The first bytes of a file: a UTF-8 byte-order mark is dropped; UTF-16 (by its byte-order mark, or by the NUL
// byte beside every ASCII character, "{\0\"\0" or "\0{\0\"") is refused with what to do.
void LineBlocker::check_file_start(std::string& bytes) {
  start_checked_ = true;
  const auto b = [&](size_t i) { return i < bytes.size() ? static_cast<uint8_t>(bytes[i]) : 0x100u; };
  if (b(0) == 0xEF && b(1) == 0xBB && b(2) == 0xBF) {
    bytes.erase(0, 3);
    return;
  }
  const auto ascii = [&](size_t i) { return b(i) != 0 && b(i) < 0x80; };
  const char* order = nullptr;
  if ((b(0) == 0xFF && b(1) == 0xFE) || (ascii(0) && b(1) == 0 && ascii(2) && b(3) == 0))
    order = "little-endian";
  else if ((b(0) == 0xFE && b(1) == 0xFF) || (b(0) == 0 && ascii(1) && b(2) == 0 && ascii(3)))
    order = "big-endian";
  if (order)
    throw Error(input_location(path_, 1) + ": this file is UTF-16 (" + order +
                "), not UTF-8; convert it first, e.g. iconv -f UTF-16 -t UTF-8 in > out.jsonl");
}

// Drops the rest of an over-long line: true once its '\n' (or the end of input) is reached, with what follows it
// in carry_; false after dropping about target_bytes without reaching it.
bool LineBlocker::drop_overlong_rest(size_t target_bytes, const Read& read) {
  size_t dropped = 0;
  while (dropped < target_bytes) {
    if (carry_.empty()) {
      if (at_end_) break;
      carry_.resize(std::max(kMinRead, std::min<size_t>(target_bytes, kInputBuffer)));
      size_t got = 0;
      try {
        got = read(carry_.data(), carry_.size());
      } catch (...) {
        carry_.clear();
        throw;
      }
      carry_.resize(got);
      if (got == 0) {
        at_end_ = true;
        break;
      }
    }
    if (const void* nl = std::memchr(carry_.data(), '\n', carry_.size())) {
      carry_.erase(0, static_cast<size_t>(static_cast<const char*>(nl) - carry_.data()) + 1);
      dropping_ = false;
      return true;
    }
    dropped += carry_.size();
    carry_.clear();
  }
  if (at_end_) dropping_ = false;
  return !dropping_;
}

std::vector<std::string> expand_input_specs(const std::vector<std::string>& specs) {
  std::vector<std::string> out;
  std::set<std::string> seen;  // by real path, so "a.jsonl" and "./a.jsonl" count once
  auto add = [&](const std::string& path) {
    if (::access(path.c_str(), R_OK) != 0) throw Error(os_error(path, "cannot read"));
    char* real = ::realpath(path.c_str(), nullptr);
    std::string key = real ? real : path;
    std::free(real);
    if (seen.insert(key).second) out.push_back(path);
  };
  auto add_existing = [&](const std::string& path, const struct stat& st) {
    if (S_ISDIR(st.st_mode)) {
      for (auto& f : list_directory(path)) add(f);
    } else {
      add(path);
    }
  };
  for (const std::string& spec : specs) {
    struct stat st;
    if (::stat(spec.c_str(), &st) == 0) {
      add_existing(spec, st);
      continue;
    }
    if (errno != ENOENT || !has_glob_chars(spec)) throw Error(os_error(spec, "cannot access input"));
    glob_t g;
    int rc = ::glob(spec.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      ::globfree(&g);
      throw Error(spec + ": no file matches this pattern");
    }
    if (rc != 0) {
      ::globfree(&g);
      throw Error(spec + ": cannot expand pattern (" + (rc == GLOB_ABORTED ? "read error" : "out of memory") + ")");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    ::globfree(&g);
    std::sort(matches.begin(), matches.end());
    for (auto& m : matches) {
      if (::stat(m.c_str(), &st) != 0) throw Error(os_error(m, "cannot access input"));
      if (!S_ISDIR(st.st_mode)) add(m);  // a pattern names files; directories it happens to match are skipped
    }
  }
  return out;
}

}  // namespace lmforge::data
