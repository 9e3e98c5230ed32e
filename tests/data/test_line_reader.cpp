// defines: tests of LineReader over plain, gzip, zstd and xz files made by the standard command-line tools, and of
//          expand_input_specs()
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/line_reader.h"
#include "util/error.h"

namespace fs = std::filesystem;
using lmforge::Error;
using namespace lmforge::data;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "lmforge-lines-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void sh(const std::string& cmd) { ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd; }

// Compresses `plain` with the real tools: <plain>.gz, .zst, .xz.
void compress_all(const std::string& plain) {
  sh("gzip -c '" + plain + "' > '" + plain + ".gz'");
  sh("zstd -q -c '" + plain + "' > '" + plain + ".zst'");
  sh("xz -c '" + plain + "' > '" + plain + ".xz'");
}

// Deterministic text that compresses only moderately, so compressed files have a middle worth corrupting.
std::string make_text(size_t lines) {
  std::string s;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < lines; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    size_t len = x % 300;
    s += "{\"text\": \"line " + std::to_string(i) + " ";
    for (size_t k = 0; k < len; ++k) {
      x ^= x << 13; x ^= x >> 7; x ^= x << 17;
      s += static_cast<char>('a' + x % 26);
      if (x % 7 == 0) s += ' ';
    }
    s += "\"}";
    if (i % 10 == 3) s += '\r';  // CRLF lines keep their '\r'
    s += '\n';
    if (i % 17 == 5) s += '\n';  // blank lines are lines too
  }
  s += "{\"text\": \"last line without newline \xc3\xa9\"}";
  return s;
}

struct ReadResult {
  std::string bytes;
  uint64_t lines = 0;
  size_t blocks = 0;
};

// Reads the whole file, checking the block invariants on the way.
ReadResult read_all(const std::string& path, size_t target) {
  auto r = LineReader::open(path);
  ReadResult res;
  LineBlock b;
  uint64_t next = 1;
  while (r->next_block(b, target)) {
    EXPECT_EQ(b.first_line, next);
    EXPECT_GE(b.line_count, 1u);
    EXPECT_FALSE(b.bytes.empty());
    uint64_t nl = static_cast<uint64_t>(std::count(b.bytes.begin(), b.bytes.end(), '\n'));
    EXPECT_EQ(b.line_count, nl + (b.bytes.back() == '\n' ? 0 : 1));
    next += b.line_count;
    res.bytes += b.bytes;
    res.lines += b.line_count;
    ++res.blocks;
  }
  EXPECT_FALSE(r->next_block(b, target));
  EXPECT_EQ(r->file_bytes_read(), fs::file_size(path));
  return res;
}

uint64_t count_lines(const std::string& s) {
  uint64_t n = static_cast<uint64_t>(std::count(s.begin(), s.end(), '\n'));
  return n + (!s.empty() && s.back() != '\n' ? 1 : 0);
}

// Reads `path` to the end and returns the Error message (empty if none was thrown).
std::string read_error(const std::string& path, size_t target = 4096) {
  try {
    auto r = LineReader::open(path);
    LineBlock b;
    while (r->next_block(b, target)) {
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The line number in "<path>:<line>: ..." of an error message.
uint64_t error_line(const std::string& msg, const std::string& path) {
  if (msg.rfind(path + ":", 0) != 0) return 0;
  return std::strtoull(msg.c_str() + path.size() + 1, nullptr, 10);
}

}  // namespace

TEST(LineReader, AllFormatsGiveIdenticalLines) {
  TempDir tmp;
  const std::string text = make_text(3000);
  const std::string plain = tmp / "in.jsonl";
  write_file(plain, text);
  compress_all(plain);
  for (const char* ext : {"", ".gz", ".zst", ".xz"}) {
    for (size_t target : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
      ReadResult r = read_all(plain + ext, target);
      EXPECT_TRUE(r.bytes == text) << ext << " target " << target;
      EXPECT_EQ(r.lines, count_lines(text)) << ext;
      if (target == 1) {
        EXPECT_EQ(r.blocks, r.lines) << ext;  // a tiny target gives one line per block
      }
    }
  }
}

TEST(LineReader, FormatComesFromMagicNotName) {
  TempDir tmp;
  const std::string text = "{\"a\":1}\n{\"a\":2}\n";
  write_file(tmp / "x.jsonl", text);
  sh("gzip -c '" + (tmp / "x.jsonl") + "' > '" + (tmp / "gz-named.jsonl") + "'");
  write_file(tmp / "plain-named.jsonl.zst", text);
  EXPECT_EQ(read_all(tmp / "gz-named.jsonl", 100).bytes, text);
  EXPECT_EQ(read_all(tmp / "plain-named.jsonl.zst", 100).bytes, text);
}

TEST(LineReader, ConcatenatedMembersFramesAndStreams) {
  TempDir tmp;
  const std::string a = "first part\nsecond line\n", b = "third line\nlast without newline";
  write_file(tmp / "a", a);
  write_file(tmp / "b", b);
  compress_all(tmp / "a");
  compress_all(tmp / "b");
  for (const char* ext : {".gz", ".zst", ".xz"}) {
    std::string cat = tmp / (std::string("cat") + ext);
    write_file(cat, read_file(tmp / "a" + ext) + read_file(tmp / "b" + ext));
    ReadResult r = read_all(cat, 4);
    EXPECT_EQ(r.bytes, a + b) << ext;
    EXPECT_EQ(r.lines, 4u) << ext;
  }
}

TEST(LineReader, EmptyFiles) {
  TempDir tmp;
  write_file(tmp / "e", "");
  compress_all(tmp / "e");
  for (const char* ext : {"", ".gz", ".zst", ".xz"}) {
    ReadResult r = read_all(tmp / "e" + ext, 100);
    EXPECT_EQ(r.blocks, 0u) << ext;
  }
}

TEST(LineReader, CrlfAndMissingFinalNewline) {
  TempDir tmp;
  write_file(tmp / "c", "a\r\nb\r\nc");
  auto r = LineReader::open(tmp / "c");
  LineBlock b;
  ASSERT_TRUE(r->next_block(b, 1));
  EXPECT_EQ(b.bytes, "a\r\n");
  ASSERT_TRUE(r->next_block(b, 1));
  EXPECT_EQ(b.bytes, "b\r\n");
  EXPECT_EQ(b.first_line, 2u);
  ASSERT_TRUE(r->next_block(b, 1));
  EXPECT_EQ(b.bytes, "c");
  EXPECT_EQ(b.first_line, 3u);
  EXPECT_EQ(b.line_count, 1u);
  EXPECT_FALSE(r->next_block(b, 1));
}

TEST(LineReader, LineLongerThanTarget) {
  TempDir tmp;
  std::string big(5u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  const std::string text = "short\n" + big + "\nafter\n";
  write_file(tmp / "long", text);
  compress_all(tmp / "long");
  for (const char* ext : {"", ".gz", ".zst", ".xz"}) {
    auto r = LineReader::open(tmp / "long" + ext);
    LineBlock b;
    std::vector<std::string> blocks;
    while (r->next_block(b, 3)) blocks.push_back(b.bytes);
    ASSERT_EQ(blocks.size(), 3u) << ext;
    EXPECT_EQ(blocks[0], "short\n");
    EXPECT_TRUE(blocks[1] == big + "\n") << ext;
    EXPECT_EQ(blocks[2], "after\n");
  }
}

TEST(LineReader, TruncatedCompressedInputIsAnError) {
  TempDir tmp;
  const std::string text = make_text(3000);
  write_file(tmp / "t", text);
  compress_all(tmp / "t");
  const uint64_t total = count_lines(text);
  for (const char* ext : {".gz", ".zst", ".xz"}) {
    std::string full = read_file(tmp / "t" + ext);
    // Cut in the middle, and cut only the last few bytes (the trailer/checksum that says the stream is complete).
    for (size_t keep : {full.size() / 2, full.size() - 3}) {
      std::string cut = tmp / ("cut" + std::to_string(keep) + ext);
      write_file(cut, full.substr(0, keep));
      std::string msg = read_error(cut);
      ASSERT_FALSE(msg.empty()) << ext << " truncated to " << keep << " read without error";
      uint64_t line = error_line(msg, cut);
      EXPECT_GE(line, 1u) << msg;
      EXPECT_LE(line, total) << msg;
      if (keep == full.size() / 2) {
        EXPECT_LT(line, total) << msg;
      }
      EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("corrupt") != std::string::npos) << msg;
    }
  }
}

TEST(LineReader, CorruptByteIsAnError) {
  TempDir tmp;
  const std::string text = make_text(3000);
  write_file(tmp / "k", text);
  compress_all(tmp / "k");
  for (const char* ext : {".gz", ".zst", ".xz"}) {
    std::string data = read_file(tmp / "k" + ext);
    data[data.size() / 2] = static_cast<char>(data[data.size() / 2] ^ 0x5a);
    std::string bad = tmp / ("bad" + std::string(ext));
    write_file(bad, data);
    std::string msg = read_error(bad);
    ASSERT_FALSE(msg.empty()) << ext << " with a corrupt byte read without error";
    EXPECT_GE(error_line(msg, bad), 1u) << msg;
  }
}

TEST(LineReader, Bzip2IsRefusedNotReadAsText) {
  TempDir tmp;
  write_file(tmp / "x.jsonl.bz2", std::string("BZh91AY&SY") + std::string(40, '\x01'));
  try {
    LineReader::open(tmp / "x.jsonl.bz2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bzip2"), std::string::npos) << e.what();
  }
}

TEST(LineReader, UnreadablePath) {
  try {
    LineReader::open("/nonexistent/lmforge/in.jsonl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/lmforge/in.jsonl"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  TempDir tmp;
  EXPECT_THROW(LineReader::open(tmp.path()), Error);
}

TEST(ExpandInputSpecs, FilesDirectoriesAndGlobs) {
  TempDir tmp;
  fs::create_directory(tmp / "d");
  fs::create_directory(tmp / "d/sub.jsonl");  // a directory, even with a matching name, is not an input file
  for (const char* n : {"b.jsonl", "a.jsonl.gz", "c.json", "d.jsonl.zst", "e.json.xz", "notes.txt", "f.jsonl.bz2"})
    write_file(tmp / (std::string("d/") + n), "{}\n");
  write_file(tmp / "top.jsonl", "{}\n");

  auto dir = expand_input_specs({tmp / "d"});
  EXPECT_EQ(dir, (std::vector<std::string>{tmp / "d/a.jsonl.gz", tmp / "d/b.jsonl", tmp / "d/c.json",
                                           tmp / "d/d.jsonl.zst", tmp / "d/e.json.xz"}));

  // Files stay in the order given; a glob's matches are sorted; repeats are dropped.
  auto mixed = expand_input_specs({tmp / "top.jsonl", tmp / "d/*.json*", tmp / "d/b.jsonl", tmp / "d/../top.jsonl"});
  EXPECT_EQ(mixed, (std::vector<std::string>{tmp / "top.jsonl", tmp / "d/a.jsonl.gz", tmp / "d/b.jsonl",
                                             tmp / "d/c.json", tmp / "d/d.jsonl.zst", tmp / "d/e.json.xz",
                                             tmp / "d/f.jsonl.bz2"}));
  // An explicit file is taken whatever its name.
  EXPECT_EQ(expand_input_specs({tmp / "d/notes.txt"}), std::vector<std::string>{tmp / "d/notes.txt"});
}

TEST(ExpandInputSpecs, Errors) {
  TempDir tmp;
  fs::create_directory(tmp / "empty");
  auto msg_of = [](const std::vector<std::string>& specs) {
    try {
      expand_input_specs(specs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string m = msg_of({tmp / "missing.jsonl"});
  EXPECT_NE(m.find("missing.jsonl"), std::string::npos) << m;
  EXPECT_NE(m.find("No such file"), std::string::npos) << m;
  m = msg_of({tmp / "*.jsonl"});
  EXPECT_NE(m.find("no file matches"), std::string::npos) << m;
  m = msg_of({tmp / "empty"});
  EXPECT_NE(m.find("no input files"), std::string::npos) << m;
  if (geteuid() != 0) {  // root reads everything, so permission errors only show for ordinary users
    write_file(tmp / "locked.jsonl", "{}\n");
    chmod((tmp / "locked.jsonl").c_str(), 0);
    m = msg_of({tmp / "locked.jsonl"});
    EXPECT_NE(m.find("Permission denied"), std::string::npos) << m;
  }
}
