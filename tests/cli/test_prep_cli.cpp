// `lmforge prep` as a user runs it: exit codes, messages, --help, and a SIGKILL mid-way leaving no dataset.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

std::string prep_command(const std::string& input, const std::string& prefix) {
  return std::string(LMFORGE_EXE) + " prep --input " + input + " --output-prefix " + prefix +
         " --tokenizer-type GPT2BPETokenizer --vocab-file " + shared_path("data/vocab/gpt2-vocab.json") +
         " --merge-file " + shared_path("data/vocab/gpt2-merges.txt") + " --append-eod";
}

TEST(PrepCli, HelpExplainsEveryFlag) {
  auto r = run_command(std::string(LMFORGE_EXE) + " prep --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* flag : {"--input", "--output-prefix", "--json-keys", "--tokenizer-type", "--vocab-file",
                           "--merge-file", "--append-eod", "--workers", "--skip-invalid", "--report-invalid",
                           "--progress-seconds", "--max-line-bytes", "U+FFFD", "empty document"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(PrepCli, WritesMegatronBytesAndPrintsASummary) {
  TempDir dir;
  auto r = run_command(prep_command(shared_path("data/sample/sample.jsonl"), dir.file("s")) + " --workers 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("documents:      9,887"), std::string::npos) << r.output;
  EXPECT_TRUE(read_file(dir.file("s_text_document.bin")) ==
              read_file(shared_path("data/sample/sample_gpt2_text_document.bin")));
  EXPECT_TRUE(read_file(dir.file("s_text_document.idx")) ==
              read_file(shared_path("data/sample/sample_gpt2_text_document.idx")));
}

TEST(PrepCli, BadLineExitsNonZeroNamingFileAndLine) {
  TempDir dir;
  write_file(dir.file("bad.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"b\"\n");
  auto r = run_command(prep_command(dir.file("bad.jsonl"), dir.file("out")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("lmforge prep: error: " + dir.file("bad.jsonl") + ":2: not valid JSON"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out_text_document.bin")));
}

// An input that is one of the outputs (here the dataset itself, given by another path, with --skip-invalid so its
// binary lines would not stop the run) is refused before anything is written, in single-process and sharded mode;
// before the fix the run exited 0 and replaced its own input.
TEST(PrepCli, OutputThatIsAnInputIsRefusedAndTheInputSurvives) {
  TempDir dir;
  const std::string bin = dir.file("c_text_document.bin"), idx = dir.file("c_text_document.idx");
  write_file(bin, read_file(shared_path("data/sample/sample_gpt2_text_document.bin")));
  write_file(idx, read_file(shared_path("data/sample/sample_gpt2_text_document.idx")));
  const std::string before = read_file(bin);
  for (const std::string& extra : {std::string(), std::string(" --shard-size 1M")}) {
    auto r = run_command(prep_command(dir.file("./c_text_document.bin"), dir.file("c")) + " --skip-invalid" + extra);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("would overwrite its own input"), std::string::npos) << r.output;
    EXPECT_TRUE(read_file(bin) == before) << "the input was overwritten" << extra;
  }
}

// Sizes outside 1 byte .. 1024G are refused: "-5M" wrapped to 2^64 − 5M and "17179869184G" wrapped to 0 before.
TEST(PrepCli, ShardSizeOutsideItsRangeIsRefused) {
  TempDir dir;
  for (const char* size : {"-5M", "17179869184G", "0", "2048G"}) {
    auto r = run_command(prep_command(shared_path("data/sample/sample.jsonl"), dir.file("s")) + " --shard-size " + size);
    EXPECT_EQ(r.status, 1) << size << ": " << r.output;
    EXPECT_TRUE(r.output.find("outside the valid range") != std::string::npos ||
                r.output.find("not a size") != std::string::npos)
        << size << ": " << r.output;
  }
}

// A device in sharded mode is refused with what to do instead (before: /dev/zero planned as 0 bytes, exit 0, an
// empty dataset).
TEST(PrepCli, NonRegularInputInShardedModeIsRefused) {
  TempDir dir;
  auto r = run_command(prep_command("/dev/zero", dir.file("z")) + " --shard-size 1M");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("/dev/zero: not a regular file"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("z_text_document.bin")));
}

TEST(PrepCli, SigkillMidwayLeavesNoDatasetAndARerunCompletes) {
  TempDir dir;
  // About 90 MB: long enough to be killed while running on one worker.
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  {
    std::ofstream big(dir.file("big.jsonl"), std::ios::binary);
    for (int i = 0; i < 30; ++i) big << sample;
  }
  const std::string prefix = dir.file("big");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = prep_command(dir.file("big.jsonl"), prefix) + " --workers 1 >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill as soon as the run is demonstrably mid-way: its temporary .bin exists and holds data.
  int status = 0;
  bool midway = false;
  for (int i = 0; i < 1000 && !midway; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "prep finished before it could be killed; enlarge the input";
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("big_text_document.bin.tmp-", 0) == 0 && entry.file_size() > 0) midway = true;
    }
  }
  ASSERT_TRUE(midway) << "prep wrote nothing within 10 s";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(std::filesystem::exists(prefix + "_text_document.bin"));
  EXPECT_FALSE(std::filesystem::exists(prefix + "_text_document.idx"));

  auto r = run_command(prep_command(dir.file("big.jsonl"), prefix) + " --workers 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("documents:      296,610"), std::string::npos) << r.output;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << "stale temporary " << entry.path();
}

}  // namespace
