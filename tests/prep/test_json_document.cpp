// JSON line → document: a key given twice takes its LAST value, as Python's json module (and so Megatron's
// preprocess_data.py) does — checked against python3's json on the same lines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "prep/json_document.h"
#include "test_util.h"

namespace {

using lmforge::prep::JsonDocumentParser;
using lmforge::prep::ParsedDocument;

std::string python_text(const std::string& line) {
  lmforge::testing::TempDir tmp;
  lmforge::testing::write_file(tmp.file("line.json"), line);
  const auto r = lmforge::testing::run_command(
      "/usr/bin/python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[\"text\"]; "
      "sys.stdout.write(v if isinstance(v, str) else \"|\".join(v))' " + tmp.file("line.json"));
  EXPECT_EQ(r.status, 0) << r.output;
  return r.output;
}

TEST(JsonDocument, DuplicateKeysTakeTheLastValueAsPythonDoes) {
  const std::vector<std::string> lines = {
      R"({"text": "a", "text": "b"})",
      R"({"text": "first", "id": 1, "text": ["s1", "s2"]})",
      R"({"text": ["x"], "meta": {"text": "inner"}, "text": "last"})",
  };
  JsonDocumentParser parser({"text"});
  for (const std::string& line : lines) {
    std::string padded = line + std::string(64, ' ');
    ParsedDocument doc;
    ASSERT_EQ(parser.parse(std::string_view(padded.data(), line.size()), padded.size() - line.size(), doc), "")
        << line;
    std::string ours;
    for (size_t i = 0; i < doc.texts[0].size(); i++) {
      if (i > 0) ours += '|';
      ours += doc.texts[0][i];
    }
    EXPECT_EQ(ours, python_text(line)) << line;
  }
}

}  // namespace
