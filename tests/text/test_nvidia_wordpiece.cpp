// WordPieceFlavor::kNvidia (NVIDIA DeepLearningExamples' tokenization.py, the tokenizer of create_pretraining_data.py)
// against the tests' Python re-statement of it, for every code point of the BMP and the supplementary ranges BERT
// treats specially, uncased and cased: clean text deleting every C* character, CJK padding, lower-casing then accent
// stripping, punctuation, and the never_split words kept whole.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util.h"
#include "text/bert_wordpiece.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::shared_path;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += char(cp);
  else if (cp < 0x800) s += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
  else if (cp < 0x10000) s += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
  else
    s += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)),
          char(0x80 | (cp & 0x3F))};
  return s;
}

void expect_ranges_match(bool lower, const char* lo, const char* hi) {
  const std::string vocab = shared_path("data/vocab/bert-base-uncased-vocab.txt");
  const auto r = run_command("/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) +
                             "/tests/text/nvidia_tokenizer_reference.py " + vocab + " " + lo + " " + hi +
                             (lower ? "" : " cased"));
  ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
  lmforge::text::WordPieceOptions o;
  o.flavor = lmforge::text::WordPieceFlavor::kNvidia;
  o.lower_case = lower;
  const auto tokenizer = lmforge::text::make_bert_wordpiece_tokenizer(vocab, o);
  const auto encoder = tokenizer->make_encoder();
  std::istringstream lines(r.output);
  int checked = 0, failed = 0;
  std::vector<int32_t> ids;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    uint32_t cp = 0;
    words >> cp;
    std::vector<int32_t> expected;
    for (int32_t id; words >> id;) expected.push_back(id);
    const std::string c = utf8(cp);
    ids.clear();
    encoder->encode("x" + c + "y " + c + "Z [SEP]" + c, ids);
    if (ids != expected && ++failed <= 10) ADD_FAILURE() << "U+" << std::hex << cp << (lower ? " uncased" : " cased");
    ++checked;
  }
  EXPECT_GT(checked, 200);
  EXPECT_EQ(failed, 0);
}

TEST(NvidiaWordPiece, EveryBmpCodePointMatchesTheReStatementUncased) { expect_ranges_match(true, "0", "0xFFFF"); }
TEST(NvidiaWordPiece, EveryBmpCodePointMatchesTheReStatementCased) { expect_ranges_match(false, "0", "0xFFFF"); }
TEST(NvidiaWordPiece, SupplementaryCodePointsMatchTheReStatement) {
  expect_ranges_match(true, "0x10000", "0x10FFF");   // scripts, Cn gaps
  expect_ranges_match(true, "0x1F000", "0x1FFFF");   // emoji and symbols
  expect_ranges_match(true, "0x2B700", "0x2B9FF");   // CJK Extension D/E boundary
  expect_ranges_match(true, "0x2F800", "0x30100");   // compatibility ideographs, Extension G (not padded)
  expect_ranges_match(true, "0xE0000", "0xE01FF");   // tags (Cf), variation selectors (Mn), unassigned
  expect_ranges_match(true, "0xF0000", "0xF00FF");   // private use
}

}  // namespace
