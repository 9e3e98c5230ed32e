// Tests tokenizer.json post-processors (add_special_tokens=True, Megatron's PretrainedFromHF tokenizer(text)): ids
// against Hugging Face's own on every fixture family (special.ref.jsonl, made by make_special_refs.js), the
// factory's default and --no-special-tokens, and errors for unsupported or malformed post-processors.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <map>
#include <sstream>

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

std::string fixture_json(const std::string& family) {
  return slurp(family == "bert" ? kShared + "/data/vocab/bert.tokenizer.json"
                                : kFixtures + "/" + family + ".tokenizer.json");
}

// The fixture with `post_processor` (JSON) in place of its null one.
std::string with_post_processor(const std::string& json, const std::string& post_processor) {
  const std::string null_pp = "\"post_processor\":null";
  const size_t at = json.find(null_pp);
  if (at == std::string::npos || json.find(null_pp, at + 1) != std::string::npos)
    throw std::runtime_error("fixture without exactly one null post_processor");
  return json.substr(0, at) + "\"post_processor\":" + post_processor + json.substr(at + null_pp.size());
}

std::vector<int32_t> ids_of(simdjson::dom::element e) {
  std::vector<int32_t> ids;
  for (int64_t v : simdjson::dom::array(e)) ids.push_back(int32_t(v));
  return ids;
}

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids{-7};  // encode() appends: what is there stays
  tok.make_encoder()->encode(text, ids);
  EXPECT_EQ(ids.front(), -7);
  ids.erase(ids.begin());
  return ids;
}

std::string show(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 24; ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s + (v.size() > 24 ? " ..." : "");
}

TEST(HfPostProcessor, IdsMatchHuggingFaceWithAddSpecialTokens) {
  const std::string all = slurp(kFixtures + "/special.ref.jsonl");
  simdjson::dom::parser parser;
  std::istringstream lines(all);
  std::string line;
  std::map<std::string, std::string> jsons;
  std::map<std::string, std::array<std::unique_ptr<Tokenizer>, 3>> toks;  // special (fast, generic), plain
  size_t rows = 0, mismatches = 0, wrapped = 0, empty_text_rows = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    simdjson::dom::element e = parser.parse(line);
    const std::string family{std::string_view(e["family"])};
    const std::string key = family + "/" + std::string(std::string_view(e["variant"]));
    auto& t = toks[key];
    if (!t[0]) {
      if (!jsons.count(family)) jsons[family] = fixture_json(family);
      const std::string json = with_post_processor(jsons[family], simdjson::minify(e["post_processor"].value()));
      for (int k = 0; k < 3; ++k) {
        HfTokenizerOptions o;
        o.add_special_tokens = k < 2;
        o.fast_paths = k != 1;
        t[k] = make_hf_tokenizer(json, key, o);
      }
    }
    const std::string text{std::string_view(e["text"])};
    const auto want = ids_of(e["ids"]), want_plain = ids_of(e["plain"]);
    ++rows;
    wrapped += want != want_plain;
    empty_text_rows += text.empty();
    for (int k = 0; k < 3; ++k) {
      const auto got = encode(*t[k], text);
      const auto& expect = k < 2 ? want : want_plain;
      if (got != expect) {
        ++mismatches;
        ADD_FAILURE() << key << (k == 0 ? " special" : k == 1 ? " special generic" : " plain") << " text \""
                      << text.substr(0, 60) << "\"\n  HF:      " << show(expect) << "\n  lmforge: " << show(got);
      }
    }
  }
  EXPECT_EQ(rows, 90u);
  EXPECT_EQ(toks.size(), 15u);
  EXPECT_EQ(empty_text_rows, 15u);
  EXPECT_GE(wrapped, 70u);  // the references do differ from add_special_tokens=False
  EXPECT_EQ(mismatches, 0u);
}

// bert-base-uncased's post_processor, as in its tokenizer.json.
const char* kBertTemplate =
    R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},)"
    R"({"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],)"
    R"("pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},)"
    R"({"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},)"
    R"({"SpecialToken":{"id":"[SEP]","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[101],)"
    R"("tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[102],"tokens":["[SEP]"]}}})";

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& contents)
      : path(std::string(LMFORGE_BINARY_DIR) + "/hf_post_processor_test." + std::to_string(::getpid()) + ".json") {
    std::ofstream(path, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

TEST(HfPostProcessor, FactoryAddsSpecialTokensUnlessTurnedOff) {
  TempFile file(with_post_processor(fixture_json("bert"), kBertTemplate));
  TokenizerOptions o;
  o.type = "PretrainedFromHF";
  o.name_or_path = file.path;
  o.eod_token = "[PAD]";
  auto tok = make_tokenizer(o);
  EXPECT_EQ(encode(*tok, "Hello world"), (std::vector<int32_t>{101, 7592, 2088, 102}));
  EXPECT_EQ(encode(*tok, ""), (std::vector<int32_t>{101, 102}));
  EXPECT_EQ(tok->eod_id(), 0);
  EXPECT_EQ(tok->decode(encode(*tok, "hello")), "[CLS] hello [SEP]");
  o.add_special_tokens = false;
  auto plain = make_tokenizer(o);
  EXPECT_EQ(encode(*plain, "Hello world"), (std::vector<int32_t>{7592, 2088}));
  EXPECT_TRUE(encode(*plain, "").empty());
  o.type = "BertWordPieceLowerCase";
  o.vocab_file = kShared + "/data/vocab/bert-base-uncased-vocab.txt";
  o.eod_token.clear();
  try {
    make_tokenizer(o);
    ADD_FAILURE() << "no error for --no-special-tokens with BertWordPieceLowerCase";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--no-special-tokens applies to --tokenizer-type PretrainedFromHF"),
              std::string::npos)
        << e.what();
  }
}

std::string error_of(const std::string& post_processor, bool add_special_tokens = true) {
  HfTokenizerOptions o;
  o.add_special_tokens = add_special_tokens;
  try {
    make_hf_tokenizer(with_post_processor(fixture_json("wordlevel"), post_processor), "pp.json", o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& post_processor, const std::string& want) {
  const std::string got = error_of(post_processor);
  EXPECT_NE(got.find(want), std::string::npos) << "error: \"" << got << "\"\nwanted: " << want;
}

TEST(HfPostProcessor, UnsupportedOrMalformedPostProcessorsAreErrorsNamingTypeAndPath) {
  const std::string cls = R"({"type":"BertProcessing","sep":["x",1],"cls":["<unk>",0]})";
  expect_error(R"({"type":"Foo"})", "pp.json: post_processor: unsupported post-processor type \"Foo\"");
  expect_error(R"({"type":"Sequence","processors":[)" + cls + R"(,{"type":"Foo"}]})",
               "pp.json: post_processor.processors[1]: unsupported post-processor type \"Foo\"");
  expect_error(R"({"type":"BertProcessing","sep":["x",-1],"cls":["<unk>",0]})",
               "post_processor.sep[1]: expected a token id");
  expect_error(R"({"type":"RobertaProcessing","sep":"x","cls":["<unk>",0]})", "post_processor.sep: expected [token, id]");
  expect_error(R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"Q","type_id":0}}],"special_tokens":{}})",
               "post_processor.single[0].SpecialToken.id: \"Q\" is not in special_tokens");
  expect_error(R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"B","type_id":0}}],"special_tokens":{}})",
               "post_processor.single[0]: sequence B in a template for a single sequence");
  expect_error(R"({"type":"TemplateProcessing","single":["$A"],"special_tokens":{}})",
               "post_processor.single[0]: expected {\"SpecialToken\"");
  expect_error(R"({"type":"TemplateProcessing","special_tokens":{}})", "post_processor.single: expected an array");
  // Three encodings, then a template: HF has no template for them (it panics).
  expect_error(R"({"type":"Sequence","processors":[{"type":"TemplateProcessing","single":[{"Sequence":{"id":"A",)"
               R"("type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],)"
               R"("special_tokens":{}},{"type":"TemplateProcessing","single":[],"pair":[],"special_tokens":{}}]})",
               "post_processor.processors[1]: TemplateProcessing after a processor that produced more than two");
  // HF runs the post-processor without add_special_tokens too (a "$A $A" template repeats the text), so it is read
  // either way.
  EXPECT_NE(error_of(R"({"type":"Foo"})", false).find("post_processor: unsupported post-processor type \"Foo\""),
            std::string::npos);
}

}  // namespace
}  // namespace lmforge::text
