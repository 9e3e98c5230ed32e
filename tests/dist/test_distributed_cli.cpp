// `lmforge prep` across processes, as users launch it: mpirun with 4 ranks, a static split of 3 processes whose
// ranks come from a flag, a Slurm array variable and a Kubernetes index, finished by `lmforge merge --shards`;
// a rank SIGKILLed mid-way, then a rerun that skips complete shards; a failing rank ending the job; and a
// "multi-host" run of Open MPI over TCP between two network namespaces made here. Every run must give
// Megatron's bytes (the shared reference outputs, or Megatron's sample dataset merged with itself).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "data/indexed_dataset.h"
#include "mpi_test_util.h"
#include "test_util.h"

namespace {

using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kRef = "data/sample/sample_gpt2_text_document";

// mpirun as root with more ranks than cores, and two hosts as network namespaces: tests/dist/mpi_test_util.h.
std::string mpirun(int np) { return lmforge::testing::mpirun_prefix(np); }

std::string prep_args(const std::string& input, const std::string& prefix) {
  return std::string(LMFORGE_EXE) + " prep --input " + input + " --output-prefix " + prefix +
         " --tokenizer-type GPT2BPETokenizer --vocab-file " + shared_path("data/vocab/gpt2-vocab.json") +
         " --merge-file " + shared_path("data/vocab/gpt2-merges.txt") + " --append-eod --workers 1";
}

void expect_same_bytes(const std::string& prefix, const std::string& reference_prefix) {
  EXPECT_TRUE(read_file(prefix + ".bin") == read_file(reference_prefix + ".bin")) << prefix << ".bin differs";
  EXPECT_TRUE(read_file(prefix + ".idx") == read_file(reference_prefix + ".idx")) << prefix << ".idx differs";
}

size_t count_manifests(const std::string& shard_dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shard_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("shard-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json") ++n;
  }
  return n;
}

// "found K of T shards complete" in a log: K (−1 if absent).
long found_complete(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("found ([0-9]+) of ([0-9]+) shards complete"))) return -1;
  return std::stol(m[1]);
}

TEST(DistributedPrepCli, HelpExplainsShardingFlagsAndLaunchers) {
  auto r = run_command(std::string(LMFORGE_EXE) + " prep --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* text : {"--shard-size", "--rank", "--world-size", "--no-mpi", "mpirun -np N", "SLURM_ARRAY_TASK_ID",
                           "SLURM_PROCID", "JOB_COMPLETION_INDEX", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                           "lmforge merge --shards", "found complete"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
  r = run_command(std::string(LMFORGE_EXE) + " merge --help");
  EXPECT_NE(r.output.find("--shards"), std::string::npos) << r.output;
}

TEST(DistributedPrepCli, MpirunWithFourRanksEqualsMegatron) {
  TempDir dir;
  auto r = run_command(mpirun(4) + prep_args(shared_path("data/sample/sample.jsonl"), dir.file("s")) +
                       " --shard-size 128K --progress-seconds 0.02");
  ASSERT_EQ(r.status, 0) << r.output;
  // Rank 0 prints progress aggregated over all ranks.
  EXPECT_TRUE(std::regex_search(r.output, std::regex("prep: shards [0-9]+/22 \\| [0-9.]+ MB of 2\\.9 MB \\([0-9]+%\\) \\| [0-9.]+ MB/s")))
      << r.output;
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
  EXPECT_NE(r.output.find("on 4 ranks; found 0 of 22 shards complete, 22 to prepare"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("per-rank report"), std::string::npos) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.output.find("  rank " + std::to_string(rank) + " "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all 4 ranks: 22 shards, 2.9 MB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("documents:      9,887"), std::string::npos) << r.output;
  // Nothing of the run's temporaries remains.
  for (const auto& e : std::filesystem::directory_iterator(dir.file("s.shards")))
    EXPECT_EQ(e.path().filename().string().find("tmp-"), std::string::npos) << e.path();
}

TEST(DistributedPrepCli, StaticThreeProcessesFromFlagSlurmAndKubernetesThenMergeEqualsMegatron) {
  TempDir dir;
  const std::string base = prep_args(shared_path("data/sample/sample.jsonl"), dir.file("s")) + " --shard-size 200K";
  // Three processes at once, each learning its rank another way; each exit status is checked.
  const std::string script =
      base + " --rank 0 --world-size 3 > " + dir.file("r0.log") + " 2>&1 & p0=$!\n" +
      "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=3 " + base + " > " + dir.file("r1.log") + " 2>&1 & p1=$!\n" +
      "JOB_COMPLETION_INDEX=2 " + base + " --world-size 3 > " + dir.file("r2.log") + " 2>&1 & p2=$!\n" +
      "wait $p0 || exit 10; wait $p1 || exit 11; wait $p2 || exit 12\n";
  write_file(dir.file("run.sh"), script);
  auto r = run_command("sh " + dir.file("run.sh"));
  ASSERT_EQ(r.status, 0) << r.output << read_file(dir.file("r0.log")) << read_file(dir.file("r1.log"))
                         << read_file(dir.file("r2.log"));
  EXPECT_NE(read_file(dir.file("r1.log")).find("SLURM_ARRAY_TASK_ID=1"), std::string::npos);
  EXPECT_NE(read_file(dir.file("r2.log")).find("JOB_COMPLETION_INDEX=2"), std::string::npos);
  EXPECT_NE(read_file(dir.file("r0.log")).find("lmforge merge --shards " + dir.file("s")), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.idx")));  // no rank assembles in a static split
  r = run_command(std::string(LMFORGE_EXE) + " merge --shards " + dir.file("s"));
  ASSERT_EQ(r.status, 0) << r.output;
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
}

TEST(DistributedPrepCli, MergeBeforeEveryShardIsDoneNamesTheMissingOnes) {
  TempDir dir;
  auto r = run_command(prep_args(shared_path("data/sample/sample.jsonl"), dir.file("s")) +
                       " --shard-size 1M --rank 1 --world-size 2");
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_command(std::string(LMFORGE_EXE) + " merge --shards " + dir.file("s"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("2 of 3 shards are not complete (0, 2)"), std::string::npos) << r.output;
}

TEST(DistributedPrepCli, FailingRankEndsTheJobNonZeroWithItsReason) {
  TempDir dir;
  std::string text = read_file(shared_path("data/sample/sample.jsonl"));
  const size_t cut = text.find('\n', text.size() / 2) + 1;
  text.insert(cut, "{\"text\": [1, 2]}\n");  // line 4945 holds a list of numbers, not text
  write_file(dir.file("bad.jsonl"), text);
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command("timeout 60 sh -c '" + mpirun(3) + prep_args(dir.file("bad.jsonl"), dir.file("s")) +
                       " --shard-size 128K'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_LT(seconds, 50);
  const std::string line = std::to_string(std::count(text.begin(), text.begin() + cut, '\n') + 1);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("error: rank [0-2] of 3 \\([^)]*\\): .*bad\\.jsonl:" + line + ":")))
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.bin")));
}

TEST(DistributedPrepCli, SigkilledRankThenRerunSkipsCompleteShardsAndEqualsMegatron) {
  TempDir dir;
  // Megatron's sample four times over (about 12 MB, 46 shards): long enough to kill a rank mid-way.
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  {
    std::ofstream big(dir.file("big.jsonl"), std::ios::binary);
    for (int i = 0; i < 4; ++i) big << sample;
  }
  {
    lmforge::data::IndexedDatasetWriter ref(dir.file("ref"), lmforge::data::DType::UInt16);
    for (int i = 0; i < 4; ++i) ref.append_dataset(shared_path(kRef));
    ref.finish();
  }
  const std::string cmd = mpirun(3) + prep_args(dir.file("big.jsonl"), dir.file("s")) + " --shard-size 256K";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    const std::string line = "exec " + cmd + " > " + dir.file("first.log") + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for a few shards to complete, then SIGKILL one rank (a child of mpirun).
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (count_manifests(dir.file("s.shards")) < 4 && elapsed() < 60)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pid_t victim = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const size_t close = s.rfind(')');
    if (close == std::string::npos || s.find("(lmforge)") == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));
    char state;
    long ppid;
    rest >> state >> ppid;
    if (ppid == pid) victim = static_cast<pid_t>(std::stol(name));  // the last rank found
  }
  int status = 0;
  if (victim == 0 || ::waitpid(pid, &status, WNOHANG) != 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "no rank to kill (the run ended too early?): " << read_file(dir.file("first.log"));
  }
  const size_t complete_at_kill = count_manifests(dir.file("s.shards"));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // mpirun must notice, end the other ranks and exit non-zero within seconds, not hang.
  const auto killed = std::chrono::steady_clock::now();
  while (::waitpid(pid, &status, WNOHANG) == 0 &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count() < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (::waitpid(pid, &status, WNOHANG) == 0 && !(WIFEXITED(status) || WIFSIGNALED(status))) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "mpirun did not end within 30 s of a rank being killed";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << read_file(dir.file("first.log"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.bin")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("s_text_document.idx")));
  const size_t complete_after = count_manifests(dir.file("s.shards"));
  EXPECT_GE(complete_after, complete_at_kill);
  EXPECT_GT(complete_after, 0u);

  auto r = run_command(cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(found_complete(r.output), static_cast<long>(complete_after)) << r.output;
  EXPECT_LT(complete_after, 46u) << "every shard was complete before the kill: nothing was tested";
  expect_same_bytes(dir.file("s_text_document"), dir.file("ref"));
}

using lmforge::testing::NetnsPair;

TEST(DistributedPrepCli, TwoHostsAsNetworkNamespacesOverTcpEqualsMegatron) {
  TempDir dir;
  NetnsPair hosts(dir);
  LMFORGE_REQUIRE_NETNS(hosts);
  // The launch really spans both namespaces: each rank reports the address it sees.
  auto r = run_command("timeout 60 " + hosts.mpirun(2) + "sh -c 'ip -o -4 addr show | grep -o \"10\\.231\\.0\\.[12]\"'");
  ASSERT_EQ(r.status, 0) << r.output;
  // Count the address lines only: mpirun may add its own notices to the output (a sandbox that refuses
  // setpgid makes Open MPI's rsh launcher print a warning line).
  std::istringstream lines(r.output);
  int address_lines = 0;
  for (std::string line; std::getline(lines, line);)
    if (line == "10.231.0.1" || line == "10.231.0.2") ++address_lines;
  EXPECT_EQ(address_lines, 4) << r.output;
  EXPECT_NE(r.output.find("10.231.0.1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("10.231.0.2"), std::string::npos) << r.output;

  r = run_command("timeout 120 " + hosts.mpirun(2) + prep_args(shared_path("data/sample/sample.jsonl"), dir.file("s")) +
                  " --shard-size 128K");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("all 4 ranks: 22 shards"), std::string::npos) << r.output;
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
}

}  // namespace
