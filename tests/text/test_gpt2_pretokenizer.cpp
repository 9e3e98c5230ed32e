// defines: tests of the GPT-2 pre-tokenizer's splits (the regex's first-alternative-wins traps) and its classes
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/gpt2_pretokenizer.h"
#include "text/unicode_classes.h"

namespace lmforge::text {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> pieces;
  for_each_gpt2_piece(text, [&](const uint8_t* p, size_t n) { pieces.emplace_back(reinterpret_cast<const char*>(p), n); });
  return pieces;
}

using V = std::vector<std::string>;

// Expected splits: Hugging Face tokenizers 0.23.2 byteLevelPreTokenizer().preTokenizeString() gives the same.
TEST(Gpt2PreTokenizer, Contractions) {
  EXPECT_EQ(split("'sss"), (V{"'s", "ss"}));             // first alternative wins, not the longest
  EXPECT_EQ(split("I'M"), (V{"I", "'", "M"}));            // case-sensitive
  EXPECT_EQ(split("we'll've"), (V{"we", "'ll", "'ve"}));
  EXPECT_EQ(split("don\xE2\x80\x99t"), (V{"don", "\xE2\x80\x99", "t"}));  // curly apostrophe is punctuation
  EXPECT_EQ(split("?'s"), (V{"?'", "s"}));                // the punctuation run swallows the apostrophe
  EXPECT_EQ(split(" 's"), (V{" '", "s"}));
  EXPECT_EQ(split("'"), (V{"'"}));
  EXPECT_EQ(split("'r"), (V{"'", "r"}));
}

TEST(Gpt2PreTokenizer, Whitespace) {
  EXPECT_EQ(split("a   b"), (V{"a", "  ", " b"}));        // the last space goes to the word
  EXPECT_EQ(split("a\n\nb"), (V{"a", "\n", "\n", "b"}));  // a newline does not
  EXPECT_EQ(split("a \tb"), (V{"a", " ", "\t", "b"}));
  EXPECT_EQ(split("a\t b"), (V{"a", "\t", " b"}));
  EXPECT_EQ(split("a  "), (V{"a", "  "}));                // trailing run kept whole
  EXPECT_EQ(split(" "), (V{" "}));
  EXPECT_EQ(split("x\xC2\xA0y"), (V{"x", "\xC2\xA0", "y"}));  // NBSP is \s but not the optional space
  EXPECT_EQ(split("1 23 !!"), (V{"1", " 23", " !!"}));
  EXPECT_EQ(split("abc123def"), (V{"abc", "123", "def"}));
}

TEST(Gpt2PreTokenizer, MarksAndMalformedBytes) {
  EXPECT_EQ(split("e\xCC\x81t"), (V{"e", "\xCC\x81", "t"}));  // combining acute is neither letter nor number
  EXPECT_EQ(split("a\xFF!b"), (V{"a", "\xFF!", "b"}));         // invalid byte = one "other" character
  EXPECT_EQ(split("\xE2\x82"), (V{"\xE2\x82"}));               // truncated sequence
}

TEST(Gpt2PreTokenizer, UnicodeClasses) {
  EXPECT_EQ(char_class('a'), kLetter);
  EXPECT_EQ(char_class('7'), kNumber);
  EXPECT_EQ(char_class(0x00B2), kNumber);  // superscript two (No)
  EXPECT_EQ(char_class(0x2167), kNumber);  // Roman numeral eight (Nl)
  EXPECT_EQ(char_class(0x0085), kSpace);
  EXPECT_EQ(char_class(0x3000), kSpace);
  EXPECT_EQ(char_class(0x202F), kSpace);
  EXPECT_EQ(char_class(0xFEFF), kOther);  // BOM is not White_Space
  EXPECT_EQ(char_class(0x200B), kOther);
  EXPECT_EQ(char_class(0x180E), kOther);
  EXPECT_EQ(char_class(0x001C), kOther);
  EXPECT_EQ(char_class(0x0301), kOther);
  EXPECT_EQ(char_class(0x4E2D), kLetter);
  EXPECT_EQ(char_class(0x2EBF0), kLetter);  // CJK Extension I (Unicode 15.1)
  EXPECT_EQ(char_class(0x10D4A), kLetter);  // Garay (Unicode 16)
  EXPECT_EQ(char_class(0x16D70), kNumber);  // Kirat Rai digit zero (Unicode 16)
  EXPECT_EQ(char_class(0x1CCF0), kNumber);  // outlined digit zero (Unicode 16)
  EXPECT_EQ(char_class(0x10FFFF), kOther);
  EXPECT_EQ(char_class(0x110000), kOther);
}

}  // namespace
}  // namespace lmforge::text
