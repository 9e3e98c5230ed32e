// defines: tests of `prep --split-sentences` (sentence-level datasets) and of SentencePiece datasets: the
// .idx checked as `lmforge inspect` reads it (IndexedDataset + compute_dataset_stats), sentence tokens against
// Megatron's own document-level output of the same texts, EOD placement, and the --append-eod error for BERT
#include <gtest/gtest.h>

#include <simdjson.h>

#include <fstream>
#include <sstream>

#include "data/dataset_stats.h"
#include "data/indexed_dataset.h"
#include "prep/distributed.h"
#include "prep/prep.h"
#include "prep/shard_assembly.h"
#include "prep/shard_plan.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

// The first `n` lines of the shared sample (Megatron's sample_*_text_document hold all 9,887 documents).
std::string sample_head(const TempDir& dir, size_t n) {
  std::ifstream in(shared_path("data/sample/sample.jsonl"));
  if (!in) throw std::runtime_error("missing shared sample.jsonl");
  std::string out, line;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  const std::string path = dir.file("head.jsonl");
  write_file(path, out);
  return path;
}

lmforge::prep::PrepOptions bert_options(const std::string& input, const std::string& prefix) {
  lmforge::prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "BertWordPieceLowerCase";
  o.tokenizer.vocab_file = shared_path("data/vocab/bert-base-uncased-vocab.txt");
  o.progress_seconds = 1e9;
  o.workers = 2;
  return o;
}

std::vector<int32_t> document_tokens(const lmforge::data::IndexedDataset& ds, uint64_t j) {
  std::vector<int32_t> all, seq;
  for (int64_t s = ds.document_index(j); s < ds.document_index(j + 1); ++s) {
    ds.read_sequence(static_cast<uint64_t>(s), seq);
    all.insert(all.end(), seq.begin(), seq.end());
  }
  return all;
}

TEST(SplitSentences, BertSentenceLevelConcatenatesToMegatronDocuments) {
  TempDir dir;
  constexpr size_t kDocs = 9887;  // the whole shared sample
  auto o = bert_options(sample_head(dir, kDocs), dir.file("out"));
  o.split_sentences = true;
  o.block_bytes = 8192;  // many blocks in flight
  const auto summary = lmforge::prep::run_prep(o);
  ASSERT_EQ(summary.outputs, std::vector<std::string>{dir.file("out_text_sentence")});
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.idx")));

  auto ds = lmforge::data::IndexedDataset::open(dir.file("out_text_sentence"));
  auto megatron = lmforge::data::IndexedDataset::open(shared_path("data/sample/sample_bert_text_document"));
  const auto stats = lmforge::data::compute_dataset_stats(*ds);
  // What `lmforge inspect` reports: one document per line, the document index ending at the sequence count.
  EXPECT_EQ(stats.documents, kDocs);
  EXPECT_EQ(ds->document_index(0), 0);
  EXPECT_EQ(static_cast<uint64_t>(ds->document_index(kDocs)), stats.sequences);
  EXPECT_EQ(stats.sequences, summary.sequences);
  EXPECT_EQ(stats.tokens, summary.tokens);
  EXPECT_EQ(stats.dtype, megatron->dtype());
  EXPECT_EQ(stats.bin_bytes, 2 * stats.tokens);  // uint16
  EXPECT_EQ(stats.idx_bytes, 34 + 12 * stats.sequences + 8 * (kDocs + 1));
  EXPECT_GT(stats.sequences, kDocs + kDocs / 4) << "the sample's texts have several sentences each";
  EXPECT_GT(stats.sequence_lengths.min, 0);  // sentences without tokens are dropped

  // WordPiece ids do not depend on the whitespace between sentences, and every sentence ends at whitespace or
  // after punctuation, which BERT splits off anyway: each document's sentences concatenate to Megatron's tokens.
  uint64_t megatron_tokens = 0, megatron_empty = 0, multi = 0;
  std::vector<int32_t> want;
  for (uint64_t j = 0; j < kDocs; ++j) {
    ASSERT_EQ(megatron->document_index(j), static_cast<int64_t>(j) - static_cast<int64_t>(megatron_empty));
    if (megatron->document_index(j + 1) == megatron->document_index(j)) {
      ++megatron_empty;
      want.clear();
    } else {
      megatron->read_sequence(static_cast<uint64_t>(megatron->document_index(j)), want);
    }
    megatron_tokens += want.size();
    ASSERT_EQ(document_tokens(*ds, j), want) << "document " << j;
    multi += ds->document_index(j + 1) - ds->document_index(j) > 1;
  }
  EXPECT_EQ(stats.tokens, megatron_tokens);
  EXPECT_EQ(stats.empty_documents, megatron_empty);
  EXPECT_GT(multi, kDocs / 4);
}

TEST(SplitSentences, Gpt2EodOnlyAfterTheLastSentenceOfEachDocument) {
  TempDir dir;
  const std::string input = dir.file("in.jsonl");
  write_file(input,
             "{\"text\": \"First sentence. Second one! Third?\"}\n"
             "{\"text\": \"\"}\n"
             "{\"text\": \"  \\n \"}\n"
             "{\"text\": [\"Pre-split. Stays whole.\", \"\", \"Second item\"]}\n"
             "{\"text\": \"Line one.\\nLine two.\\n\"}\n");
  lmforge::prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = dir.file("g");
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  o.append_eod = true;
  o.split_sentences = true;
  o.progress_seconds = 1e9;
  lmforge::prep::run_prep(o);
  auto ds = lmforge::data::IndexedDataset::open(dir.file("g_text_sentence"));
  ASSERT_EQ(ds->document_count(), 5u);
  // sentences per document: 3; 0 (empty text); 0 (only whitespace); 2 (a list stays pre-split, "" dropped); 2
  const std::vector<int64_t> doc_index{0, 3, 3, 3, 5, 7};
  for (size_t j = 0; j < doc_index.size(); ++j) EXPECT_EQ(ds->document_index(j), doc_index[j]) << j;
  // "First sentence." = First(5962) sentence(6827) .(13); EOD 50256 ends only each document's last sequence.
  std::vector<int32_t> seq;
  ds->read_sequence(0, seq);
  EXPECT_EQ(seq, (std::vector<int32_t>{5962, 6827, 13}));
  for (uint64_t s = 0; s < ds->sequence_count(); ++s) {
    ds->read_sequence(s, seq);
    bool last = s == 2 || s == 4 || s == 6;
    EXPECT_EQ(seq.back() == 50256, last) << "sequence " << s;
    for (size_t i = 0; i + 1 < seq.size(); ++i) EXPECT_NE(seq[i], 50256);
  }

  // --keep-newlines: the newline after "Line one." stays with that sentence (Megatron's CustomLanguageVars).
  o.output_prefix = dir.file("k");
  o.keep_newlines = true;
  lmforge::prep::run_prep(o);
  auto kept = lmforge::data::IndexedDataset::open(dir.file("k_text_sentence"));
  std::vector<int32_t> a, b;
  ds->read_sequence(5, a);
  kept->read_sequence(5, b);
  EXPECT_EQ(b.size(), a.size() + 1);  // "Line one." + "\n"(198)
  EXPECT_EQ(b.back(), 198);
}

TEST(SplitSentences, SentencePieceDocumentsEqualSpmEncodeWithEos) {
  // T5-style data: GPTSentencePieceTokenizer ids as spm_encode's, EOD = the model's eos (</s> = 2).
  TempDir dir;
  const std::string fixtures = std::string(LMFORGE_SOURCE_DIR) + "/tests/text/spm_fixtures";
  std::ifstream texts(fixtures + "/texts.txt"), ids(fixtures + "/texts.spm_encode.ids");
  std::string jsonl, text, line;
  std::vector<std::vector<int32_t>> want;
  for (int i = 0; i < 100 && std::getline(texts, text) && std::getline(ids, line); ++i) {
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') quoted += '\\';
      if (c == '\t') { quoted += "\\t"; continue; }
      quoted += c;
    }
    jsonl += "{\"text\": " + quoted + "\"}\n";
    std::istringstream in(line);
    want.emplace_back();
    for (int32_t id; in >> id;) want.back().push_back(id);
    want.back().push_back(2);
  }
  write_file(dir.file("t.jsonl"), jsonl);
  lmforge::prep::PrepOptions o;
  o.inputs = {dir.file("t.jsonl")};
  o.output_prefix = dir.file("s");
  o.tokenizer.type = "GPTSentencePieceTokenizer";
  o.tokenizer.model_file = fixtures + "/tiny_unigram.model";
  o.append_eod = true;
  o.progress_seconds = 1e9;
  lmforge::prep::run_prep(o);
  auto ds = lmforge::data::IndexedDataset::open(dir.file("s_text_document"));
  ASSERT_EQ(ds->sequence_count(), want.size());
  std::vector<int32_t> seq;
  for (uint64_t s = 0; s < want.size(); ++s) {
    ds->read_sequence(s, seq);
    EXPECT_EQ(seq, want[s]) << "document " << s;
  }
}

TEST(SplitSentences, ShardedRunsEqualTheSingleProcessRun) {
  TempDir dir;
  auto o = bert_options(sample_head(dir, 600), dir.file("one"));
  o.split_sentences = true;
  o.keep_newlines = true;
  lmforge::prep::run_prep(o);
  // Two static ranks with small shards, then merge: the same sentence-level bytes under the same name.
  o.output_prefix = dir.file("two");
  lmforge::prep::DistributedOptions d;
  d.shard_bytes = 40000;
  for (int r = 0; r < 2; ++r) {
    lmforge::dist::RankInfo rank;
    rank.rank = r;
    rank.world_size = 2;
    rank.source = lmforge::dist::RankSource::Flags;
    std::ostringstream out;
    lmforge::prep::run_sharded_prep(o, d, rank, out);
  }
  const auto summary = lmforge::prep::merge_shards(dir.file("two"));
  ASSERT_EQ(summary.outputs, std::vector<std::string>{dir.file("two_text_sentence")});
  EXPECT_TRUE(lmforge::testing::read_file(dir.file("two_text_sentence.bin")) ==
              lmforge::testing::read_file(dir.file("one_text_sentence.bin")));
  EXPECT_TRUE(lmforge::testing::read_file(dir.file("two_text_sentence.idx")) ==
              lmforge::testing::read_file(dir.file("one_text_sentence.idx")));
  // The sentence flags are part of the plan: shards made without them (or with others) are never reused.
  const auto with = lmforge::prep::make_shard_plan(o, d.shard_bytes);
  EXPECT_EQ(with.level, "sentence");
  auto other = o;
  other.keep_newlines = false;
  EXPECT_NE(lmforge::prep::make_shard_plan(other, d.shard_bytes).id, with.id);
  other.split_sentences = false;
  const auto without = lmforge::prep::make_shard_plan(other, d.shard_bytes);
  EXPECT_NE(without.id, with.id);
  EXPECT_EQ(without.level, "document");
  EXPECT_EQ(lmforge::prep::plan_from_json(lmforge::prep::plan_to_json(with), "plan.json").level, "sentence");
  EXPECT_THROW(lmforge::prep::run_sharded_prep(other, d, lmforge::dist::RankInfo{}, std::cout), lmforge::Error);
}

TEST(SplitSentences, FlagErrorsBeforeAnyWork) {
  TempDir dir;
  auto o = bert_options(sample_head(dir, 10), dir.file("b"));
  o.append_eod = true;  // Megatron's BERT tokenizers have no EOD (Megatron fails silently with rc 0)
  o.split_sentences = true;
  try {
    lmforge::prep::run_prep(o);
    FAIL() << "expected an error";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--append-eod"), std::string::npos) << e.what();
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename(), "head.jsonl") << "left behind: " << entry.path();
  o.append_eod = false;
  o.split_sentences = false;
  o.keep_newlines = true;  // does nothing without --split-sentences
  EXPECT_THROW(lmforge::prep::run_prep(o), lmforge::Error);
  o.split_sentences = true;
  o.lang = "klingon";
  EXPECT_THROW(lmforge::prep::run_prep(o), lmforge::Error);
}

}  // namespace
