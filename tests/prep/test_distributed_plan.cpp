// Sharded prep through the library: the plan (deterministic, cut at line starts, compressed files whole), assembly
// byte-identical to Megatron's outputs, resume that skips complete shards, refusal of shards of another plan,
// errors in a mid-file shard naming the file's own line, and a static split over ranks finished by merge_shards().
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/indexed_dataset.h"
#include "prep/distributed.h"
#include "prep/prep.h"
#include "prep/shard_assembly.h"
#include "prep/shard_plan.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using namespace lmforge;
using lmforge::testing::read_file;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kRef = "data/sample/sample_gpt2_text_document";

prep::PrepOptions gpt2_options(std::vector<std::string> inputs, const std::string& prefix) {
  prep::PrepOptions o;
  o.inputs = std::move(inputs);
  o.output_prefix = prefix;
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  o.append_eod = true;
  o.workers = 1;
  o.progress_seconds = 1e9;
  return o;
}

dist::RankInfo static_rank(int rank, int world) {
  dist::RankInfo r;
  r.rank = rank;
  r.world_size = world;
  r.source = dist::RankSource::Flags;
  return r;
}

std::optional<prep::PrepSummary> run_sharded(const prep::PrepOptions& o, uint64_t shard_bytes, int rank = 0,
                                             int world = 1) {
  prep::DistributedOptions d;
  d.shard_bytes = shard_bytes;
  std::ostringstream out;
  return prep::run_sharded_prep(o, d, static_rank(rank, world), out);
}

void expect_same_bytes(const std::string& prefix, const std::string& reference_prefix) {
  EXPECT_TRUE(read_file(prefix + ".bin") == read_file(reference_prefix + ".bin")) << prefix << ".bin differs";
  EXPECT_TRUE(read_file(prefix + ".idx") == read_file(reference_prefix + ".idx")) << prefix << ".idx differs";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ino_t inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(ShardPlan, DeterministicContiguousAndCutAtLineStarts) {
  const std::string sample = shared_path("data/sample/sample.jsonl");
  const std::string text = read_file(sample);
  auto o = gpt2_options({sample}, "unused");
  const auto a = prep::make_shard_plan(o, 100000);
  const auto b = prep::make_shard_plan(o, 100000);
  EXPECT_EQ(a.id, b.id);
  ASSERT_EQ(a.shards.size(), b.shards.size());
  ASSERT_GE(a.shards.size(), 25u);
  uint64_t pos = 0;
  for (const auto& s : a.shards) {
    EXPECT_FALSE(s.piece.whole_file);
    EXPECT_EQ(s.piece.begin, pos);
    EXPECT_GT(s.piece.end, s.piece.begin);
    if (s.piece.begin > 0) {
      EXPECT_EQ(text[s.piece.begin - 1], '\n') << "shard " << s.index;
    }
    pos = s.piece.end;
  }
  EXPECT_EQ(pos, text.size());
  // Anything that changes output bytes changes the id; what does not (workers) keeps it.
  EXPECT_NE(prep::make_shard_plan(o, 100001).id, a.id);
  auto no_eod = o;
  no_eod.append_eod = false;
  EXPECT_NE(prep::make_shard_plan(no_eod, 100000).id, a.id);
  auto eod_token = o;
  eod_token.tokenizer.eod_token = "</s>";
  EXPECT_NE(prep::make_shard_plan(eod_token, 100000).id, a.id);
  auto other_merges = o;  // same path semantics, other content: the id follows the tokenizer files' contents
  other_merges.tokenizer.merge_file = shared_path("data/vocab/gpt2-vocab.json");
  EXPECT_NE(prep::make_shard_plan(other_merges, 100000).id, a.id);
  auto workers = o;
  workers.workers = 7;
  EXPECT_EQ(prep::make_shard_plan(workers, 100000).id, a.id);
  // plan.json round trip
  const auto c = prep::plan_from_json(prep::plan_to_json(a), "plan.json");
  EXPECT_EQ(c.id, a.id);
  EXPECT_EQ(c.description, a.description);
  ASSERT_EQ(c.shards.size(), a.shards.size());
  for (size_t i = 0; i < a.shards.size(); ++i) {
    EXPECT_EQ(c.shards[i].piece.begin, a.shards[i].piece.begin);
    EXPECT_EQ(c.shards[i].piece.end, a.shards[i].piece.end);
  }
}

TEST(ShardPlan, LongLinesAndCompressedFilesStayWhole) {
  TempDir dir;
  // One line much longer than a shard: boundaries inside it collapse to the line's end.
  std::string line = "{\"text\": \"" + std::string(5000, 'x') + "\"}\n";
  write_file(dir.file("a.jsonl"), line + line + "{\"text\": \"short\"}\n");
  ASSERT_EQ(lmforge::testing::run_command("gzip -c " + dir.file("a.jsonl") + " > " + dir.file("b.jsonl.gz")).status, 0);
  auto plan = prep::make_shard_plan(gpt2_options({dir.file("a.jsonl"), dir.file("b.jsonl.gz")}, "x"), 1000);
  ASSERT_EQ(plan.shards.size(), 4u);
  EXPECT_EQ(plan.shards[0].piece.end, line.size());
  EXPECT_EQ(plan.shards[1].piece.end, 2 * line.size());
  EXPECT_EQ(plan.shards[2].piece.end, 2 * line.size() + 18);
  EXPECT_TRUE(plan.shards[3].piece.whole_file);
}

TEST(ShardedPrep, AssemblyIsByteIdenticalToMegatron) {
  TempDir dir;
  auto o = gpt2_options({shared_path("data/sample/sample.jsonl")}, dir.file("s"));
  auto summary = run_sharded(o, 64 << 10);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->documents, 9887u);
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
  EXPECT_GE(prep::read_plan(dir.file("s")).shards.size(), 40u);
}

TEST(ShardedPrep, CompressedAndPlainFilesTogetherEqualMegatronsMerge) {
  TempDir dir;
  const std::string sample = shared_path("data/sample/sample.jsonl");
  ASSERT_EQ(lmforge::testing::run_command("zstd -q -c " + sample + " > " + dir.file("a.jsonl.zst")).status, 0);
  auto o = gpt2_options({dir.file("a.jsonl.zst"), sample}, dir.file("s"));
  ASSERT_TRUE(run_sharded(o, 300 << 10));
  // Reference: Megatron's sample dataset twice, merged the way merge_datasets.py does (data's writer).
  {
    data::IndexedDatasetWriter ref(dir.file("ref"), data::DType::UInt16);
    ref.append_dataset(shared_path(kRef));
    ref.append_dataset(shared_path(kRef));
    ref.finish();
  }
  expect_same_bytes(dir.file("s_text_document"), dir.file("ref"));
}

TEST(ShardedPrep, RerunSkipsCompleteShardsAndRedoesOnlyMissingOnes) {
  TempDir dir;
  auto o = gpt2_options({shared_path("data/sample/sample.jsonl")}, dir.file("s"));
  ASSERT_TRUE(run_sharded(o, 256 << 10));
  const auto plan = prep::read_plan(dir.file("s"));
  ASSERT_GE(plan.shards.size(), 10u);
  // As if killed: one shard lost its manifest, another also its data; the final files are gone.
  std::filesystem::remove(prep::shard_manifest_path(dir.file("s"), 3));
  std::filesystem::remove(prep::shard_manifest_path(dir.file("s"), 7));
  std::filesystem::remove(prep::shard_dataset_prefix(dir.file("s"), 7, "text") + ".bin");
  std::filesystem::remove(dir.file("s_text_document.bin"));
  std::filesystem::remove(dir.file("s_text_document.idx"));
  // A damaged shard whose manifest is intact is made again too (its datasets no longer match the manifest).
  write_file(prep::shard_dataset_prefix(dir.file("s"), 5, "text") + ".idx", "junk");
  const std::string kept = prep::shard_dataset_prefix(dir.file("s"), 0, "text") + ".bin";
  const std::string redone = prep::shard_dataset_prefix(dir.file("s"), 3, "text") + ".bin";
  const ino_t kept_inode = inode(kept), redone_inode = inode(redone);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(run_sharded(o, 256 << 10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("found " + std::to_string(plan.shards.size() - 3) + " complete, 3 to prepare"), std::string::npos)
      << log;
  EXPECT_EQ(inode(kept), kept_inode) << "a complete shard was made again";
  EXPECT_NE(inode(redone), redone_inode) << "a shard without manifest was reused";
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
}

TEST(ShardedPrep, ShardsOfAnotherPlanAreAnErrorNeverReused) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), read_file(shared_path("data/sample/sample.jsonl")));
  auto o = gpt2_options({dir.file("in.jsonl")}, dir.file("s"));
  ASSERT_TRUE(run_sharded(o, 512 << 10));
  auto no_eod = o;
  no_eod.append_eod = false;
  std::string e = error_of([&] { run_sharded(no_eod, 512 << 10); });
  EXPECT_NE(e.find("was: append-eod: yes"), std::string::npos) << e;
  EXPECT_NE(e.find("now: append-eod: no"), std::string::npos) << e;
  EXPECT_NE(e.find("remove " + dir.file("s") + ".shards"), std::string::npos) << e;
  // The input changed (appended to): its size and mtime differ.
  { std::ofstream(dir.file("in.jsonl"), std::ios::app) << "{\"text\": \"more\"}\n"; }
  e = error_of([&] { run_sharded(o, 512 << 10); });
  EXPECT_NE(e.find("input 0: " + dir.file("in.jsonl")), std::string::npos) << e;
  // A manifest claiming another plan (plan.json agreeing) is refused as well.
  std::filesystem::remove_all(dir.file("s.shards"));
  ASSERT_TRUE(run_sharded(o, 512 << 10));
  const std::string manifest = prep::shard_manifest_path(dir.file("s"), 1);
  std::string text = read_file(manifest);
  const auto plan = prep::read_plan(dir.file("s"));
  text.replace(text.find(plan.id), plan.id.size(), "0123456789abcdef");
  write_file(manifest, text);
  e = error_of([&] { run_sharded(o, 512 << 10); });
  EXPECT_NE(e.find("does not match this run's plan"), std::string::npos) << e;
  e = error_of([&] { prep::merge_shards(dir.file("s")); });
  EXPECT_NE(e.find("does not match this run's plan"), std::string::npos) << e;
}

TEST(ShardedPrep, BadLineInAMidFileShardNamesTheFilesLine) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 2000; ++i) text += i == 1700 ? "{\"text\": 5}\n" : "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  write_file(dir.file("in.jsonl"), text);
  auto o = gpt2_options({dir.file("in.jsonl")}, dir.file("s"));
  const std::string e = error_of([&] { run_sharded(o, 4096); });
  EXPECT_NE(e.find(dir.file("in.jsonl") + ":1700:"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.bin")));
}

TEST(ShardedPrep, StaticSplitOverThreeRanksThenMergeEqualsMegatron) {
  TempDir dir;
  auto o = gpt2_options({shared_path("data/sample/sample.jsonl")}, dir.file("s"));
  EXPECT_FALSE(run_sharded(o, 200 << 10, 0, 3));  // ranks above a world of one do not assemble
  EXPECT_FALSE(run_sharded(o, 200 << 10, 2, 3));
  std::string e = error_of([&] { prep::merge_shards(dir.file("s")); });
  EXPECT_NE(e.find("shards are not complete (1, 4, 7"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.idx")));
  EXPECT_FALSE(run_sharded(o, 200 << 10, 1, 3));
  // What an assembly killed earlier on this host leaves (its pid is gone) is removed by the next one.
  const std::string stale = dir.file("s_text_document.bin.tmp-" + prep::host_name() + "-999999999");
  write_file(stale, "partial");
  const auto summary = prep::merge_shards(dir.file("s"));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_EQ(summary.documents, 9887u);
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
}

TEST(ShardedPrep, SeveralKeysAssembleLikeTheSingleProcessRun) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 600; ++i)
    text += "{\"text\": \"doc " + std::to_string(i) + " body\", \"title\": [\"t" + std::to_string(i) +
            "\", \"\", \"second sentence\"]}\n";
  write_file(dir.file("in.jsonl"), text);
  auto o = gpt2_options({dir.file("in.jsonl")}, dir.file("single"));
  o.json_keys = {"text", "title"};
  prep::run_prep(o);
  o.output_prefix = dir.file("sharded");
  ASSERT_TRUE(run_sharded(o, 2000));
  for (const char* key : {"text", "title"})
    expect_same_bytes(dir.file(std::string("sharded_") + key + "_document"),
                      dir.file(std::string("single_") + key + "_document"));
}

}  // namespace
