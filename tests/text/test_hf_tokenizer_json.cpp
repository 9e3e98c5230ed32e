// defines: tests of load_hf_tokenizer(): ids identical to Hugging Face tokenizers on the shared GPT-2 and BERT
// tokenizer.json files and on the committed fixture families (references made by HF itself, make_fixtures.js)
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "text/hf_components.h"
#include "text/hf_tokenizer_json.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"

namespace lmforge::text {
namespace {

const std::string kShared = LMFORGE_SHARED_DIR;
const std::string kFixtures = std::string(LMFORGE_SOURCE_DIR) + "/tests/text/hf_fixtures";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing test input " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Row {
  std::string id;
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
  bool has_decoded = false;
};

// Reads a JSONL file; calls f(element) per line.
template <class F>
void for_each_jsonl(const std::string& path, F&& f) {
  const std::string all = slurp(path);
  simdjson::dom::parser parser;
  std::istringstream lines(all);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    simdjson::dom::element e = parser.parse(line);
    f(e);
  }
}

std::vector<int32_t> ids_of(simdjson::dom::element e) {
  std::vector<int32_t> ids;
  for (int64_t v : simdjson::dom::array(e)) ids.push_back(int32_t(v));
  return ids;
}

std::map<std::string, std::string> texts(const std::string& path) {
  std::map<std::string, std::string> m;
  for_each_jsonl(path, [&](simdjson::dom::element e) {
    m[std::string(std::string_view(e["id"]))] = std::string(std::string_view(e["text"]));
  });
  return m;
}

// The sample corpus by line number (its "id" fields repeat across sources).
const std::vector<std::string>& sample_lines() {
  static const auto v = [] {
    std::vector<std::string> v;
    for_each_jsonl(kShared + "/data/sample/sample.jsonl",
                   [&](simdjson::dom::element e) { v.emplace_back(std::string_view(e["text"])); });
    return v;
  }();
  return v;
}
const std::map<std::string, std::string>& edge_texts() {
  static const auto m = texts(kShared + "/data/edge/edge_cases.jsonl");
  return m;
}

// Up to 30 ids from `from`.
std::string show(const std::vector<int32_t>& v, size_t from) {
  std::string s = "[" + std::to_string(from) + "..] ";
  for (size_t i = from; i < v.size() && i < from + 30; ++i) s += std::to_string(v[i]) + " ";
  return s;
}

size_t first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i > 5 ? i - 5 : 0;
}

// Encodes every row's text and counts rows whose ids differ, printing the first few.
size_t mismatches(const Tokenizer& tok, const std::vector<Row>& rows, const std::string& what) {
  auto enc = tok.make_encoder();
  size_t bad = 0;
  std::vector<int32_t> ids;
  for (const Row& r : rows) {
    ids.clear();
    enc->encode(r.text, ids);
    if (ids != r.ids) {
      if (++bad <= 3)
        ADD_FAILURE() << what << " row " << r.id << "\n  ours: " << show(ids, first_difference(ids, r.ids))
                      << "\n  HF:   " << show(r.ids, first_difference(ids, r.ids));
    }
  }
  return bad;
}

std::vector<Row> fixture_rows(const std::string& family) {
  std::vector<Row> rows;
  for_each_jsonl(kFixtures + "/" + family + ".ref.jsonl", [&](simdjson::dom::element e) {
    Row r;
    const std::string src{std::string_view(e["src"])};
    r.id = src + ":" + std::string(std::string_view(e["id"]));
    const std::string id{std::string_view(e["id"])};
    if (src == "extra") r.text = std::string_view(e["text"]);
    else r.text = src == "edge" ? edge_texts().at(id) : sample_lines().at(std::stoul(id));
    r.ids = ids_of(e["ids"]);
    std::string_view d;
    if (e["decoded"].get(d) == simdjson::SUCCESS) {
      r.decoded = d;
      r.has_decoded = true;
    }
    rows.push_back(std::move(r));
  });
  return rows;
}

int64_t meta_vocab_size(const std::string& family) {
  simdjson::dom::parser parser;
  simdjson::dom::element meta = parser.load(kFixtures + "/meta.json");
  return int64_t(meta[family]["vocab_size"]);
}

class Family : public ::testing::TestWithParam<std::string> {};

TEST_P(Family, IdsDecodeAndVocabSizeMatchHuggingFace) {
  const std::string family = GetParam();
  const auto rows = fixture_rows(family);
  ASSERT_GT(rows.size(), 300u);
  for (const bool fast : {true, false}) {
    HfTokenizerOptions o;
    o.fast_paths = fast;
    auto tok = load_hf_tokenizer(kFixtures + "/" + family + ".tokenizer.json", o);
    EXPECT_EQ(mismatches(*tok, rows, family + (fast ? " (fast paths)" : " (generic)")), 0u);
    EXPECT_EQ(int64_t(tok->vocab_size()), meta_vocab_size(family));
    size_t bad_decode = 0;
    for (const Row& r : rows) {
      if (!r.has_decoded) continue;
      const std::string d = tok->decode(r.ids);
      if (d != r.decoded && ++bad_decode <= 3)
        ADD_FAILURE() << family << " decode " << r.id << "\n  ours: " << d << "\n  HF:   " << r.decoded;
    }
    EXPECT_EQ(bad_decode, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(HfFixtures, Family,
                         ::testing::Values("roberta", "llama3", "llama2", "t5", "t5spm", "xlmr", "wordpiece",
                                           "subword", "wordlevel"));

// The shared GPT-2 and BERT tokenizer.json files against the shared HF ids: whole sample corpus + edge cases.
void check_shared(const std::string& json, const std::string& sample_ids, const std::string& edge_key,
                  size_t expect_vocab) {
  std::vector<Row> rows;
  for_each_jsonl(sample_ids, [&](simdjson::dom::element e) {
    Row r;
    r.id = std::string(std::string_view(e["id"]));
    r.text = sample_lines().at(rows.size());
    r.ids = ids_of(e["ids"]);
    rows.push_back(std::move(r));
  });
  ASSERT_EQ(rows.size(), sample_lines().size());
  for_each_jsonl(kShared + "/data/edge/edge_cases.ref.jsonl", [&](simdjson::dom::element e) {
    Row r;
    r.id = std::string(std::string_view(e["id"]));
    r.text = edge_texts().at(r.id);
    r.ids = ids_of(e[edge_key]);
    rows.push_back(std::move(r));
  });
  for (const bool fast : {true, false}) {
    HfTokenizerOptions o;
    o.fast_paths = fast;
    auto tok = load_hf_tokenizer(json, o);
    EXPECT_EQ(mismatches(*tok, rows, json + (fast ? " (fast paths)" : " (generic)")), 0u);
    EXPECT_EQ(tok->vocab_size(), expect_vocab);
  }
}

TEST(HfTokenizerJson, SharedGpt2MatchesHuggingFace) {
  check_shared(kShared + "/data/vocab/gpt2.tokenizer.json", kShared + "/data/sample/sample.gpt2.ids.jsonl", "gpt2",
               50257);
}

TEST(HfTokenizerJson, SharedBertMatchesHuggingFace) {
  check_shared(kShared + "/data/vocab/bert.tokenizer.json", kShared + "/data/sample/sample.hf-bert.ids.jsonl", "bert",
               30522);
}

TEST(HfTokenizerJson, EodTokenFromFileOrFlag) {
  auto gpt2 = load_hf_tokenizer(kShared + "/data/vocab/gpt2.tokenizer.json");
  EXPECT_EQ(gpt2->eod_id(), 50256);  // <|endoftext|>
  EXPECT_EQ(gpt2->type_name(), "PretrainedFromHF");
  EXPECT_FALSE(load_hf_tokenizer(kShared + "/data/vocab/bert.tokenizer.json")->eod_id().has_value());
  HfTokenizerOptions o;
  o.eod_token = "[SEP]";
  EXPECT_EQ(load_hf_tokenizer(kShared + "/data/vocab/bert.tokenizer.json", o)->eod_id(), 102);
  o.eod_token = "<nope>";
  EXPECT_THROW(load_hf_tokenizer(kShared + "/data/vocab/bert.tokenizer.json", o), Error);
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "/llama2.tokenizer.json")->eod_id(), 2);  // </s>
  EXPECT_EQ(load_hf_tokenizer(kFixtures + "/llama3.tokenizer.json")->eod_id(), 2757);  // <|end_of_text|>
}

TEST(HfTokenizerJson, FactoryAndDirectoryWithTokenizerConfig) {
  TokenizerOptions o;
  o.type = "PretrainedFromHF";
  EXPECT_THROW(make_tokenizer(o), Error);  // no --tokenizer-name-or-path
  o.name_or_path = kFixtures + "/llama3.tokenizer.json";
  auto tok = make_tokenizer(o);
  EXPECT_EQ(tok->type_name(), "PretrainedFromHF");
  EXPECT_EQ(tok->vocab_size(), 2758u);
  // A directory: tokenizer.json inside, and tokenizer_config.json's eos_token takes precedence over the list.
  const std::filesystem::path dir = std::filesystem::path(LMFORGE_BINARY_DIR) / "hf_tokenizer_dir_test";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(o.name_or_path, dir / "tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": {"content": "<|begin_of_text|>"}})";
  o.name_or_path = dir.string();
  EXPECT_EQ(make_tokenizer(o)->eod_id(), 2756);
  o.eod_token = "<|end_of_text|>";
  EXPECT_EQ(make_tokenizer(o)->eod_id(), 2757);
  std::filesystem::remove_all(dir);
  TokenizerOptions g;
  g.eod_token = "</s>";
  EXPECT_THROW(make_tokenizer(g), Error);  // --eod-token is for PretrainedFromHF only
}

std::string error_of(const std::string& json) {
  try {
    make_hf_tokenizer(json, "t.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfTokenizerJson, UnsupportedComponentsAreErrorsNamingTypeAndPath) {
  const std::string model = R"("model": {"type": "WordLevel", "vocab": {"a": 0, "<unk>": 1}, "unk_token": "<unk>"})";
  std::string e = error_of(R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"},
      {"type": "ByteLevel"}]}, )" + model + "}");
  EXPECT_NE(e.find("t.json: normalizer.normalizers[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("normalizer type \"ByteLevel\""), std::string::npos) << e;
  e = error_of(R"({"normalizer": {"type": "Precompiled", "precompiled_charsmap": "AAAA"}, )" + model + "}");
  EXPECT_NE(e.find("normalizer: precompiled_charsmap"), std::string::npos) << e;
  e = error_of(R"({"pre_tokenizer": {"type": "UnicodeScripts"}, )" + model + "}");
  EXPECT_NE(e.find("pre_tokenizer: pre-tokenizer type \"UnicodeScripts\""), std::string::npos) << e;
  e = error_of(R"({"model": {"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}})");
  EXPECT_NE(e.find("model.dropout"), std::string::npos) << e;
  e = error_of(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  EXPECT_NE(e.find("model.merges[0]"), std::string::npos) << e;
  e = error_of(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a"}, "behavior": "Isolated"}, )" +
               model + "}");
  EXPECT_NE(e.find("pre_tokenizer.pattern.Regex"), std::string::npos) << e;
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  // An unsupported decoder does not stop tokenization; decode() reports it.
  auto tok = make_hf_tokenizer(R"({"decoder": {"type": "CTC"}, )" + model + "}", "t.json");
  std::vector<int32_t> ids;
  tok->make_encoder()->encode("a", ids);
  EXPECT_EQ(ids, std::vector<int32_t>{0});
  EXPECT_THROW(tok->decode(ids), Error);
}

// HF's BertNormalizer with each of its switches (clean_text, handle_chinese_chars, strip_accents, lowercase), on
// text with accents, a tab, NUL, U+3000, CJK, a soft hyphen (Cf), U+11938 (Unicode 13: HF's NFD keeps it whole),
// U+1134B (Unicode 7: decomposed), U+2000 (NFD U+2002) and a private-use character. The expected code points are
// what npm tokenizers 0.23.2's bertNormalizer(options).normalizeString printed for the same text and options.
TEST(HfTokenizerJson, BertNormalizerSwitchesEqualHfs) {
  std::string in;
  auto append = [&](char32_t c) {
    uint32_t cp = c;
    if (cp < 0x80) in += char(cp);
    else if (cp < 0x800) in += char(0xC0 | (cp >> 6)), in += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      in += char(0xE0 | (cp >> 12)), in += char(0x80 | ((cp >> 6) & 0x3F)), in += char(0x80 | (cp & 0x3F));
    else
      in += char(0xF0 | (cp >> 18)), in += char(0x80 | ((cp >> 12) & 0x3F)), in += char(0x80 | ((cp >> 6) & 0x3F)),
          in += char(0x80 | (cp & 0x3F));
  };
  for (char32_t c : std::u32string(U"H\u00e9llo\tW\u00d6RLD") + char32_t(0) +
                        U"x\u3000\u4e2d\u6587\u00ada\U00011938b\U0001134B\u2000z\uE000")
    append(c);
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "68 65 6c 6c 6f 20 77 6f 72 6c 64 78 20 20 4e2d 20 20 6587 20 61 11938 62 11347 1133e 20 7a"},
      {R"({"strip_accents": false})",
       "68 e9 6c 6c 6f 20 77 f6 72 6c 64 78 20 20 4e2d 20 20 6587 20 61 11938 62 1134b 20 7a"},
      {R"({"handle_chinese_chars": false})",
       "68 65 6c 6c 6f 20 77 6f 72 6c 64 78 20 4e2d 6587 61 11938 62 11347 1133e 20 7a"},
      {R"({"clean_text": false})",
       "68 65 6c 6c 6f 9 77 6f 72 6c 64 0 78 3000 20 4e2d 20 20 6587 20 ad 61 11938 62 11347 1133e 2002 7a e000"},
      {R"({"lowercase": false})",
       "48 e9 6c 6c 6f 20 57 d6 52 4c 44 78 20 20 4e2d 20 20 6587 20 61 11938 62 1134b 20 7a"},
      {R"({"clean_text": false, "lowercase": false, "strip_accents": true, "handle_chinese_chars": false})",
       "48 65 6c 6c 6f 9 57 4f 52 4c 44 0 78 3000 4e2d 6587 ad 61 11938 62 11347 1133e 2002 7a e000"},
  };
  for (const auto& [switches, want] : cases) {
    std::string json = std::string(R"({"type": "BertNormalizer")") + (std::string(switches) == "{}" ? "" : ", ") +
                       std::string(switches).substr(1);
    simdjson::dom::parser parser;
    const simdjson::dom::element e = parser.parse(json);
    auto normalizer = hf::make_normalizer(e, "normalizer", hf::Context{"test"});
    std::string s = in;
    normalizer->normalize(s);
    std::string got;
    for (size_t i = 0; i < s.size();) {
      const unsigned char b = static_cast<unsigned char>(s[i]);
      const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      uint32_t cp = len == 1 ? b : b & (0xFF >> (len + 1));
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      char hex[16];
      std::snprintf(hex, sizeof hex, "%s%x", got.empty() ? "" : " ", cp);
      got += hex;
      i += size_t(len);
    }
    EXPECT_EQ(got, want) << switches;
  }
}

}  // namespace
}  // namespace lmforge::text
