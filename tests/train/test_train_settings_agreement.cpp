// Ranks of one `lmforge train gpt` job given different training flags end together at start-up, every rank with the
// first differing flag and both values, under mpirun (one command line per rank: MPMD) and over Gloo (tcp:// and
// torchrun's environment); a rank of another torchrun job at the same rendezvous is refused. Before the check, a
// different --seed or --lr trained two different replicas and exited 0, and a different --hidden-size,
// --num-layers or --train-iters crashed inside the transport (Open MPI: signal; Gloo: gloo::EnforceNotMet, 134).
// Ranks that agree still train: the parallel tests (test_train_parallel, test_train_gloo) run them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "train_run_util.h"

namespace {

using namespace train_runs;
using Clock = std::chrono::steady_clock;

using lmforge::testing::free_port;

// One rank as its own process (`env` before the command, output to `log`).
pid_t start_rank(const std::string& env, const std::string& command, const std::string& log) {
  const std::string cmd = "exec env OMP_NUM_THREADS=1 " + env + " " + command + " > " + log + " 2>&1";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Exit code (128 + the signal if a signal ended it), or -1 (and the process killed) if it has not ended within
// `seconds`.
int wait_for(pid_t pid, double seconds) {
  const auto start = Clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_since(start) > seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What each rank of a failed start said, and how it ended.
struct Ranks {
  std::vector<int> status;
  std::vector<std::string> logs;
  double seconds = 0.0;
};

// Two ranks over Gloo, each with the tiny run's flags plus its own; env(rank) before each command.
Ranks two_gloo_ranks(const TempDir& dir, const std::string& name, const std::function<std::string(int)>& env,
                     const std::function<Flags(int)>& flags) {
  Ranks out;
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  for (int r = 0; r < 2; r++) {
    Flags f = {{"--train-iters", "4"}, {"--eval-iters", "0"}};
    for (const auto& [k, v] : flags(r)) f[k] = v;
    pids.push_back(start_rank(env(r), train_args(dir, f), dir.file(name + "-rank" + std::to_string(r) + ".log")));
  }
  for (int r = 0; r < 2; r++) {
    out.status.push_back(wait_for(pids[(size_t)r], 60));
    out.logs.push_back(read_file(dir.file(name + "-rank" + std::to_string(r) + ".log")));
  }
  out.seconds = seconds_since(start);
  return out;
}

Ranks by_hand_tcp(const TempDir& dir, const std::string& name, const Flags& rank1) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  return two_gloo_ranks(
      dir, name, [](int) { return std::string(); },
      [&](int r) {
        Flags f = {{"--distributed-init-method", url},
                   {"--distributed-world-size", "2"},
                   {"--distributed-rank", std::to_string(r)}};
        if (r == 1)
          for (const auto& [k, v] : rank1) f[k] = v;
        return f;
      });
}

const char* kAdvice = "; every rank of a job must be given the same training flags";

// tcp:// ranks: a flag that changes numbers only (--seed, --lr) and flags that change the shapes of the collectives
// (--hidden-size, --num-layers: the gradient buckets; --train-iters: how many steps) end both ranks with exit 1.
TEST(TrainSettingsAgreement, TcpRanksGivenDifferentFlagsEndTogetherNamingTheFlagAndBothValues) {
  TempDir dir;
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"--seed", "1234", "5"}, {"--lr", "0.003", "0.01"}, {"--hidden-size", "32", "64"},
      {"--num-layers", "2", "3"}, {"--train-iters", "4", "6"}};
  for (const auto& [flag, mine, theirs] : cases) {
    const Ranks g = by_hand_tcp(dir, "tcp" + flag, {{flag, theirs}});
    const std::string want =
        "the ranks' settings differ: " + flag + " is " + mine + " on rank 0 but " + theirs + " on rank 1" + kAdvice;
    for (int r = 0; r < 2; r++) {
      EXPECT_EQ(g.status[(size_t)r], 1) << flag << ", rank " << r << ":\n" << g.logs[(size_t)r];
      EXPECT_NE(g.logs[(size_t)r].find("lmforge train: error: rank " + std::to_string(r) + " of 2 ("),
                std::string::npos)
          << g.logs[(size_t)r];
      EXPECT_NE(g.logs[(size_t)r].find(want), std::string::npos) << flag << ", rank " << r << ":\n"
                                                                  << g.logs[(size_t)r];
      EXPECT_EQ(g.logs[(size_t)r].find(" iteration "), std::string::npos) << "trained: " << g.logs[(size_t)r];
    }
    EXPECT_LT(g.seconds, 30) << flag;
  }
}

// torchrun's workers of one rendezvous share TORCHELASTIC_RUN_ID; a worker of another job that reaches the same
// MASTER_PORT (same flags otherwise) is refused, and so is the job it joined.
TEST(TrainSettingsAgreement, TorchrunWorkerOfAnotherJobAtTheSameRendezvousIsRefused) {
  TempDir dir;
  const int port = free_port();
  const Ranks g = two_gloo_ranks(
      dir, "torchrun",
      [&](int r) {
        return "RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
               " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
               " TORCHELASTIC_RUN_ID=" + (r == 0 ? "job-a" : "job-b");
      },
      [](int) { return Flags{}; });
  for (int r = 0; r < 2; r++) {
    EXPECT_EQ(g.status[(size_t)r], 1) << g.logs[(size_t)r];
    EXPECT_NE(g.logs[(size_t)r].find("the ranks' settings differ: torchrun's run id (TORCHELASTIC_RUN_ID) is job-a "
                                     "on rank 0 but job-b on rank 1; is rank 1 from another job at the same "
                                     "rendezvous?"),
              std::string::npos)
        << g.logs[(size_t)r];
  }
  EXPECT_LT(g.seconds, 30);
}

// mpirun with one command line per rank (MPMD: `mpirun -np 1 A : -np 1 B`).
TrainRun mpmd(const TempDir& dir, const Flags& rank1) {
  const Flags base = {{"--train-iters", "4"}, {"--eval-iters", "0"}};
  Flags other = base;
  for (const auto& [k, v] : rank1) other[k] = v;
  TrainRun run;
  auto r = run_command("timeout 60 env OMP_NUM_THREADS=1 " + mpirun_prefix(1) + train_args(dir, base) + " : -np 1 " +
                       train_args(dir, other));
  run.status = r.status;
  run.output = r.output;
  return run;
}

// MPI ranks: a different --seed trained two replicas and exited 0; a different --hidden-size crashed inside Open
// MPI. Now the job ends non-zero with the difference named (every rank finds it; MPI_Abort may end the others
// before they print).
TEST(TrainSettingsAgreement, MpiRanksGivenDifferentFlagsEndTheJobNamingTheFlagAndBothValues) {
  TempDir dir;
  for (const auto& [flag, mine, theirs] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--seed", "1234", "5"}, {"--hidden-size", "32", "64"}, {"--lr", "0.003", "0.01"}}) {
    const auto start = Clock::now();
    const TrainRun run = mpmd(dir, {{flag, theirs}});
    EXPECT_NE(run.status, 0) << flag << ":\n" << run.output;
    EXPECT_NE(run.status, 124) << flag << ": hung until the timeout:\n" << run.output;
    EXPECT_TRUE(std::regex_search(run.output, std::regex("lmforge train: error: rank [01] of 2 \\([^)]*\\): the ranks' "
                                                         "settings differ: " + flag + " is " + mine +
                                                         " on rank 0 but " + theirs + " on rank 1; every rank")))
        << flag << ":\n" << run.output;
    EXPECT_EQ(run.output.find(" iteration "), std::string::npos) << "trained: " << run.output;
    EXPECT_LT(seconds_since(start), 30) << flag;
  }
}

}  // namespace
