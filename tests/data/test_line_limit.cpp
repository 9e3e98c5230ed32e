// defines: tests of the line-length bound of LineReader/LineBlocker: an over-long line is listed in
//          LineBlock::overlong with its bytes dropped, later lines keep their numbers, memory stays bounded while a
//          line that never ends is read past (plain and gzip), and blocks of no lines keep coming meanwhile
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "data/line_reader.h"
#include "test_util.h"

namespace {

using lmforge::data::LineBlock;
using lmforge::data::LineReader;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

struct Lines {
  std::vector<std::string> text;         // every line, over-long ones as ""
  std::vector<uint64_t> overlong;        // their 1-based numbers
  size_t empty_blocks = 0;               // blocks of no lines (progress while dropping)
  size_t largest_block = 0;
  std::vector<uint64_t> bytes_read_at_empty_blocks;
};

Lines read_all(LineReader& r, size_t target) {
  Lines out;
  LineBlock b;
  uint64_t expect_first = 1;
  while (r.next_block(b, target)) {
    EXPECT_EQ(b.first_line, expect_first);
    expect_first += b.line_count;
    out.largest_block = std::max(out.largest_block, b.bytes.capacity());
    if (b.line_count == 0) {
      EXPECT_TRUE(b.bytes.empty());
      ++out.empty_blocks;
      out.bytes_read_at_empty_blocks.push_back(r.file_bytes_read());
      continue;
    }
    size_t pos = 0;
    for (uint64_t n = 0; n < b.line_count; ++n) {
      size_t end = b.bytes.find('\n', pos);
      if (end == std::string::npos) end = b.bytes.size();
      out.text.push_back(b.bytes.substr(pos, end - pos));
      pos = end + 1;
    }
    for (uint64_t i : b.overlong) {
      EXPECT_EQ(out.text[b.first_line - 1 + i], "");
      out.overlong.push_back(b.first_line + i);
    }
  }
  return out;
}

TEST(LineLimit, OverlongLineIsListedDroppedAndLaterLinesKeepTheirNumbers) {
  TempDir dir;
  const std::string longline(10000, 'x');
  write_file(dir.file("in.jsonl"), "a\nbb\n" + longline + "\nccc\n" + longline + "y" + "\nlast " + std::string(95, 'z'));
  for (size_t target : {1, 7, 4096, 1 << 20}) {
    auto r = LineReader::open(dir.file("in.jsonl"), 100);
    const Lines got = read_all(*r, target);
    ASSERT_EQ(got.text.size(), 6u) << target;
    EXPECT_EQ(got.text[0], "a");
    EXPECT_EQ(got.text[1], "bb");
    EXPECT_EQ(got.text[3], "ccc");
    EXPECT_EQ(got.text[5], "last " + std::string(95, 'z'));  // exactly the limit: kept
    EXPECT_EQ(got.overlong, (std::vector<uint64_t>{3, 5})) << target;
  }
}

TEST(LineLimit, LineThatNeverEndsKeepsMemoryBoundedAndYieldsEmptyBlocks) {
  TempDir dir;
  // 48 MB of NUL bytes and no '\n' at all, as from /dev/zero.
  write_file(dir.file("zeros.jsonl"), "{\"text\": \"ok\"}\n" + std::string(48u << 20, '\0'));
  auto r = LineReader::open(dir.file("zeros.jsonl"), 1 << 20);
  const Lines got = read_all(*r, 1 << 20);
  ASSERT_EQ(got.text.size(), 2u);
  EXPECT_EQ(got.overlong, (std::vector<uint64_t>{2}));
  EXPECT_LT(got.largest_block, 4u << 20);  // never the whole 48 MB
  EXPECT_GE(got.empty_blocks, 40u);        // about one per MB dropped: progress keeps moving
  EXPECT_TRUE(std::is_sorted(got.bytes_read_at_empty_blocks.begin(), got.bytes_read_at_empty_blocks.end()));
  EXPECT_LT(got.bytes_read_at_empty_blocks.front(), got.bytes_read_at_empty_blocks.back());
}

// gzip of `plain_bytes` NUL bytes, made by zlib's gzip writer in one pass (about 1 KB per MB).
void write_gzip_zeros(const std::string& path, size_t plain_bytes) {
  gzFile gz = gzopen(path.c_str(), "wb9");
  ASSERT_NE(gz, nullptr);
  const std::string chunk(1 << 20, '\0');
  for (size_t done = 0; done < plain_bytes; done += chunk.size())
    ASSERT_EQ(gzwrite(gz, chunk.data(), static_cast<unsigned>(chunk.size())), static_cast<int>(chunk.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

TEST(LineLimit, GzipOfZerosIsReadPastWithoutHoldingIt) {
  TempDir dir;
  write_gzip_zeros(dir.file("zeros.jsonl.gz"), size_t(64) << 20);  // 64 MB decoded
  auto r = LineReader::open(dir.file("zeros.jsonl.gz"), 1 << 20);
  const Lines got = read_all(*r, 1 << 20);
  ASSERT_EQ(got.text.size(), 1u);
  EXPECT_EQ(got.overlong, (std::vector<uint64_t>{1}));
  EXPECT_LT(got.largest_block, 4u << 20);
  EXPECT_GE(got.empty_blocks, 50u);
}

}  // namespace
