// defines: tests of json_quote() and json_number() (JSON written by hand) and input_location()
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "util/error.h"
#include "util/json_text.h"

namespace {

using lmforge::Error;
using lmforge::json_number;
using lmforge::json_quote;

TEST(JsonText, QuoteEscapesLikeSerdeJson) {
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(json_quote(std::string("\0", 1)), "\"\\u0000\"");
  EXPECT_EQ(json_quote("/ \x7f h\xC3\xA9 \xE2\x82\xAC"), "\"/ \x7f h\xC3\xA9 \xE2\x82\xAC\"");  // copied as is
}

TEST(JsonText, NumbersRoundTripAndDoublesLookLikeDoubles) {
  EXPECT_EQ(json_number(int64_t{-42}), "-42");
  EXPECT_EQ(json_number(uint64_t{18446744073709551615ull}), "18446744073709551615");
  EXPECT_EQ(json_number(1.0), "1.0");
  EXPECT_EQ(json_number(-0.0), "-0.0");
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(1e300), "1e+300");
  const double third = 1.0 / 3.0;
  EXPECT_EQ(std::stod(json_number(third)), third);
  EXPECT_THROW(json_number(std::nan("")), Error);
  EXPECT_THROW(json_number(std::numeric_limits<double>::infinity()), Error);
}

TEST(JsonText, InputLocationIsPathColonLine) { EXPECT_EQ(lmforge::input_location("a/b.jsonl", 12), "a/b.jsonl:12"); }

}  // namespace
