// defines: LineReader on input that real tools accept and a naive reader gets wrong: a UTF-8 byte-order mark
//          (skipped at the file's start only), UTF-16 text (refused saying so), gzip's trailing zero padding and
//          zstd skippable frames (read as gzip(1) and zstd(1) do), and line numbers in compressed files that
//          match the decoded lines
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "data/line_reader.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::data::LineBlock;
using lmforge::data::LineReader;
using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

std::string read_all(const std::string& path) {
  auto r = LineReader::open(path);
  LineBlock b;
  std::string out;
  while (r->next_block(b, 5)) out += b.bytes;
  return out;
}

std::string error_reading(const std::string& path) {
  try {
    read_all(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void sh(const std::string& cmd) {
  const auto r = run_command(cmd);
  ASSERT_EQ(r.status, 0) << cmd << "\n" << r.output;
}

const std::string kText = "{\"text\": \"one\"}\n{\"text\": \"\xc3\xa9t\xc3\xa9\"}\n";

TEST(LineReaderHostile, Utf8ByteOrderMarkIsSkippedAtTheStartOnly) {
  TempDir dir;
  write_file(dir.file("bom.jsonl"), "\xEF\xBB\xBF" + kText + "\xEF\xBB\xBF{}\n");
  EXPECT_EQ(read_all(dir.file("bom.jsonl")), kText + "\xEF\xBB\xBF{}\n");  // mid-file it is text, as any byte
  sh("gzip -c " + dir.file("bom.jsonl") + " > " + dir.file("bom.jsonl.gz"));
  EXPECT_EQ(read_all(dir.file("bom.jsonl.gz")), kText + "\xEF\xBB\xBF{}\n");
}

TEST(LineReaderHostile, Utf16IsRefusedSayingSoWithOrWithoutItsByteOrderMark) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), kText);
  sh("iconv -f UTF-8 -t UTF-16 " + dir.file("in.jsonl") + " > " + dir.file("bom16.jsonl"));  // with a BOM
  sh("iconv -f UTF-8 -t UTF-16LE " + dir.file("in.jsonl") + " > " + dir.file("le.jsonl"));
  sh("iconv -f UTF-8 -t UTF-16BE " + dir.file("in.jsonl") + " > " + dir.file("be.jsonl"));
  for (const char* name : {"bom16.jsonl", "le.jsonl", "be.jsonl"}) {
    const std::string error = error_reading(dir.file(name));
    EXPECT_NE(error.find(std::string(name) + ":1: this file is UTF-16"), std::string::npos) << error;
    EXPECT_NE(error.find("iconv -f UTF-16 -t UTF-8"), std::string::npos) << error;
  }
  EXPECT_NE(error_reading(dir.file("be.jsonl")).find("big-endian"), std::string::npos);
}

TEST(LineReaderHostile, GzipTrailingZeroPaddingIsAcceptedAsGzipDoes) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), kText);
  sh("gzip -c " + dir.file("in.jsonl") + " > " + dir.file("pad.jsonl.gz") + " && head -c 10240 /dev/zero >> " +
     dir.file("pad.jsonl.gz"));
  sh("gzip -dc " + dir.file("pad.jsonl.gz") + " > /dev/null");  // the reference accepts it
  EXPECT_EQ(read_all(dir.file("pad.jsonl.gz")), kText);
  // Anything else after the padding is not gzip data.
  write_file(dir.file("junk.jsonl.gz"), read_file(dir.file("pad.jsonl.gz")) + "junk");
  EXPECT_NE(error_reading(dir.file("junk.jsonl.gz")).find("data after the gzip stream's zero padding"),
            std::string::npos);
}

TEST(LineReaderHostile, ZstdSkippableFramesAreSkippedAsZstdDoes) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), kText);
  // A skippable frame (magic 0x184D2A50, 4-byte little-endian length, payload) first and between frames.
  const std::string skippable = std::string("\x50\x2A\x4D\x18\x05\x00\x00\x00hello", 13);
  sh("zstd -q -c " + dir.file("in.jsonl") + " > " + dir.file("frame.zst"));
  write_file(dir.file("skip.jsonl.zst"), skippable + read_file(dir.file("frame.zst")) + skippable +
                                             read_file(dir.file("frame.zst")));
  sh("zstd -q -dc " + dir.file("skip.jsonl.zst") + " > /dev/null");  // the reference accepts it
  EXPECT_EQ(read_all(dir.file("skip.jsonl.zst")), kText + kText);
}

TEST(LineReaderHostile, LineNumbersInCompressedFilesCountDecodedLines) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 5000; ++i) text += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  write_file(dir.file("in.jsonl"), text);
  for (const char* tool : {"gzip", "zstd -q", "xz"}) {
    sh(std::string(tool) + " -c " + dir.file("in.jsonl") + " > " + dir.file("c"));
    auto r = LineReader::open(dir.file("c"));
    LineBlock b;
    uint64_t lines = 0, expect_first = 1;
    while (r->next_block(b, 1000)) {
      EXPECT_EQ(b.first_line, expect_first) << tool;
      // The block's first line is the file's line first_line: its text says which it is.
      EXPECT_EQ(b.bytes.substr(0, b.bytes.find('\n')), "{\"text\": \"line " + std::to_string(b.first_line) + "\"}")
          << tool;
      expect_first += b.line_count;
      lines += b.line_count;
    }
    EXPECT_EQ(lines, 5000u) << tool;
  }
}

TEST(LineReaderHostile, TruncatedCompressedFileNamesTheLineAfterTheLastDecodedOne) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 20000; ++i) text += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  write_file(dir.file("in.jsonl"), text);
  for (const std::string tool : {"gzip", "zstd", "xz"}) {
    sh(tool + " -q -c " + dir.file("in.jsonl") + " > " + dir.file("c"));
    const std::string whole = read_file(dir.file("c"));
    write_file(dir.file("t"), whole.substr(0, whole.size() / 2));
    // The reference: the complete lines the tool itself decodes from the truncated file.
    const auto r = run_command(tool + " -dc " + dir.file("t") + " 2>/dev/null | wc -l");
    const long complete = std::stol(r.output);
    ASSERT_GT(complete, 1000) << tool;
    const std::string error = error_reading(dir.file("t"));
    EXPECT_NE(error.find("/t:" + std::to_string(complete + 1) + ": truncated"), std::string::npos)
        << tool << " decodes " << complete << " lines: " << error;
  }
}

}  // namespace
