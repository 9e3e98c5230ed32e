// run_prep end to end: Megatron's bytes on the shared sample, order independence of workers, compressed inputs,
// every kind of bad input, malformed text repair, empty documents and several keys; a text the tokenizer refuses
// (NullTokenizer's non-ids) named by file and line, or skipped whole.
#include <gtest/gtest.h>

#include "data/indexed_dataset.h"
#include "prep/prep.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

lmforge::prep::PrepOptions gpt2_options(const std::string& input, const std::string& prefix) {
  lmforge::prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  o.append_eod = true;
  o.progress_seconds = 1e9;
  return o;
}

void expect_same_dataset_bytes(const std::string& prefix, const std::string& reference_prefix) {
  EXPECT_TRUE(read_file(prefix + ".bin") == read_file(reference_prefix + ".bin")) << prefix << ".bin differs";
  EXPECT_TRUE(read_file(prefix + ".idx") == read_file(reference_prefix + ".idx")) << prefix << ".idx differs";
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Only the final names matter: a failed run may leave nothing that looks like a dataset.
void expect_no_dataset(const std::string& prefix) {
  EXPECT_FALSE(exists(prefix + ".bin"));
  EXPECT_FALSE(exists(prefix + ".idx"));
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(prefix).parent_path()))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << "leftover " << entry.path();
}

std::string error_of(const lmforge::prep::PrepOptions& o) {
  try {
    lmforge::prep::run_prep(o);
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Prep, SampleCorpusIsByteIdenticalToMegatron) {
  TempDir dir;
  for (int workers : {1, 2, 3}) {
    auto o = gpt2_options(shared_path("data/sample/sample.jsonl"), dir.file("w" + std::to_string(workers)));
    o.workers = workers;
    o.block_bytes = 4096 * workers;  // many small blocks: out-of-order completion must not reorder output
    const auto summary = lmforge::prep::run_prep(o);
    EXPECT_EQ(summary.documents, 9887u);
    EXPECT_EQ(summary.skipped_lines, 0u);
    expect_same_dataset_bytes(summary.outputs.at(0), shared_path("data/sample/sample_gpt2_text_document"));
  }
}

TEST(Prep, CompressedInputsGiveTheSameBytes) {
  TempDir dir;
  const std::string sample = shared_path("data/sample/sample.jsonl");
  for (const std::string tool : {"gzip", "zstd -q", "xz"}) {
    const std::string name = tool.substr(0, tool.find(' '));
    const std::string compressed = dir.file("sample.jsonl." + name);
    ASSERT_EQ(lmforge::testing::run_command(tool + " -c " + sample + " > " + compressed).status, 0);
    auto o = gpt2_options(compressed, dir.file(name));
    o.workers = 2;
    const auto summary = lmforge::prep::run_prep(o);
    expect_same_dataset_bytes(summary.outputs.at(0), shared_path("data/sample/sample_gpt2_text_document"));
  }
}

TEST(Prep, SeveralFilesAreOneDatasetInOrder) {
  TempDir dir;
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  // Split the corpus at a line boundary into a plain and a gzip file inside a directory.
  const size_t cut = sample.find('\n', sample.size() / 2) + 1;
  std::filesystem::create_directory(dir.file("in"));
  write_file(dir.file("in/a.jsonl"), sample.substr(0, cut));
  write_file(dir.file("b.jsonl"), sample.substr(cut));
  ASSERT_EQ(lmforge::testing::run_command("gzip -c " + dir.file("b.jsonl") + " > " + dir.file("in/b.jsonl.gz")).status, 0);
  auto o = gpt2_options(dir.file("in"), dir.file("out"));
  const auto summary = lmforge::prep::run_prep(o);
  EXPECT_EQ(summary.documents, 9887u);
  expect_same_dataset_bytes(summary.outputs.at(0), shared_path("data/sample/sample_gpt2_text_document"));
}

struct BadInput {
  const char* name;
  std::string content;
  std::string expected;  // substring of the error
};

TEST(Prep, BadLinesStopWithFileLineAndReasonAndWriteNothing) {
  const std::string good = "{\"text\": \"hello world\"}\n";
  const std::vector<BadInput> cases = {
      {"not_json", good + good + "{\"text\": \"unterminated}\n" + good, ":3: not valid JSON"},
      {"missing_key", good + "{\"body\": \"x\"}\n", ":2: missing key \"text\""},
      {"number", good + good + good + "{\"text\": 42}\n", ":4: value of \"text\" is a number"},
      {"null", "{\"text\": null}\n", ":1: value of \"text\" is null"},
      {"list_of_numbers", "{\"text\": [\"a\", 1]}\n", ":1: list \"text\" holds a number"},
      {"blank_line", good + "\n" + good, ":2: empty line"},
      {"array_line", "[1, 2]\n", ":1: expected a JSON object, found an array"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    write_file(dir.file("in.jsonl"), c.content);
    auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
    const std::string error = error_of(o);
    EXPECT_NE(error.find(dir.file("in.jsonl") + c.expected), std::string::npos) << c.name << ": " << error;
    expect_no_dataset(dir.file("out_text_document"));
  }
}

TEST(Prep, BadLineFarIntoALargeInputIsNamedAndNothingIsWritten) {
  TempDir dir;
  std::string content;
  for (int i = 0; i < 20000; ++i) content += "{\"text\": \"line number " + std::to_string(i) + "\"}\n";
  content += "{\"text\": oops}\n";
  write_file(dir.file("in.jsonl"), content);
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.workers = 2;
  o.block_bytes = 10000;
  const std::string error = error_of(o);
  EXPECT_NE(error.find("in.jsonl:20001: not valid JSON"), std::string::npos) << error;
  expect_no_dataset(dir.file("out_text_document"));
}

TEST(Prep, SkipInvalidCountsAndContinues) {
  TempDir dir;
  write_file(dir.file("in.jsonl"),
             "{\"text\": \"one\"}\nnot json\n{\"text\": \"two\"}\n{\"other\": 1}\n{\"text\": \"three\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.skip_invalid = true;
  const auto summary = lmforge::prep::run_prep(o);
  EXPECT_EQ(summary.skipped_lines, 2u);
  EXPECT_EQ(summary.documents, 3u);
  auto ds = lmforge::data::IndexedDataset::open(summary.outputs.at(0));
  EXPECT_EQ(ds->document_count(), 3u);
}

TEST(Prep, CorruptAndTruncatedCompressedInputsAreErrors) {
  TempDir dir;
  const std::string sample = shared_path("data/sample/sample.jsonl");
  for (const std::string tool : {"gzip", "zstd", "xz"}) {
    const std::string compressed = dir.file("full." + tool);
    ASSERT_EQ(lmforge::testing::run_command(tool + " -c " + sample + " > " + compressed).status, 0);
    const std::string bytes = read_file(compressed);
    write_file(dir.file("cut." + tool), bytes.substr(0, bytes.size() * 2 / 3));
    auto o = gpt2_options(dir.file("cut." + tool), dir.file("out_" + tool));
    const std::string error = error_of(o);
    EXPECT_NE(error.find("cut." + tool), std::string::npos) << tool << ": " << error;
    expect_no_dataset(dir.file("out_" + tool + "_text_document"));
  }
}

TEST(Prep, UnreadableOrMissingInputIsAnError) {
  TempDir dir;
  auto o = gpt2_options(dir.file("does-not-exist.jsonl"), dir.file("out"));
  EXPECT_NE(error_of(o).find("does-not-exist.jsonl"), std::string::npos);
  write_file(dir.file("secret.jsonl"), "{\"text\": \"x\"}\n");
  std::filesystem::permissions(dir.file("secret.jsonl"), std::filesystem::perms::none);
  if (::geteuid() != 0) {  // root reads anything; the permission case only exists for other users
    o = gpt2_options(dir.file("secret.jsonl"), dir.file("out"));
    EXPECT_NE(error_of(o).find("secret.jsonl"), std::string::npos);
  }
  o = gpt2_options(dir.file("*.nomatch"), dir.file("out"));
  EXPECT_NE(error_of(o).find("*.nomatch"), std::string::npos);
}

TEST(Prep, MalformedTextBecomesReplacementCharactersAndIsCounted) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"caf\xE9 ok\"}\n{\"text\": \"a\\ud800b\"}\n");
  write_file(dir.file("clean.jsonl"), "{\"text\": \"caf\xEF\xBF\xBD ok\"}\n{\"text\": \"a\\ufffdb\"}\n");
  const auto summary = lmforge::prep::run_prep(gpt2_options(dir.file("in.jsonl"), dir.file("out")));
  EXPECT_EQ(summary.invalid_utf8_replaced, 1u);
  EXPECT_EQ(summary.lone_surrogates_replaced, 1u);
  const auto clean = lmforge::prep::run_prep(gpt2_options(dir.file("clean.jsonl"), dir.file("clean")));
  expect_same_dataset_bytes(summary.outputs.at(0), clean.outputs.at(0));
}

TEST(Prep, EmptyDocumentsAreKeptAsMegatronDoes) {
  TempDir dir;
  // Megatron M23: 7 documents, 6 sequences, document index 0,1,2,3,3,4,5,6; no EOD on the empty one.
  write_file(dir.file("in.jsonl"),
             "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\"}\n{\"text\": \"\"}\n{\"text\": \"d\"}\n"
             "{\"text\": \"e\"}\n{\"text\": \"f\"}\n");
  const auto summary = lmforge::prep::run_prep(gpt2_options(dir.file("in.jsonl"), dir.file("out")));
  EXPECT_EQ(summary.empty_documents, 1u);
  auto ds = lmforge::data::IndexedDataset::open(summary.outputs.at(0));
  ASSERT_EQ(ds->sequence_count(), 6u);
  ASSERT_EQ(ds->document_count(), 7u);
  const int64_t expected[] = {0, 1, 2, 3, 3, 4, 5, 6};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(ds->document_index(j), expected[j]);
  EXPECT_EQ(ds->token_count(), 12u);  // one token and EOD per non-empty document
}

TEST(Prep, SeveralKeysAndSentenceListsGiveOneDatasetPerKey) {
  TempDir dir;
  write_file(dir.file("in.jsonl"),
             "{\"title\": \"Hello\", \"text\": [\"First sentence.\", \"\", \"Second one.\"]}\n"
             "{\"title\": \"\", \"text\": \"Only one.\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.json_keys = {"text", "title"};
  const auto summary = lmforge::prep::run_prep(o);
  ASSERT_EQ(summary.outputs.size(), 2u);
  auto text = lmforge::data::IndexedDataset::open(dir.file("out_text_document"));
  auto title = lmforge::data::IndexedDataset::open(dir.file("out_title_document"));
  // The empty sentence gives no sequence; EOD joins the last sentence.
  EXPECT_EQ(text->document_count(), 2u);
  EXPECT_EQ(text->sequence_count(), 3u);
  EXPECT_EQ(text->document_index(1), 2);
  std::vector<int32_t> ids;
  text->read_sequence(1, ids);
  EXPECT_EQ(ids.back(), 50256);
  EXPECT_EQ(title->document_count(), 2u);
  EXPECT_EQ(title->sequence_count(), 1u);
}

TEST(Prep, AppendEodNeedsATokenizerWithOne) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"x\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = shared_path("data/vocab/bert-base-uncased-vocab.txt");
  EXPECT_NE(error_of(o).find("end-of-document"), std::string::npos);
}

}  // namespace

namespace {

TEST(Prep, BertSampleCorpusIsByteIdenticalToMegatron) {
  lmforge::testing::TempDir dir;
  lmforge::prep::PrepOptions o;
  o.inputs = {lmforge::testing::shared_path("data/sample/sample.jsonl")};
  o.output_prefix = dir.file("bert");
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = lmforge::testing::shared_path("data/vocab/bert-base-uncased-vocab.txt");
  o.workers = 2;
  o.progress_seconds = 1e9;
  const auto summary = lmforge::prep::run_prep(o);
  expect_same_dataset_bytes(summary.outputs.at(0), lmforge::testing::shared_path("data/sample/sample_bert_text_document"));
}

}  // namespace

namespace {

lmforge::prep::PrepOptions null_tokenizer_options(const std::string& input, const std::string& prefix) {
  lmforge::prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "NullTokenizer";
  o.tokenizer.vocab_size = 1000;
  o.append_eod = true;
  o.progress_seconds = 1e9;
  return o;
}

TEST(Prep, ATextTheTokenizerRefusesIsNamedByLineOrSkippedWhole) {
  TempDir dir;
  // line 3's second key is not ids: with --skip-invalid the whole line goes, its first key's ids too.
  write_file(dir.file("in.jsonl"), "{\"a\": \"1 2\", \"b\": \"3\"}\n{\"a\": \"4\", \"b\": \"5 6\"}\n"
                                   "{\"a\": \"7 8\", \"b\": \"9 x\"}\n{\"a\": \"10\", \"b\": \"11\"}\n");
  auto o = null_tokenizer_options(dir.file("in.jsonl"), dir.file("out"));
  o.json_keys = {"a", "b"};
  const std::string error = error_of(o);
  EXPECT_NE(error.find(dir.file("in.jsonl") + ":3: NullTokenizer: \"x\" is not a token id"), std::string::npos)
      << error;
  expect_no_dataset(dir.file("out_a_document"));
  o.skip_invalid = true;
  const auto summary = lmforge::prep::run_prep(o);
  EXPECT_EQ(summary.skipped_lines, 1u);
  const std::vector<std::vector<int32_t>> want_a = {{1, 2, 1000}, {4, 1000}, {10, 1000}};
  const std::vector<std::vector<int32_t>> want_b = {{3, 1000}, {5, 6, 1000}, {11, 1000}};
  for (const auto& [key, want] : {std::pair{"a", want_a}, std::pair{"b", want_b}}) {
    auto ds = lmforge::data::IndexedDataset::open(dir.file("out_") + key + "_document");
    ASSERT_EQ(ds->document_count(), want.size()) << key;
    for (size_t d = 0; d < want.size(); ++d) {
      std::vector<int32_t> ids;
      ds->read_sequence(d, ids);  // one sequence per document here
      EXPECT_EQ(ids, want[d]) << key << " document " << d;
    }
  }
}

}  // namespace
