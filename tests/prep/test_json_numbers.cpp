// defines: JsonDocumentParser against Python's json module (which Megatron's preprocess_data.py uses) on numbers
//          and literals simdjson alone refuses: 1e400, integers beyond 64 bits, NaN, Infinity, -Infinity are
//          accepted where Python accepts them, malformed numbers stay invalid, and strings are never touched
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "prep/json_document.h"
#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::vector<std::string> kLines = {
    R"({"text": "a", "n": 1e400})",
    R"({"text": "b", "n": -1E+400, "m": 1e-400})",
    R"({"n": 123456789012345678901234567890, "text": "c"})",
    R"({"text": "d", "n": -98765432109876543210987654321})",
    R"({"text": "e", "n": NaN})",
    R"({"text": "f", "n": Infinity, "m": -Infinity, "l": [1e999, NaN, {"x": -0.5e-9999}]})",
    R"({"text": "g \"1e400\" NaN -Infinity 01", "n": 100, "o": 10.25e3})",
    R"({"text": "h", "n": 01})",
    R"({"text": "i", "n": 1.})",
    R"({"text": "j", "n": +1})",
    R"({"text": "k", "n": .5})",
    R"({"text": "l", "n": nan})",
    R"({"text": "m", "n": -})",
    R"({"text": "n", "n": 1e})",
    R"({"text": "o", "n": infinity})",
    R"({"text": 1e400})",
    R"({"text": "p", "n": 0x10})",
    R"({"text": "q", "n": 1e400 })",
    R"({"text": "r", "n": 18446744073709551616})",
};

// Per line: "ok <text>" when Python's json.loads accepts it and "text" is a string, "ok-nonstring" when it
// accepts it with another type there, "invalid" when it raises.
std::vector<std::string> python_verdicts(const std::string& path) {
  const auto r = run_command(
      "/usr/bin/python3 -c 'import json,sys\n"
      "for line in open(sys.argv[1], encoding=\"utf-8\"):\n"
      "    try:\n"
      "        d = json.loads(line)\n"
      "    except ValueError:\n"
      "        print(\"invalid\"); continue\n"
      "    print(\"ok \" + d[\"text\"] if isinstance(d[\"text\"], str) else \"ok-nonstring\")\n' " + path);
  EXPECT_EQ(r.status, 0) << r.output;
  std::vector<std::string> out;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(JsonNumbers, AcceptedExactlyWherePythonsJsonAcceptsThem) {
  TempDir dir;
  std::string all;
  for (const auto& l : kLines) all += l + "\n";
  write_file(dir.file("lines.jsonl"), all);
  const std::vector<std::string> python = python_verdicts(dir.file("lines.jsonl"));
  ASSERT_EQ(python.size(), kLines.size());
  lmforge::prep::JsonDocumentParser parser({"text"});
  lmforge::prep::ParsedDocument doc;
  size_t accepted = 0;
  for (size_t i = 0; i < kLines.size(); ++i) {
    const std::string padded = kLines[i] + std::string(64, ' ');
    const std::string reason = parser.parse(std::string_view(padded.data(), kLines[i].size()), 64, doc);
    if (python[i] == "invalid") {
      EXPECT_EQ(reason.rfind("not valid JSON", 0), 0u) << kLines[i] << ": " << reason;
    } else if (python[i] == "ok-nonstring") {
      EXPECT_NE(reason.find("is a number"), std::string::npos) << kLines[i] << ": " << reason;
    } else {
      ++accepted;
      EXPECT_EQ(reason, "") << kLines[i];
      ASSERT_EQ(doc.texts.at(0).size(), 1u);
      EXPECT_EQ("ok " + std::string(doc.texts[0][0]), python[i]) << kLines[i];
    }
  }
  EXPECT_EQ(accepted, 9u);  // the list above: 9 lines Python takes with a string text
}

TEST(JsonNumbers, NormalizingTouchesNumbersAndLiteralsOutsideStringsOnly) {
  std::string out;
  EXPECT_TRUE(lmforge::prep::numbers_normalized(R"({"a\"1": 1e400, "b": [NaN,-Infinity], "c": "NaN 5"})", out));
  EXPECT_EQ(out, R"({"a\"1": 0, "b": [0,0], "c": "NaN 5"})");
  EXPECT_FALSE(lmforge::prep::numbers_normalized(R"({"c": "12", "d": true})", out));
  EXPECT_TRUE(lmforge::prep::numbers_normalized("[01, 1., -]", out));
  EXPECT_EQ(out, "[00, 0., -]");  // malformed numbers stay malformed
}

}  // namespace
