// defines: tests of format_count(), format_duration() and ProgressLine (non-terminal output)
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "test_util.h"
#include "util/progress.h"

namespace {

using lmforge::format_count;
using lmforge::format_duration;
using lmforge::ProgressLine;
using lmforge::testing::read_file;
using lmforge::testing::TempDir;

TEST(Progress, FormatCountGroupsThousands) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(1234567), "1,234,567");
  EXPECT_EQ(format_count(18446744073709551615ull), "18,446,744,073,709,551,615");
}

TEST(Progress, FormatDurationAsMinutesOrHours) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(75.2), "1:15");
  EXPECT_EQ(format_duration(59.6), "1:00");  // rounded to the second
  EXPECT_EQ(format_duration(3599), "59:59");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(2e8), "?");
}

// A file is not a terminal: each print() is a line of its own, finish() adds nothing.
TEST(Progress, LinesOnANonTerminal) {
  TempDir dir;
  const std::string path = dir.file("progress.txt");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    ProgressLine zero(0, f);
    EXPECT_TRUE(zero.due());
    zero.print("first");
    zero.print("second");
    zero.finish();
    EXPECT_GE(zero.elapsed_seconds(), 0.0);
    ProgressLine hour(3600, f);
    EXPECT_FALSE(hour.due());
    ProgressLine automatic(-1, f);  // 10 s off a terminal
    EXPECT_FALSE(automatic.due());
  }
  std::fclose(f);
  EXPECT_EQ(read_file(path), "first\nsecond\n");
}

}  // namespace
