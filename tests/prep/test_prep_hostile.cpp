// defines: run_prep on hostile-but-realistic input (issue 17): lines that never end, over-long lines with and
//          without --skip-invalid, the same through sharded byte ranges; two runs on one output prefix; an output
//          prefix under a regular file; --json-keys naming a key twice
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "data/indexed_dataset.h"
#include "data/writer_lock.h"
#include "prep/prep.h"
#include "prep/range_reader.h"
#include "test_util.h"
#include "util/error.h"

namespace {

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
  o.workers = 2;
  return o;
}

std::string error_of(const lmforge::prep::PrepOptions& o) {
  try {
    lmforge::prep::run_prep(o);
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

TEST(PrepHostile, LineLongerThanTheLimitStopsWithFileLineAndTheLimit) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"one\"}\n{\"text\": \"" + std::string(5000, 'a') + "\"}\n{\"text\": \"x\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.max_line_bytes = 1000;
  const std::string error = error_of(o);
  EXPECT_NE(error.find("in.jsonl:2: line longer than 1000 bytes"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.bin")));
}

TEST(PrepHostile, LineLongerThanTheLimitIsSkippedAndCountedWithSkipInvalid) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"one\"}\n{\"text\": \"" + std::string(5000, 'a') + "\"}\n{\"text\": \"x\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.max_line_bytes = 1000;
  o.skip_invalid = true;
  const auto summary = lmforge::prep::run_prep(o);
  EXPECT_EQ(summary.skipped_lines, 1u);
  EXPECT_EQ(summary.documents, 2u);
  // The limit is on the line, not on the block: the same input under the default limit keeps all three.
  auto all = gpt2_options(dir.file("in.jsonl"), dir.file("all"));
  EXPECT_EQ(lmforge::prep::run_prep(all).documents, 3u);
}

TEST(PrepHostile, InputThatNeverEndsALineFailsAtTheLimitInsteadOfExhaustingMemory) {
  TempDir dir;
  // 16 MB without a newline after the first line; the limit is 1 MB, so the run must stop after about that much.
  write_file(dir.file("zeros.jsonl"), "{\"text\": \"ok\"}\n" + std::string(16u << 20, '\0'));
  auto o = gpt2_options(dir.file("zeros.jsonl"), dir.file("out"));
  o.max_line_bytes = 1 << 20;
  const std::string error = error_of(o);
  EXPECT_NE(error.find("zeros.jsonl:2: line longer than 1048576 bytes"), std::string::npos) << error;
  o.skip_invalid = true;
  const auto summary = lmforge::prep::run_prep(o);
  EXPECT_EQ(summary.documents, 1u);
  EXPECT_EQ(summary.skipped_lines, 1u);
}

TEST(PrepHostile, RangeReaderBoundsLinesToo) {
  TempDir dir;
  const std::string text = "{\"text\": \"a\"}\n" + std::string(3000, 'b') + "\n{\"text\": \"c\"}\n";
  write_file(dir.file("in.jsonl"), text);
  lmforge::prep::RangeLineReader r(dir.file("in.jsonl"), 0, text.size(), 100);
  lmforge::data::LineBlock b;
  std::vector<uint64_t> overlong;
  uint64_t lines = 0;
  while (r.next_block(b, 16)) {
    for (uint64_t i : b.overlong) overlong.push_back(b.first_line + i);
    lines += b.line_count;
  }
  EXPECT_EQ(lines, 3u);
  EXPECT_EQ(overlong, (std::vector<uint64_t>{2}));
}

TEST(PrepHostile, SecondRunOnTheSameOutputPrefixFailsNamingTheFirst) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"one\"}\n");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t first = ::fork();
  if (first == 0) {  // stands for a prep run in progress on the prefix: it holds the prefix's lock
    lmforge::data::WriterLock lock(lmforge::data::output_prefix_lock_base(dir.file("out")), "output prefix");
    (void)!::write(fds[1], "x", 1);
    for (;;) ::pause();
  }
  char c;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  const std::string error = error_of(gpt2_options(dir.file("in.jsonl"), dir.file("out")));
  EXPECT_NE(error.find("output prefix " + dir.file("out") + " is locked by another lmforge process: host " +
                       lmforge::data::host_name() + " pid " + std::to_string(first)),
            std::string::npos)
      << error;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.idx")));
  ::kill(first, SIGKILL);  // killed, not released: the next run takes the lock over at once
  ::waitpid(first, nullptr, 0);
  EXPECT_EQ(lmforge::prep::run_prep(gpt2_options(dir.file("in.jsonl"), dir.file("out"))).documents, 1u);
}

TEST(PrepHostile, OutputPrefixUnderARegularFileIsAnErrorNamingIt) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"one\"}\n");
  write_file(dir.file("afile"), "x");
  const std::string error = error_of(gpt2_options(dir.file("in.jsonl"), dir.file("afile/sub/out")));
  EXPECT_NE(error.find("--output-prefix " + dir.file("afile/sub/out") + ": " + dir.file("afile") +
                       " is a file, not a directory"),
            std::string::npos)
      << error;
}

TEST(PrepHostile, JsonKeyGivenTwiceIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  write_file(dir.file("in.jsonl"), "{\"text\": \"one\"}\n");
  auto o = gpt2_options(dir.file("in.jsonl"), dir.file("out"));
  o.json_keys = {"text", "text"};
  const std::string error = error_of(o);
  EXPECT_NE(error.find("--json-keys names \"text\" twice"), std::string::npos) << error;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.idx")));
}

}  // namespace
