// `lmforge train gpt` started without mpirun: ranks started by hand with --distributed-init-method tcp:// and ranks
// started with torchrun's environment meet at rank 0's TCP store and run their collectives over Gloo. They
// reproduce the single process (and the MPI run bit for bit) with one process logging, under the distributed
// optimizer and tensor parallelism too; a killed peer ends the other at once, a stopped one within the timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <functional>

#include "train_run_util.h"

namespace {

using namespace train_runs;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using lmforge::testing::free_port;

// One rank as its own process (`env` before the command, output to `log`); its pid is the lmforge process's, or the
// wrapper's when `wrap` puts the command into another namespace.
pid_t start_rank(const std::string& env, const std::string& command, const std::string& log,
                 const std::function<std::string(const std::string&)>& wrap = nullptr) {
  const std::string inner = "env OMP_NUM_THREADS=1 " + env + " " + command;
  const std::string cmd = "exec " + (wrap ? wrap(inner) : inner) + " > " + log + " 2>&1";
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
    if (since(start) > seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Megatron's training log lines ("iteration        7/      20 | ...") in a rank's output.
size_t iteration_lines(const std::string& text) {
  static const std::regex line(" iteration +[0-9]+/ +[0-9]+ \\|");
  return (size_t)std::distance(std::sregex_iterator(text.begin(), text.end(), line), std::sregex_iterator());
}

struct GlooRun {
  TrainRun run;              // rank 0's TensorBoard scalars; status 0 when every rank exited 0
  std::vector<std::string> logs;  // per rank
};

// `np` ranks of one job, each a process of its own; env(rank) gives its launcher environment, extra(rank) its
// flags.
GlooRun train_by_hand(const TempDir& dir, const std::string& name, int np, const Flags& overrides,
                      const std::function<std::string(int)>& env, const std::function<Flags(int)>& extra,
                      const std::function<std::string(int, const std::string&)>& wrap = nullptr) {
  const std::string tb = dir.file("tb-" + name);
  fs::remove_all(tb);
  std::vector<pid_t> pids;
  GlooRun out;
  for (int r = 0; r < np; r++) {
    Flags flags = overrides;
    for (const auto& [k, v] : extra(r)) flags[k] = v;
    flags["--tensorboard-dir"] = tb;
    std::function<std::string(const std::string&)> wrap_rank;
    if (wrap) wrap_rank = [&wrap, r](const std::string& command) { return wrap(r, command); };
    pids.push_back(
        start_rank(env(r), train_args(dir, flags), dir.file(name + "-rank" + std::to_string(r) + ".log"), wrap_rank));
  }
  out.run.status = 0;
  for (int r = 0; r < np; r++) {
    const int status = wait_for(pids[(size_t)r], 120);
    out.logs.push_back(read_file(dir.file(name + "-rank" + std::to_string(r) + ".log")));
    out.run.output += "---- rank " + std::to_string(r) + " (exit " + std::to_string(status) + ")\n" + out.logs.back();
    if (status != 0) out.run.status = status;
  }
  if (out.run.status != 0 || !fs::exists(tb)) return out;
  const auto scalars = read_scalars(tb);
  auto get = [&](const char* tag) { return scalars.count(tag) ? scalars.at(tag) : std::vector<float>{}; };
  out.run.loss = get("lm loss");
  out.run.grad_norm = get("grad-norm");
  out.run.valid = get("lm loss validation");
  const auto test = get("lm loss test");
  out.run.valid.insert(out.run.valid.end(), test.begin(), test.end());
  return out;
}

// Rank 0 logs the 10 iterations; no other rank logs any.
void expect_one_logger(const GlooRun& g) {
  ASSERT_FALSE(g.logs.empty());
  EXPECT_EQ(iteration_lines(g.logs[0]), 10u) << g.logs[0];
  for (size_t r = 1; r < g.logs.size(); r++) EXPECT_EQ(iteration_lines(g.logs[r]), 0u) << g.logs[r];
}

GlooRun by_hand_tcp(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {}) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  return train_by_hand(
      dir, name, np, overrides, [](int) { return std::string(); },
      [&](int r) {
        return Flags{{"--distributed-init-method", url},
                     {"--distributed-world-size", std::to_string(np)},
                     {"--distributed-rank", std::to_string(r)}};
      });
}

std::string torchrun_env(int rank, int np, int port) {
  return "RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) + " WORLD_SIZE=" +
         std::to_string(np) + " LOCAL_WORLD_SIZE=" + std::to_string(np) + " MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
         std::to_string(port);
}

TEST_F(TrainParallel, TwoRanksByHandOverTcpReproduceOneProcess) {
  // --distributed-gpus 1: each command is one rank (fairseq's G > 1 starts G ranks: test_torch_launchers.cpp).
  const GlooRun g = by_hand_tcp(*dir_, "tcp", 2, {{"--distributed-gpus", "1"}, {"--device-id", "0"}});
  expect_parity(g.run, *single_, 1e-6, "2 ranks started by hand, tcp://");
  expect_one_logger(g);
  EXPECT_NE(g.logs[1].find("lmforge train: note: rank 1 of 2 trains on the CPU; --device-id ignored"),
            std::string::npos)
      << g.logs[1];
}

TEST_F(TrainParallel, TwoRanksWithTorchrunsEnvironmentReproduceOneProcess) {
  const int port = free_port();
  const GlooRun g = train_by_hand(
      *dir_, "torchrun", 2, {}, [&](int r) { return torchrun_env(r, 2, port); }, [](int) { return Flags{}; });
  expect_parity(g.run, *single_, 1e-6, "2 ranks with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT");
  expect_one_logger(g);
}

// The same sums in the same order as under MPI: every loss and gradient norm equal, bit for bit. Four ranks, so a
// different order of summation would show (with two, a + b == b + a).
TEST_F(TrainParallel, DistributedOptimizerAndTensorParallelOverGlooEqualMpiBitForBit) {
  const std::vector<std::pair<std::string, Flags>> layouts = {
      {"DP=4 ZeRO", {{"--use-distributed-optimizer", ""}}},
      {"TP=2 x DP=2 ZeRO", {{"--use-distributed-optimizer", ""}, {"--tensor-model-parallel-size", "2"}}}};
  for (const auto& [what, layout] : layouts) {
    const std::string tag = layout.size() == 1 ? "dp4" : "tp2dp2";
    const GlooRun g = by_hand_tcp(*dir_, "gloo-" + tag, 4, layout);
    const TrainRun m = train(*dir_, "mpi-" + tag, 4, layout);
    expect_parity(g.run, *single_, 1e-5, what + " over Gloo");
    ASSERT_EQ(m.status, 0) << m.output;
    EXPECT_EQ(g.run.loss, m.loss) << what << ": Gloo and MPI losses differ";
    EXPECT_EQ(g.run.grad_norm, m.grad_norm) << what;
    EXPECT_EQ(g.run.valid, m.valid) << what;
    expect_one_logger(g);
  }
}

// Pipeline stages over Gloo: activations and their gradients go by Gloo's asynchronous sends; the last rank logs.
TEST_F(TrainParallel, PipelineOverGlooEqualsMpiBitForBit) {
  const Flags layout = {{"--pipeline-model-parallel-size", "2"}};
  const GlooRun g = by_hand_tcp(*dir_, "gloo-pp2", 2, layout);
  const TrainRun m = train(*dir_, "mpi-pp2", 2, layout);
  expect_parity(g.run, *single_, 1e-5, "P=2 over Gloo");
  ASSERT_EQ(m.status, 0) << m.output;
  EXPECT_EQ(g.run.loss, m.loss) << "P=2: Gloo and MPI losses differ";
  EXPECT_EQ(g.run.grad_norm, m.grad_norm);
  EXPECT_EQ(g.run.valid, m.valid);
  ASSERT_EQ(g.logs.size(), 2u);
  EXPECT_EQ(iteration_lines(g.logs[0]), 0u) << g.logs[0];
  EXPECT_EQ(iteration_lines(g.logs[1]), 10u) << g.logs[1];
}

// Two "hosts" (network namespaces joined by a veth pair, each rank also with its own hostname and PID space) with
// two ranks each, started by hand: rank 0 listens on the first host's address, every rank's Gloo pairs run on the
// interface that reaches it (127.0.0.1 would not reach across hosts).
TEST_F(TrainParallel, TwoHostsAsNetworkNamespacesOverTcpInitReproduceOneProcess) {
  NetnsPair hosts(*dir_, 233);
  LMFORGE_REQUIRE_NETNS(hosts);
  const std::string url = "tcp://" + hosts.host_a() + ":29500";
  const GlooRun g = train_by_hand(
      *dir_, "netns-tcp", 4, {{"--use-distributed-optimizer", ""}}, [](int) { return std::string(); },
      [&](int r) {
        return Flags{{"--distributed-init-method", url},
                     {"--distributed-world-size", "4"},
                     {"--distributed-rank", std::to_string(r)}};
      },
      [&](int r, const std::string& command) {
        return hosts.on_host(r / 2, "lmf-host-" + std::to_string(r / 2) + "-rank" + std::to_string(r), command);
      });
  expect_parity(g.run, *single_, 1e-6, "2 hosts x 2 ranks, tcp:// init, Gloo, distributed optimizer");
  expect_one_logger(g);
}

// Two ranks training for long; waits until rank 0 has logged iteration 3 and returns both pids.
std::vector<pid_t> start_long_job(const TempDir& dir, const Flags& extra) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; r++) {
    Flags flags = {{"--train-iters", "100000"}, {"--eval-iters", "0"}, {"--distributed-init-method", url},
                   {"--distributed-world-size", "2"}, {"--distributed-rank", std::to_string(r)}};
    for (const auto& [k, v] : extra) flags[k] = v;
    pids.push_back(start_rank("", train_args(dir, flags), dir.file("rank" + std::to_string(r) + ".log")));
  }
  const auto start = Clock::now();
  while (since(start) < 60 && read_file(dir.file("rank0.log")).find(" iteration        3/") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return pids;
}

TEST(TrainGlooFaults, KilledPeerEndsTheOtherWithin30Seconds) {
  TempDir dir;
  lmforge::testing::write_file(dir.file("rank0.log"), "");
  const std::vector<pid_t> pids = start_long_job(dir, {});
  ASSERT_EQ(::waitpid(pids[0], nullptr, WNOHANG), 0) << read_file(dir.file("rank0.log"));
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  ::waitpid(pids[1], nullptr, 0);
  const auto killed = Clock::now();
  const int status = wait_for(pids[0], 30);
  const double seconds = since(killed);
  std::printf("[ fault ] rank 0 ended %.2f s after rank 1 was SIGKILLed\n", seconds);
  const std::string log = read_file(dir.file("rank0.log"));
  EXPECT_NE(status, -1) << "rank 0 still running 30 s after its peer died: " << log;
  EXPECT_EQ(status, 1) << "rank 0 did not end through its own error (a signal?): " << log;
  EXPECT_LT(seconds, 30);
  EXPECT_TRUE(std::regex_search(log, std::regex("lmforge train: error: rank 0 of 2 \\([^)]*\\): [a-z-]+: lost the "
                                                "connection to rank 1 \\(its process ended\\?\\)")))
      << log;
}

TEST(TrainGlooFaults, StoppedPeerEndsTheOtherWithinTheTimeout) {
  TempDir dir;
  lmforge::testing::write_file(dir.file("rank0.log"), "");
  // 0.1 min: 6 s.
  const std::vector<pid_t> pids = start_long_job(dir, {{"--distributed-timeout-minutes", "0.1"}});
  ASSERT_EQ(::waitpid(pids[0], nullptr, WNOHANG), 0) << read_file(dir.file("rank0.log"));
  ASSERT_EQ(::kill(pids[1], SIGSTOP), 0);
  const auto stopped = Clock::now();
  const int status = wait_for(pids[0], 30);
  const double seconds = since(stopped);
  ::kill(pids[1], SIGKILL);
  ::waitpid(pids[1], nullptr, 0);
  std::printf("[ fault ] rank 0 ended %.2f s after rank 1 was stopped (timeout 6 s)\n", seconds);
  const std::string log = read_file(dir.file("rank0.log"));
  EXPECT_NE(status, -1) << "rank 0 still running 30 s after its peer stopped: " << log;
  EXPECT_EQ(status, 1) << log;
  EXPECT_GE(seconds, 5.0) << "ended before the timeout: " << log;
  EXPECT_LT(seconds, 15.0);
  EXPECT_TRUE(std::regex_search(log, std::regex("lmforge train: error: rank 0 of 2 \\([^)]*\\): [a-z-]+: nothing from "
                                                "rank 1 within 0.1 min \\(6 s\\) \\(--distributed-timeout-minutes\\)")))
      << log;
}

TEST(TrainGlooRendezvous, MismatchedWorldSizesFailBothRanksAtOnceNamingTheReason) {
  TempDir dir;
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; r++)
    pids.push_back(start_rank("",
                              train_args(dir, {{"--distributed-init-method", url},
                                               {"--distributed-world-size", r == 0 ? "2" : "3"},
                                               {"--distributed-rank", std::to_string(r)}}),
                              dir.file("rank" + std::to_string(r) + ".log")));
  const auto start = Clock::now();
  for (pid_t p : pids) EXPECT_EQ(wait_for(p, 30), 1);
  EXPECT_LT(since(start), 20);
  for (int r = 0; r < 2; r++) {
    const std::string log = read_file(dir.file("rank" + std::to_string(r) + ".log"));
    EXPECT_NE(log.find("lmforge train: error: rank " + std::to_string(r) + " of " + (r == 0 ? "2" : "3")),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("world size mismatch: rank 1 (127.0.0.1:"), std::string::npos) << log;
  }
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "training started before the ranks had met";
}

}  // namespace
