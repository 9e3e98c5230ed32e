// prep --input-format text --tokenizer-type WordLevel: the bytes of the Megatron v1.1.5 project's word-level script
// (re-stated in word_level_reference.py) for raw text with blank lines, whitespace runs of every Python kind, words
// outside the vocabulary, universal newlines and invalid UTF-8 (repaired as Python's errors="replace"); the tokenizer's Python str.split() and its errors.
#include <gtest/gtest.h>

#include "prep/prep.h"
#include "test_util.h"
#include "text/python_str.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace prep = lmforge::prep;

// A vocabulary of whole words, no byte tokens, ids not in file order.
const char* kVocab =
    "{\"<unk>\": 3, \"<|endoftext|>\": 0, \"the\": 7, \"cat\": 2, \"sat\": 5, \"on\": 4, \"mat\": 1, \"caf\\u00e9\": 6, "
    "\"\\u4e2d\\u6587\": 8, \"a\": 9, \"b\": 10, \"end\": 11}";

std::string raw_text() {
  std::string t = "the cat sat on the mat\n";
  t += "\n";                                   // empty line: an EOD-only document
  t += "   \t  \n";                            // whitespace only: the same
  t += "the  cat\t\tsat   on\x0bthe\x0cmat\n";  // runs of ASCII whitespace, \v and \f
  t += "a\x1c" "b\x1d" "a\x1e" "b\x1f" "end\n";  // U+001C-U+001F split words in Python
  t += "a\xc2\x85" "b\xc2\xa0" "a\xe3\x80\x80" "b\xe2\x80\x83" "end\n";  // U+0085, U+00A0, U+3000, U+2003
  t += "caf\xc3\xa9 cafe CAT \xe4\xb8\xad\xe6\x96\x87 zebra\n";      // unknown words -> <unk>
  t += "mac\rline\r\nends\r\rhere\n";  // lone \r, \r\n, and an empty line between two \r
  t += "a\xe2\x80\xa8" "b\n";          // U+2028 splits words (str.split) but does not end a line (readlines)
  t += "the \xff cat\xc3\n";          // invalid UTF-8: U+FFFD, as Python's errors="replace" (counted)
  t += "last line without newline";
  return t;
}

TEST(WordLevel, RawTextIsByteIdenticalToTheSeedsScript) {
  TempDir dir;
  write_file(dir.file("vocab.json"), kVocab);
  write_file(dir.file("raw.txt"), raw_text());
  const auto r = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                             "/tests/prep/word_level_reference.py " + dir.file("raw.txt") + " " +
                             dir.file("vocab.json") + " " + dir.file("ref"));
  ASSERT_EQ(r.status, 0) << r.output;
  for (int workers : {1, 2}) {
    prep::PrepOptions o;
    o.inputs = {dir.file("raw.txt")};
    o.output_prefix = dir.file("w" + std::to_string(workers));
    o.input_format = "text";
    o.tokenizer.type = "WordLevel";
    o.tokenizer.vocab_file = dir.file("vocab.json");
    o.append_eod = true;
    o.workers = workers;
    o.block_bytes = 16;  // a block per line or two
    o.progress_seconds = 1e9;
    const prep::PrepSummary s = prep::run_prep(o);
    EXPECT_EQ(s.documents, 15u);
    EXPECT_EQ(s.invalid_utf8_replaced, 2u);
    ASSERT_EQ(s.outputs, std::vector<std::string>{o.output_prefix + "_text_sentence"});
    EXPECT_TRUE(read_file(o.output_prefix + "_text_sentence.bin") == read_file(dir.file("ref.bin"))) << workers;
    EXPECT_TRUE(read_file(o.output_prefix + "_text_sentence.idx") == read_file(dir.file("ref.idx"))) << workers;
  }
}

TEST(WordLevel, SplitIsPythonsStrSplit) {
  std::vector<std::string_view> words;
  lmforge::text::python_split("\xe3\x80\x80 a\xc2\xa0" "b\x1c" "c  d\xe2\x80\x8b" "e ", words);
  // U+200B (zero width space) is not whitespace in Python: it stays inside the word.
  const std::vector<std::string_view> expected = {"a", "b", "c", "d\xe2\x80\x8b" "e"};
  EXPECT_EQ(words, expected);
  EXPECT_EQ(lmforge::text::python_strip(" \xc2\x85x y\xe3\x80\x80\n"), "x y");
  EXPECT_EQ(lmforge::text::python_strip("\x0b\x0c"), "");
  // Only the ends are decoded: whitespace inside stays, a multi-byte character at either end is kept whole.
  EXPECT_EQ(lmforge::text::python_strip("\xe3\x80\x80\xc3\xa9 \xe3\x80\x80 \xc3\xa9\xc2\x85"), "\xc3\xa9 \xe3\x80\x80 \xc3\xa9");
  EXPECT_EQ(lmforge::text::python_strip("\xe2\x80\x8b"), "\xe2\x80\x8b");  // U+200B is no whitespace
  EXPECT_EQ(lmforge::text::python_strip(""), "");
  std::vector<std::string> lines;
  lmforge::text::for_each_universal_line("a\rb\r\rc\r", [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_EQ(lines, (std::vector<std::string>{"a", "b", "", "c"}));
}

// Python's strict decoding, also where the ASCII before a bad byte is scanned 16 bytes at a time.
TEST(WordLevel, InvalidUtf8IsFoundAtItsByteAfterLongAsciiRuns) {
  using lmforge::text::find_invalid_utf8;
  const std::string ascii(37, 'a');
  EXPECT_EQ(find_invalid_utf8(ascii), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8(ascii + "\xff" + ascii), 37u);
  EXPECT_EQ(find_invalid_utf8(std::string(16, 'a') + "\x80"), 16u);
  EXPECT_EQ(find_invalid_utf8(std::string(32, 'a') + "\xc3"), 32u);  // truncated at the end
  EXPECT_EQ(find_invalid_utf8(ascii + "\xc3\xa9" + ascii + "\xed\xa0\x80"), 76u);  // a surrogate
  EXPECT_EQ(find_invalid_utf8(ascii + "\xe2\x82\xac" + ascii + "\xf0\x9f\x98\x80" + ascii), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8(ascii + "\xc0\xaf"), 37u);  // overlong
}

TEST(WordLevel, VocabularyErrorsNameTheFileAndToken) {
  TempDir dir;
  lmforge::text::TokenizerOptions t;
  t.type = "WordLevel";
  t.vocab_file = dir.file("v.json");
  write_file(t.vocab_file, "{\"a\": 1}");
  try {
    lmforge::text::make_tokenizer(t);
    ADD_FAILURE() << "a vocabulary without <unk> was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("<unk>"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(t.vocab_file), std::string::npos) << e.what();
  }
  write_file(t.vocab_file, "[1, 2]");
  EXPECT_THROW(lmforge::text::make_tokenizer(t), Error);
  write_file(t.vocab_file, "{\"<unk>\": 0}");
  t.eod_token = "</s>";
  EXPECT_THROW(lmforge::text::make_tokenizer(t), Error);
  // --append-eod without an EOD in the vocabulary stops before anything is written.
  t.eod_token.clear();
  prep::PrepOptions o;
  write_file(dir.file("raw.txt"), "x\n");
  o.inputs = {dir.file("raw.txt")};
  o.output_prefix = dir.file("out");
  o.input_format = "text";
  o.tokenizer = t;
  o.append_eod = true;
  o.progress_seconds = 1e9;
  EXPECT_THROW(prep::run_prep(o), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_sentence.bin")));
}

}  // namespace
