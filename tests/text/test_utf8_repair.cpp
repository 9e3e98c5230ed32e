// Repair of malformed text, checked against Python's bytes.decode("utf-8", errors="replace") as the reference.
#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "text/utf8_repair.h"

using lmforge::text::repair_lone_surrogate_escapes;
using lmforge::text::repair_utf8;

TEST(Utf8Repair, MatchesPythonReplaceOnRandomBytes) {
  lmforge::testing::TempDir dir;
  std::mt19937 rng(7);
  // Mostly bytes that form or nearly form multi-byte sequences, where the maximal-subpart rule matters.
  const unsigned char alphabet[] = {'a', ' ', 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                                    0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};
  std::string all;
  std::vector<std::string> cases;
  for (int c = 0; c < 2000; ++c) {
    std::string s;
    const int len = 1 + rng() % 12;
    for (int i = 0; i < len; ++i) s.push_back(static_cast<char>(alphabet[rng() % sizeof alphabet]));
    cases.push_back(s);
    all += std::to_string(s.size()) + "\n" + s;
  }
  lmforge::testing::write_file(dir.file("in.bin"), all);
  const std::string script =
      "import sys\n"
      "data=open(sys.argv[1],'rb').read(); out=open(sys.argv[2],'wb'); i=0\n"
      "while i < len(data):\n"
      "  j=data.index(b'\\n', i); n=int(data[i:j]); s=data[j+1:j+1+n]; i=j+1+n\n"
      "  r=s.decode('utf-8','replace').encode('utf-8'); out.write(str(len(r)).encode()+b'\\n'+r)\n";
  lmforge::testing::write_file(dir.file("ref.py"), script);
  auto run = lmforge::testing::run_command("/usr/bin/python3 " + dir.file("ref.py") + " " + dir.file("in.bin") + " " +
                                           dir.file("out.bin"));
  ASSERT_EQ(run.status, 0) << run.output;
  const std::string expected = lmforge::testing::read_file(dir.file("out.bin"));
  size_t pos = 0, mismatches = 0;
  for (const auto& s : cases) {
    const size_t nl = expected.find('\n', pos);
    const size_t n = std::stoul(expected.substr(pos, nl - pos));
    const std::string want = expected.substr(nl + 1, n);
    pos = nl + 1 + n;
    std::string got;
    repair_utf8(s, got);
    if (got != want) ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Utf8Repair, CountsReplacements) {
  std::string out;
  EXPECT_EQ(repair_utf8("plain ascii and \xC3\xA9", out), 0u);
  EXPECT_EQ(out, "plain ascii and \xC3\xA9");
  EXPECT_EQ(repair_utf8("a\xFF" "b\xED\xA0\x80", out), 4u);  // 0xFF, then ED A0 80 is three subparts
  EXPECT_EQ(out, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98", out), 1u);  // truncated 4-byte sequence: one U+FFFD
}

TEST(Utf8Repair, LoneSurrogateEscapes) {
  std::string out;
  EXPECT_EQ(repair_lone_surrogate_escapes(R"({"text":"ok \ud83d\ude00"})", out), 0u);
  EXPECT_EQ(repair_lone_surrogate_escapes(R"({"text":"a\ud800b"})", out), 1u);
  EXPECT_EQ(out, R"({"text":"a\uFFFDb"})");
  EXPECT_EQ(repair_lone_surrogate_escapes(R"({"text":"\uDC00\uD800\uD800\uDC00"})", out), 2u);
  EXPECT_EQ(out, R"({"text":"\uFFFD\uFFFD\uD800\uDC00"})");
  // An escaped backslash followed by "ud800" is text, not an escape.
  EXPECT_EQ(repair_lone_surrogate_escapes(R"({"text":"\\ud800"})", out), 0u);
}
