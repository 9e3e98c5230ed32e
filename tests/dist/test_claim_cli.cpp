// `lmforge prep --claim` as an instance group runs it: processes started at different times (and one late) share
// the shards and give Megatron's bytes; a process SIGKILLed mid-shard has its claim taken over after the lease; a
// process SIGSTOPped past its lease and resumed does not clobber the shard the other process committed; two
// processes racing to create the plan make one; a process with other output-defining flags is refused; the same
// across two network namespaces with their own hostname and PID space where host/pid pairs collide; a killed
// claimer's status file is removed. Leases of 2 s keep each test within seconds; every child runs under timeout(1).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "mpi_test_util.h"
#include "test_util.h"

extern char** environ;

namespace {

using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kRef = "data/sample/sample_gpt2_text_document";

std::string claim_args(const std::string& input, const std::string& prefix, const std::string& shard_size) {
  return std::string(LMFORGE_EXE) + " prep --input " + input + " --output-prefix " + prefix +
         " --tokenizer-type GPT2BPETokenizer --vocab-file " + shared_path("data/vocab/gpt2-vocab.json") +
         " --merge-file " + shared_path("data/vocab/gpt2-merges.txt") +
         " --append-eod --workers 1 --claim --claim-lease 2 --shard-size " + shard_size;
}

// A child process through sh, stdout and stderr to `log`, killed by timeout(1) if it hangs.
class Child {
 public:
  Child(const std::string& command, std::string log) : log_(std::move(log)) {
    const std::string sh = "exec timeout -k 5 120 " + command + " > " + log_ + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", sh.c_str(), nullptr};
    if (::posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) pid_ = -1;
  }
  ~Child() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Exit status (128 + signal when killed; 124 from timeout(1) when it hung).
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string log() const { return std::filesystem::exists(log_) ? read_file(log_) : std::string(); }

 private:
  pid_t pid_ = -1;
  bool waited_ = false;
  std::string log_;
};

void expect_same_bytes(const std::string& prefix, const std::string& reference_prefix) {
  EXPECT_TRUE(read_file(prefix + ".bin") == read_file(reference_prefix + ".bin")) << prefix << ".bin differs";
  EXPECT_TRUE(read_file(prefix + ".idx") == read_file(reference_prefix + ".idx")) << prefix << ".idx differs";
}

size_t count_files(const std::string& dir, const std::regex& name) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (std::regex_match(e.path().filename().string(), name)) ++n;
  return n;
}

size_t count_matches(const std::string& text, const std::regex& re) {
  return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// Waits (up to 30 s) for the first shard claim of generation 0 in `claims`; returns its shard number and the pid
// written in it (the lmforge process, not the timeout(1) in front of it).
std::pair<int, pid_t> first_claim(const std::string& claims) {
  const std::regex name("shard-([0-9]{6})\\.0");
  for (int i = 0; i < 6000; ++i) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(claims, ec)) {
      std::smatch m;
      const std::string f = e.path().filename().string();
      if (!std::regex_match(f, m, name)) continue;
      std::string host;
      long pid = 0;
      std::istringstream(read_file(e.path().string())) >> host >> pid;
      if (pid > 0) return {std::stoi(m[1]), static_cast<pid_t>(pid)};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {-1, -1};
}

// The sample four times over (11.8 MB): shards of 1 MB take a good fraction of a second each with one worker,
// so a signal sent as soon as a shard is claimed lands mid-shard.
std::string big_input(const TempDir& dir) {
  const std::string sample = read_file(shared_path("data/sample/sample.jsonl"));
  write_file(dir.file("big.jsonl"), sample + sample + sample + sample);
  return dir.file("big.jsonl");
}

// The single-process output of the same input, the reference for runs over big_input().
std::string single_process_reference(const TempDir& dir, const std::string& input) {
  auto r = run_command("timeout 120 " + std::string(LMFORGE_EXE) + " prep --input " + input + " --output-prefix " +
                       dir.file("ref") + " --tokenizer-type GPT2BPETokenizer --vocab-file " +
                       shared_path("data/vocab/gpt2-vocab.json") + " --merge-file " +
                       shared_path("data/vocab/gpt2-merges.txt") + " --append-eod");
  EXPECT_EQ(r.status, 0) << r.output;
  return dir.file("ref_text_document");
}

TEST(ClaimPrepCli, HelpExplainsClaimModeAndFuse) {
  auto r = run_command(std::string(LMFORGE_EXE) + " prep --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* text : {"--claim", "--claim-lease", "nothing left to claim", "gcsfuse", "s3fs",
                           "lmforge inspect <output-prefix>.shards", "file server's clock"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
}

TEST(ClaimPrepCli, ThreeProcessesAtDifferentTimesAndALateFourthEqualMegatron) {
  TempDir dir;
  const std::string cmd = claim_args(shared_path("data/sample/sample.jsonl"), dir.file("s"), "64K");
  std::vector<std::unique_ptr<Child>> children;
  for (const char* log : {"p0.log", "p1.log", "p2.log"}) {
    children.push_back(std::make_unique<Child>(cmd, dir.file(log)));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  // The fourth joins once about half the shards are committed (or everything is done already).
  for (int i = 0; i < 3000 && count_files(dir.file("s.shards"), std::regex("shard-[0-9]+\\.json")) < 21; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  children.push_back(std::make_unique<Child>(cmd, dir.file("p3.log")));
  std::string logs;
  for (auto& c : children) {
    EXPECT_EQ(c->wait(), 0) << c->log();
    logs += c->log();
  }
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
  EXPECT_EQ(count_files(dir.file("s.shards"), std::regex("shard-[0-9]+\\.json")), 42u) << logs;
  // Exactly one process assembled, every other one said there is nothing left; all 42 shards committed once.
  EXPECT_EQ(count_matches(logs, std::regex("this process assembled")), 1u) << logs;
  EXPECT_EQ(count_matches(logs, std::regex("nothing left to claim: all 42 shards are done and")), 3u) << logs;
  EXPECT_EQ(count_matches(logs, std::regex("wrote plan")), 1u) << logs;
  size_t committed = 0, busy = 0;
  std::smatch m;
  for (auto it = logs.cbegin(); std::regex_search(it, logs.cend(), m, std::regex("committed ([0-9]+) shards"));
       it = m.suffix().first) {
    committed += std::stoul(m[1]);
    busy += std::stoul(m[1]) > 0;
  }
  EXPECT_EQ(committed, 42u) << logs;
  EXPECT_GE(busy, 2u) << "the shards were not shared out:\n" << logs;
  EXPECT_EQ(logs.find("lost shard"), std::string::npos) << logs;
  // A process started after the end does nothing and says so.
  auto r = run_command("timeout 60 " + cmd);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing left to claim: all 42 shards are done and " + dir.file("s_text_document") +
                          " is assembled"), std::string::npos) << r.output;
}

TEST(ClaimPrepCli, SigkilledClaimerIsTakenOverAfterTheLease) {
  TempDir dir;
  const std::string input = big_input(dir);
  const std::string cmd = claim_args(input, dir.file("s"), "1M");
  Child a(cmd, dir.file("a.log"));
  const auto [shard, pid] = first_claim(dir.file("s.shards/claims"));
  ASSERT_GE(shard, 0) << a.log();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_EQ(a.wait(), 128 + SIGKILL) << a.log();
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06d", shard);
  ASSERT_FALSE(std::filesystem::exists(dir.file("s.shards/") + name + ".json")) << "killed after finishing the shard";
  Child b(cmd, dir.file("b.log"));
  ASSERT_EQ(b.wait(), 0) << b.log();
  EXPECT_TRUE(std::regex_search(b.log(), std::regex(std::string("took over ") + name + " from .* pid " +
                                                    std::to_string(pid) + " \\(no heartbeat for [0-9.]+ s\\)")))
      << b.log();
  EXPECT_NE(b.log().find("this process assembled"), std::string::npos) << b.log();
  EXPECT_GE(count_files(dir.file("s.shards"), std::regex("shard-[0-9]+\\.json")), 8u);
  // The killed claimer's status file and clock probe are gone (b's own went when it ended).
  EXPECT_EQ(count_files(dir.file("s.shards/claims"), std::regex("claimer-.*\\.json|probe-.*")), 0u);
  expect_same_bytes(dir.file("s_text_document"), single_process_reference(dir, input));
}

TEST(ClaimPrepCli, StoppedClaimerResumedPastItsLeaseDoesNotClobber) {
  TempDir dir;
  const std::string input = big_input(dir);
  const std::string cmd = claim_args(input, dir.file("s"), "1M");
  Child a(cmd, dir.file("a.log"));
  const auto [shard, pid] = first_claim(dir.file("s.shards/claims"));
  ASSERT_GE(shard, 0) << a.log();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06d", shard);
  const std::string manifest = dir.file("s.shards/") + name + ".json";
  ASSERT_FALSE(std::filesystem::exists(manifest)) << "stopped after finishing the shard";
  Child b(cmd, dir.file("b.log"));
  const int b_status = b.wait();
  struct stat before {};
  const bool committed = ::stat(manifest.c_str(), &before) == 0;
  const std::string bin = dir.file("s.shards/") + name + "_text_document.bin";
  const std::string bin_before = committed ? read_file(bin) : "";
  struct stat bin_stat_before {};
  ::stat(bin.c_str(), &bin_stat_before);
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  const int a_status = a.wait();
  ASSERT_EQ(b_status, 0) << b.log();
  ASSERT_TRUE(committed) << b.log();
  EXPECT_NE(b.log().find(std::string("took over ") + name), std::string::npos) << b.log();
  EXPECT_EQ(a_status, 0) << a.log();
  EXPECT_NE(a.log().find(std::string("lost ") + name), std::string::npos) << a.log();
  EXPECT_NE(a.log().find("nothing left to claim"), std::string::npos) << a.log();
  // The committed shard is the one B made: same manifest and dataset files (inode and mtime), same bytes.
  struct stat after {}, bin_stat_after {};
  ASSERT_EQ(::stat(manifest.c_str(), &after), 0);
  ASSERT_EQ(::stat(bin.c_str(), &bin_stat_after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(bin_stat_after.st_ino, bin_stat_before.st_ino);
  EXPECT_EQ(bin_stat_after.st_mtim.tv_nsec, bin_stat_before.st_mtim.tv_nsec);
  EXPECT_TRUE(read_file(bin) == bin_before);
  expect_same_bytes(dir.file("s_text_document"), single_process_reference(dir, input));
}

TEST(ClaimPrepCli, InspectShowsShardsClaimersHeartbeatsAndTheEnd) {
  TempDir dir;
  const std::string input = big_input(dir);
  const std::string cmd = claim_args(input, dir.file("s"), "1M");
  const std::string inspect = "timeout 60 " + std::string(LMFORGE_EXE) + " inspect " + dir.file("s.shards");
  Child a(cmd, dir.file("a.log"));
  const auto [shard, pid] = first_claim(dir.file("s.shards/claims"));
  ASSERT_GE(shard, 0) << a.log();
  char name[32];
  std::snprintf(name, sizeof name, "shard-%06d", shard);
  // The claim file comes first; the claimer's status names the shard at its heartbeat's next write (every quarter
  // lease, 0.5 s of wall time). Stopped at once, the status could lack the shard (a loaded machine); left running
  // until the status names it, the claimer could finish a 1 MB shard first. So it is stopped at once and let run
  // 5 ms at a time until its status names the shard: its heartbeat is due by the clock, its shard barely moves.
  const std::regex on_shard("pid " + std::to_string(pid) + " \\(token [0-9a-f]{16}\\): heartbeat [0-9.]+ s ago, on " +
                            name);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  lmforge::testing::CommandResult r;
  for (int slice = 0; slice < 1000; ++slice) {
    r = run_command(inspect);
    if (r.status == 0 && std::regex_search(r.output, on_shard)) break;
    ::kill(pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGSTOP);
  }
  r = run_command(inspect);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("12 shards, 11.8 MB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done 0 (0.0 MB), claimed 1, free 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("claimers:        1 live, 0 without"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, on_shard)) << r.output;
  EXPECT_NE(r.output.find("assembled:       no"), std::string::npos) << r.output;
  // Past the lease the stopped claimer and its claim are shown as expired.
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  r = run_command(inspect);
  EXPECT_NE(r.output.find("claimed 1 (1 with an expired lease: free to take over), free 11"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("0 live, 1 without"), std::string::npos) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("no heartbeat for [0-9.]+ s \\(lease 2 s\\)"))) << r.output;
  ::kill(pid, SIGKILL);
  ::kill(pid, SIGCONT);
  a.wait();
  // While B works, its throughput and an ETA appear; at the end everything is done and assembled.
  Child b(cmd, dir.file("b.log"));
  bool saw_eta = false;
  for (int i = 0; i < 400 && !saw_eta; ++i) {
    r = run_command(inspect);
    saw_eta = std::regex_search(r.output, std::regex("throughput: +[0-9.]+ MB/s \\(live claimers\\); ETA [0-9:]+ for"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(saw_eta) << r.output;
  ASSERT_EQ(b.wait(), 0) << b.log();
  r = run_command(inspect);
  EXPECT_NE(r.output.find("done 12 (11.8 MB), claimed 0, free 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing left"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("assembled:       yes"), std::string::npos) << r.output;
}

TEST(ClaimPrepCli, RacingPlanCreatorsMakeOnePlan) {
  for (int round = 0; round < 3; ++round) {
    TempDir dir;
    const std::string cmd = claim_args(shared_path("data/sample/sample.jsonl"), dir.file("s"), "128K");
    Child a(cmd, dir.file("a.log")), b(cmd, dir.file("b.log"));
    ASSERT_EQ(a.wait(), 0) << a.log();
    ASSERT_EQ(b.wait(), 0) << b.log();
    const std::string logs = a.log() + b.log();
    EXPECT_EQ(count_matches(logs, std::regex("wrote plan")), 1u) << logs;
    std::smatch m;
    const std::string a_log = a.log();
    ASSERT_TRUE(std::regex_search(a_log, m, std::regex("joins plan ([0-9a-f]{16}): 22 shards"))) << a.log();
    EXPECT_NE(b.log().find("joins plan " + m[1].str() + ": 22 shards"), std::string::npos) << b.log();
    EXPECT_EQ(count_files(dir.file("s.shards"), std::regex("plan\\.json.*")), 1u);
    expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
  }
}

TEST(ClaimPrepCli, OtherOutputDefiningFlagsAreRefused) {
  TempDir dir;
  const std::string cmd = claim_args(shared_path("data/sample/sample.jsonl"), dir.file("s"), "128K");
  auto r = run_command("timeout 60 " + cmd);
  ASSERT_EQ(r.status, 0) << r.output;
  // Without --append-eod: refused, naming what differs and what to do.
  std::string other = std::regex_replace(cmd, std::regex(" --append-eod"), "");
  r = run_command("timeout 60 " + other);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("holds shards of another plan"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("now: append-eod: no"), std::string::npos) << r.output;
  // A per-machine flag (--workers) may differ.
  r = run_command("timeout 60 " + std::regex_replace(cmd, std::regex("--workers 1"), "--workers 2"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing left to claim"), std::string::npos) << r.output;
  // Ranks make no sense with claims.
  r = run_command("timeout 60 " + cmd + " --rank 0 --world-size 2");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--claim takes no --rank/--world-size"), std::string::npos) << r.output;
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
}

// Two machines as network namespaces, each claimer in a PID namespace of its own (so each is pid 1) under the
// same host name: host/pid pairs collide as on cloned VMs, and only the claim tokens tell the claimers apart. A
// third claimer joins late from the first machine. None may take over another's live claim.
TEST(ClaimPrepCli, TwoMachinesWithCollidingHostAndPidShareOneCorpus) {
  TempDir dir;
  lmforge::testing::NetnsPair hosts(dir, 233);
  LMFORGE_REQUIRE_NETNS(hosts);
  const std::string cmd = claim_args(shared_path("data/sample/sample.jsonl"), dir.file("s"), "64K");
  std::vector<std::unique_ptr<Child>> children;
  children.push_back(std::make_unique<Child>(hosts.on_host(0, "node", cmd), dir.file("a.log")));
  children.push_back(std::make_unique<Child>(hosts.on_host(1, "node", cmd), dir.file("b.log")));
  for (int i = 0; i < 3000 && count_files(dir.file("s.shards"), std::regex("shard-[0-9]+\\.json")) < 10; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  children.push_back(std::make_unique<Child>(hosts.on_host(0, "node", cmd), dir.file("c.log")));
  std::string logs;
  for (auto& c : children) {
    EXPECT_EQ(c->wait(), 0) << c->log();
    logs += c->log();
  }
  expect_same_bytes(dir.file("s_text_document"), shared_path(kRef));
  EXPECT_EQ(count_matches(logs, std::regex("node pid 1 \\(token")), 3u) << "not pid 1 on host node:\n" << logs;
  EXPECT_EQ(count_matches(logs, std::regex("this process assembled")), 1u) << logs;
  EXPECT_EQ(logs.find("took over"), std::string::npos) << "a live claim was taken over:\n" << logs;
  EXPECT_EQ(logs.find("lost shard"), std::string::npos) << logs;
  size_t committed = 0;
  std::smatch m;
  for (auto it = logs.cbegin(); std::regex_search(it, logs.cend(), m, std::regex("committed ([0-9]+) shards"));
       it = m.suffix().first)
    committed += std::stoul(m[1]);
  EXPECT_EQ(committed, 42u) << logs;
}

}  // namespace
