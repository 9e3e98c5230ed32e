// Prep with --tokenizer-type PretrainedFromHF adds the tokenizer.json post-processor's special tokens to every
// document as Megatron's tokenizer(text).input_ids does (BERT: [CLS] .. [SEP]), --append-eod after them, and
// --no-special-tokens leaves them out; documents are checked against Hugging Face's ids (special.ref.jsonl).
#include <gtest/gtest.h>
#include <simdjson.h>

#include "data/indexed_dataset.h"
#include "prep/prep.h"
#include "prep/shard_plan.h"
#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

// bert-base-uncased's post_processor, as in its tokenizer.json.
const char* kBertTemplate =
    R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},)"
    R"({"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],)"
    R"("pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},)"
    R"({"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},)"
    R"({"SpecialToken":{"id":"[SEP]","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[101],)"
    R"("tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[102],"tokens":["[SEP]"]}}})";

struct Reference {
  std::string jsonl;  // one {"text": ...} line per reference text
  std::vector<std::vector<int32_t>> ids, plain;
};

// HF's ids for the bert family rows of special.ref.jsonl (bert-base-uncased's template on the shared vocabulary).
Reference bert_reference() {
  Reference r;
  simdjson::dom::parser parser;
  std::istringstream lines(read_file(std::string(LMFORGE_SOURCE_DIR) + "/tests/text/hf_fixtures/special.ref.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    simdjson::dom::element e = parser.parse(line);
    if (std::string_view(e["family"]) != "bert") continue;
    r.jsonl += "{\"text\": " + simdjson::minify(e["text"].value()) + "}\n";
    for (auto [key, out] : {std::pair{"ids", &r.ids}, std::pair{"plain", &r.plain}}) {
      out->emplace_back();
      for (int64_t v : simdjson::dom::array(e[key])) out->back().push_back(int32_t(v));
    }
  }
  return r;
}

// Each document's ids (its sequences concatenated).
std::vector<std::vector<int32_t>> documents(const std::string& prefix) {
  auto ds = lmforge::data::IndexedDataset::open(prefix);
  std::vector<std::vector<int32_t>> docs;
  std::vector<int32_t> seq;
  for (uint64_t j = 0; j < ds->document_count(); ++j) {
    docs.emplace_back();
    for (int64_t s = ds->document_index(j); s < ds->document_index(j + 1); ++s) {
      ds->read_sequence(uint64_t(s), seq);
      docs.back().insert(docs.back().end(), seq.begin(), seq.end());
    }
  }
  return docs;
}

TEST(PrepSpecialTokens, BertTokenizerJsonDocumentsAreClsTextSepAsHuggingFace) {
  TempDir dir;
  const Reference ref = bert_reference();
  ASSERT_EQ(ref.ids.size(), 6u);
  std::string json = read_file(shared_path("data/vocab/bert.tokenizer.json"));
  const size_t at = json.find("\"post_processor\":null");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, std::strlen("\"post_processor\":null"), std::string("\"post_processor\":") + kBertTemplate);
  write_file(dir.file("tokenizer.json"), json);
  write_file(dir.file("in.jsonl"), ref.jsonl);

  lmforge::prep::PrepOptions o;
  o.inputs = {dir.file("in.jsonl")};
  o.tokenizer.type = "PretrainedFromHF";
  o.tokenizer.name_or_path = dir.file("tokenizer.json");
  o.progress_seconds = 1e9;

  o.output_prefix = dir.file("special");
  auto docs = documents(lmforge::prep::run_prep(o).outputs.at(0));
  ASSERT_EQ(docs.size(), ref.ids.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    EXPECT_EQ(docs[d], ref.ids[d]) << "document " << d;
    ASSERT_GE(docs[d].size(), 2u);  // an empty text too, as HF and Megatron write it
    EXPECT_EQ(docs[d].front(), 101);
    EXPECT_EQ(docs[d].back(), 102);
  }

  // --append-eod: the end-of-document token follows [SEP], as Megatron appends it after tokenize().
  o.output_prefix = dir.file("eod");
  o.append_eod = true;
  o.tokenizer.eod_token = "[PAD]";
  docs = documents(lmforge::prep::run_prep(o).outputs.at(0));
  ASSERT_EQ(docs.size(), ref.ids.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    auto want = ref.ids[d];
    want.push_back(0);
    EXPECT_EQ(docs[d], want) << "document " << d;
  }

  // --no-special-tokens: HF's add_special_tokens=False; empty texts give empty documents.
  o.output_prefix = dir.file("plain");
  o.append_eod = false;
  const std::string with_id = lmforge::prep::make_shard_plan(o, 1 << 20).id;
  o.tokenizer.add_special_tokens = false;
  EXPECT_NE(lmforge::prep::make_shard_plan(o, 1 << 20).id, with_id);  // sharded runs cannot mix the two
  docs = documents(lmforge::prep::run_prep(o).outputs.at(0));
  ASSERT_EQ(docs.size(), ref.plain.size());
  for (size_t d = 0; d < docs.size(); ++d) EXPECT_EQ(docs[d], ref.plain[d]) << "document " << d;
  EXPECT_TRUE(docs[0].empty());
}

}  // namespace
