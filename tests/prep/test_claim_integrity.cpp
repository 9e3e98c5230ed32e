// defines: tests that `prep --claim` never assembles a dataset that is not its input's nor reports one that is gone:
//          an input rewritten in place (size and mtime kept) while a claimer works is refused naming the file, with
//          the shard cut from it not committed; a deleted assembled dataset is reassembled from the shards by the
//          next run, and `inspect` does not call it assembled meanwhile
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "data/lease.h"
#include "prep/claim_prep.h"
#include "prep/shard_plan.h"
#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;
namespace prep = lmforge::prep;
namespace data = lmforge::data;

const std::string kRef = "data/sample/sample_gpt2_text_document";  // sample.jsonl, GPT-2, --append-eod

prep::PrepOptions options(const std::string& input, const std::string& prefix) {
  prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  o.append_eod = true;
  o.workers = 1;
  return o;
}

bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Every 'e' of each line's "text" value becomes 'a' (valid JSON, the same size: what a corrected re-upload looks
// like), and the file keeps its inode and modification time, as cp -p or rsync --inplace -t leave it.
void rewrite_in_place_keeping_size_and_time(const std::string& path) {
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  std::string text = read_file(path);
  const std::string key = "\"text\": \"";
  for (size_t line = 0; line < text.size();) {
    const size_t end = std::min(text.find('\n', line), text.size());
    const size_t at = text.find(key, line);
    if (at != std::string::npos && at < end)
      for (size_t i = at + key.size(); i < end; ++i)
        if (text[i] == 'e') text[i] = 'a';
    line = end + 1;
  }
  write_file(path, text);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(ClaimIntegrity, InputRewrittenInPlaceMidRunIsRefusedNamingTheFile) {
  TempDir dir;
  const std::string input = dir.file("in.jsonl");
  write_file(input, read_file(shared_path("data/sample/sample.jsonl")));
  const prep::PrepOptions o = options(input, dir.file("s"));
  const uint64_t shard_bytes = 256 << 10;
  // This test writes the plan (as the first claimer would) and holds shard 0, so that the claimer below does every
  // other shard from the original content and is left waiting for shard 0.
  const prep::ShardPlan plan = prep::make_shard_plan(o, shard_bytes);
  ASSERT_GT(plan.shards.size(), 4u);
  prep::write_or_check_plan(o.output_prefix, plan);
  const std::string claims = prep::shard_dir(o.output_prefix) + "/claims";
  std::filesystem::create_directories(claims);
  data::ServerClock clock(claims + "/probe-test");
  auto held = data::Lease::try_acquire(claims + "/" + prep::shard_name(0), 1.0, clock, data::this_process_owner());
  ASSERT_TRUE(held);

  std::atomic<bool> finished{false};
  std::string error;
  std::optional<prep::PrepSummary> result;
  std::thread claimer([&] {
    try {
      std::ostringstream out;
      result = prep::run_claim_prep(o, shard_bytes, 1.0, out);
    } catch (const std::exception& e) {
      error = e.what();
    }
    finished = true;
  });
  const auto others_done = [&] {
    for (uint32_t i = 1; i < plan.shards.size(); ++i)
      if (!exists(prep::shard_manifest_path(o.output_prefix, i))) return false;
    return true;
  };
  for (int i = 0; i < 1200 && !others_done() && !finished; ++i) {
    held->heartbeat();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool waited = others_done();
  // The input is replaced under the running claimer; then this test stops beating, and the claimer takes shard 0
  // over after the 1 s lease and cuts it from the new content.
  rewrite_in_place_keeping_size_and_time(input);
  claimer.join();
  ASSERT_TRUE(waited) << error;
  EXPECT_FALSE(result.has_value()) << "the claimer assembled a dataset from two contents of " << input;
  EXPECT_NE(error.find(input + ": changed since plan " + plan.id), std::string::npos) << error;
  EXPECT_NE(error.find("shard-000000 (bytes 0-"), std::string::npos) << error;
  EXPECT_FALSE(exists(prep::shard_manifest_path(o.output_prefix, 0)));
  EXPECT_FALSE(exists(dir.file("s_text_document.bin")));
  EXPECT_FALSE(exists(dir.file("s_text_document.idx")));
}

TEST(ClaimIntegrity, DeletedAssembledDatasetIsReassembledAndNotReportedAssembled) {
  TempDir dir;
  const prep::PrepOptions o = options(shared_path("data/sample/sample.jsonl"), dir.file("s"));
  const uint64_t shard_bytes = 512 << 10;
  std::ostringstream first;
  ASSERT_TRUE(prep::run_claim_prep(o, shard_bytes, 2.0, first).has_value()) << first.str();
  const std::string out = dir.file("s_text_document");
  EXPECT_TRUE(read_file(out + ".bin") == read_file(shared_path(kRef) + ".bin"));

  std::filesystem::remove(out + ".bin");
  std::filesystem::remove(out + ".idx");
  std::ostringstream status;
  prep::print_claim_status(dir.file("s.shards"), status);
  EXPECT_EQ(status.str().find("assembled:       yes"), std::string::npos) << status.str();
  EXPECT_NE(status.str().find("assembled:       no: " + dir.file("s.shards/assembled.json") + " says so, but " + out +
                              ".bin is missing"),
            std::string::npos)
      << status.str();

  // The same command again (within the first assembly's lease): the datasets come back from the shards.
  std::ostringstream second;
  const auto summary = prep::run_claim_prep(o, shard_bytes, 2.0, second);
  EXPECT_TRUE(summary.has_value()) << second.str();
  EXPECT_NE(second.str().find("this process assembled"), std::string::npos) << second.str();
  ASSERT_TRUE(exists(out + ".bin") && exists(out + ".idx"));
  EXPECT_TRUE(read_file(out + ".bin") == read_file(shared_path(kRef) + ".bin"));
  EXPECT_TRUE(read_file(out + ".idx") == read_file(shared_path(kRef) + ".idx"));
  std::ostringstream after;
  prep::print_claim_status(dir.file("s.shards"), after);
  EXPECT_NE(after.str().find("assembled:       yes"), std::string::npos) << after.str();

  // A truncated .bin (moved and copied back in part) is not the assembled dataset either.
  std::filesystem::resize_file(out + ".bin", 1000);
  std::ostringstream third;
  EXPECT_TRUE(prep::run_claim_prep(o, shard_bytes, 2.0, third).has_value()) << third.str();
  EXPECT_TRUE(read_file(out + ".bin") == read_file(shared_path(kRef) + ".bin"));
  // Once whole, a rerun has nothing to do.
  std::ostringstream fourth;
  EXPECT_FALSE(prep::run_claim_prep(o, shard_bytes, 2.0, fourth).has_value());
  EXPECT_NE(fourth.str().find("is assembled; this process can stop"), std::string::npos) << fourth.str();
}

}  // namespace
