// defines: a shard plan notices an input whose content was replaced in place with its size and modification time
//          kept (cp -p, rsync -t, touch -r), so a sharded resume never reuses shards made from the old content
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "prep/shard_plan.h"
#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

lmforge::prep::PrepOptions options(const std::string& input, const std::string& prefix) {
  lmforge::prep::PrepOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "GPT2BPETokenizer";
  o.tokenizer.vocab_file = shared_path("data/vocab/gpt2-vocab.json");
  o.tokenizer.merge_file = shared_path("data/vocab/gpt2-merges.txt");
  return o;
}

// Sets the byte at `offset` to `value` and puts the file's modification time back.
void edit_in_place_keeping_size_and_time(const std::string& path, size_t offset, char value) {
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  std::string text = read_file(path);
  text[offset] = value;
  write_file(path, text);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(PlanStaleness, ContentReplacedWithSizeAndTimeKeptGivesAnotherPlan) {
  TempDir dir;
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  write_file(dir.file("in.jsonl"), sample);
  const auto o = options(dir.file("in.jsonl"), dir.file("out"));
  const uint64_t shard = 256 << 10;
  const std::string id = lmforge::prep::make_shard_plan(o, shard, true).id;
  EXPECT_EQ(lmforge::prep::make_shard_plan(o, shard, true).id, id);  // unchanged input: the same plan
  // A byte at the middle of the third shard-size region, and one near the end of the file.
  for (size_t offset : {size_t(2 * shard + shard / 2), sample.size() - 100}) {
    edit_in_place_keeping_size_and_time(dir.file("in.jsonl"), offset, sample[offset] == 'a' ? 'b' : 'a');
    const std::string edited = lmforge::prep::make_shard_plan(o, shard, true).id;
    EXPECT_NE(edited, id) << "an edit at byte " << offset << " kept the plan";
    edit_in_place_keeping_size_and_time(dir.file("in.jsonl"), offset, sample[offset]);  // undone: the old plan
    EXPECT_EQ(lmforge::prep::make_shard_plan(o, shard, true).id, id);
  }
}

}  // namespace
