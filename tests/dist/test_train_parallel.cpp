// `lmforge train gpt` across processes as users launch it (mpirun, as root, more ranks than cores): data parallel
// with 2 and 4 ranks and the distributed optimizer reproduce the single-process losses of the same global batch
// (every iteration's loss read at full float precision from the TensorBoard file, relative difference < 1e-6
// over 20 steps); a checkpoint written by one layout resumes under another and continues the uninterrupted run;
// layouts that do not fit the batch fail at once; a rank that errors or is SIGKILLed ends the job non-zero within
// seconds; and a run across two network namespaces over TCP matches one process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>
#include <vector>

#include "mpi_test_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using lmforge::testing::mpirun_prefix;
using lmforge::testing::NetnsPair;
using lmforge::testing::read_file;
using lmforge::testing::run_command;
using lmforge::testing::shared_path;
using lmforge::testing::TempDir;

// ---- TensorBoard event file → scalars (independent of the writer: TFRecord framing and protobuf wire format) ----

uint64_t varint(const std::string& s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; pos < s.size(); shift += 7) {
    const uint8_t b = (uint8_t)s[pos++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

// Calls f(field, wire_type, payload / varint) for each field of a protobuf message.
template <class F>
void fields(const std::string& msg, F f) {
  size_t pos = 0;
  while (pos < msg.size()) {
    const uint64_t key = varint(msg, pos);
    const int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 0) {
      f(field, wire, std::string(), varint(msg, pos));
    } else if (wire == 1) {
      f(field, wire, msg.substr(pos, 8), 0);
      pos += 8;
    } else if (wire == 2) {
      const uint64_t len = varint(msg, pos);
      f(field, wire, msg.substr(pos, len), 0);
      pos += len;
    } else if (wire == 5) {
      f(field, wire, msg.substr(pos, 4), 0);
      pos += 4;
    } else {
      throw std::runtime_error("unexpected protobuf wire type");
    }
  }
}

// tag → values in file order, from every events.out.tfevents.* file in dir.
std::map<std::string, std::vector<float>> read_scalars(const std::string& dir) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    const std::string raw = read_file(entry.path().string());
    for (size_t pos = 0; pos + 12 <= raw.size();) {
      uint64_t length;
      std::memcpy(&length, raw.data() + pos, 8);
      const std::string event = raw.substr(pos + 12, length);
      pos += 12 + length + 4;
      int64_t step = 0;
      std::vector<std::pair<std::string, float>> values;
      fields(event, [&](int field, int, const std::string& payload, uint64_t v) {
        if (field == 2) step = (int64_t)v;
        if (field != 5) return;
        fields(payload, [&](int f2, int, const std::string& value, uint64_t) {
          if (f2 != 1) return;
          std::string tag;
          float x = NAN;
          fields(value, [&](int f3, int wire, const std::string& p, uint64_t) {
            if (f3 == 1) tag = p;
            if (f3 == 2 && wire == 5) std::memcpy(&x, p.data(), 4);
          });
          values.emplace_back(tag, x);
        });
      });
      for (const auto& [tag, x] : values) out[tag].push_back(x);
      (void)step;
    }
  }
  return out;
}

// ---- runs ---------------------------------------------------------------------------------------------------------

using Flags = std::map<std::string, std::string>;

// A tiny GPT on Megatron's sample dataset; 20 iterations of a global batch of 4 one-sample micro-batches.
Flags tiny_flags(const TempDir& dir) {
  return {{"--num-layers", "2"}, {"--hidden-size", "32"}, {"--num-attention-heads", "2"}, {"--seq-length", "32"},
          {"--max-position-embeddings", "32"}, {"--micro-batch-size", "1"}, {"--global-batch-size", "4"},
          {"--lr", "0.003"}, {"--min-lr", "0.0003"}, {"--lr-decay-style", "cosine"}, {"--lr-warmup-iters", "2"},
          {"--weight-decay", "0.1"}, {"--clip-grad", "1.0"},
          {"--split", "949,50,1"}, {"--log-interval", "1"}, {"--eval-interval", "10"}, {"--eval-iters", "2"},
          {"--data-cache-path", dir.file("cache")}, {"--train-iters", "20"}, {"--threads", "1"},
          {"--vocab-file", shared_path("data/vocab/gpt2-vocab.json")},
          {"--merge-file", shared_path("data/vocab/gpt2-merges.txt")},
          {"--data-path", shared_path("data/sample/sample_gpt2_text_document")}};
}

std::string train_args(const TempDir& dir, const Flags& overrides) {
  Flags flags = tiny_flags(dir);
  for (const auto& [k, v] : overrides) flags[k] = v;
  std::string cmd = std::string(LMFORGE_EXE) + " train gpt";
  for (const auto& [k, v] : flags)
    if (v != "-") cmd += " " + k + (v.empty() ? "" : " '" + v + "'");
  return cmd;
}

struct TrainRun {
  int status = -1;
  std::string output;
  std::vector<float> loss;       // "lm loss" per iteration (log interval 1)
  std::vector<float> grad_norm;  // per iteration
  std::vector<float> valid;      // "lm loss validation" per evaluation, then "lm loss test"
};

// Runs with np ranks (0: a plain single process, no mpirun) and collects the TensorBoard scalars.
TrainRun train(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {},
          const std::string& launcher = "") {
  Flags flags = overrides;
  const std::string tb = dir.file("tb-" + name);
  fs::remove_all(tb);
  flags["--tensorboard-dir"] = tb;
  const std::string prefix = !launcher.empty() ? launcher : np > 0 ? mpirun_prefix(np) : "";
  TrainRun run;
  auto r = run_command("timeout 120 env OMP_NUM_THREADS=1 " + prefix + train_args(dir, flags));
  run.status = r.status;
  run.output = r.output;
  if (r.status != 0 || !fs::exists(tb)) return run;
  const auto scalars = read_scalars(tb);
  for (const char* tag : {"lm loss", "grad-norm", "lm loss validation", "lm loss test"}) {
    auto it = scalars.find(tag);
    if (it == scalars.end()) continue;
    std::vector<float>& into = std::string(tag) == "lm loss" ? run.loss
                               : std::string(tag) == "grad-norm" ? run.grad_norm : run.valid;
    into.insert(into.end(), it->second.begin(), it->second.end());
  }
  return run;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); i++)
    worst = std::max(worst, std::fabs((double)a[i] - (double)b[i]) / std::fabs((double)b[i]));
  return worst;
}

// Same number of iterations, every loss within 1e-6 relative, and the validation losses too.
void expect_parity(const TrainRun& got, const TrainRun& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.status, 0) << what << ":\n" << got.output;
  ASSERT_EQ(want.status, 0) << want.output;
  ASSERT_EQ(got.loss.size(), want.loss.size()) << what << ":\n" << got.output;
  ASSERT_GE(want.loss.size(), 10u);
  const double d = max_relative_difference(got.loss, want.loss);
  std::printf("[ parity ] %s: max relative loss difference over %zu steps %.3g\n", what.c_str(), got.loss.size(), d);
  EXPECT_LT(d, tolerance) << what;
  EXPECT_LT(max_relative_difference(got.grad_norm, want.grad_norm), 1e-5) << what;
  ASSERT_EQ(got.valid.size(), want.valid.size()) << what;
  EXPECT_LT(max_relative_difference(got.valid, want.valid), tolerance) << what;
  // Training did something: the loss fell.
  EXPECT_LT(want.loss.back(), want.loss.front() - 0.1f);
}

// The single-process reference runs are shared by the tests of one executable.
class TrainParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    single_ = new TrainRun(train(*dir_, "single", 0));
  }
  static void TearDownTestSuite() {
    delete single_;
    delete dir_;
  }
  static TempDir* dir_;
  static TrainRun* single_;
};
TempDir* TrainParallel::dir_ = nullptr;
TrainRun* TrainParallel::single_ = nullptr;

TEST_F(TrainParallel, TwoAndFourDataParallelRanksReproduceOneProcess) {
  const TrainRun dp2 = train(*dir_, "dp2", 2);
  expect_parity(dp2, *single_, 1e-6, "DP=2");
  EXPECT_NE(dp2.output.find("data parallel: 2 ranks (mpi)"), std::string::npos) << dp2.output;
  const TrainRun dp4 = train(*dir_, "dp4", 4);
  expect_parity(dp4, *single_, 1e-6, "DP=4");
  // Gradient accumulation inside each rank as well: 8 samples, 2 micro-batches per rank.
  const TrainRun single8 = train(*dir_, "single8", 0, {{"--global-batch-size", "8"}});
  const TrainRun dp4x2 = train(*dir_, "dp4x2", 4, {{"--global-batch-size", "8"}});
  expect_parity(dp4x2, single8, 1e-6, "DP=4, 2 micro-batches per rank");
}

// "optimizer state: X MB on this rank" from rank 0's log.
double optimizer_megabytes(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("optimizer: state ([0-9.]+) MB on this rank"))) return -1;
  return std::stod(m[1]);
}

TEST_F(TrainParallel, DistributedOptimizerEqualsDataParallelWithAQuarterOfTheState) {
  const TrainRun plain = train(*dir_, "plain4", 4);
  const TrainRun zero = train(*dir_, "zero4", 4, {{"--use-distributed-optimizer", ""}});
  expect_parity(zero, *single_, 1e-6, "DP=4 distributed optimizer");
  // Same reduction, same norm, same per-element update: bitwise the losses of replicated AdamW.
  EXPECT_EQ(zero.loss, plain.loss);
  EXPECT_EQ(zero.grad_norm, plain.grad_norm);
  const double full = optimizer_megabytes(plain.output), shard = optimizer_megabytes(zero.output);
  ASSERT_GT(full, 0) << plain.output;
  EXPECT_NEAR(shard / full, 0.25, 0.001) << plain.output << zero.output;
  // One process with the flag: the whole state, same losses.
  const TrainRun zero1 = train(*dir_, "zero1", 0, {{"--use-distributed-optimizer", ""}});
  expect_parity(zero1, *single_, 1e-6, "1 rank distributed optimizer");
}

TEST_F(TrainParallel, TensorParallelTwoAndTwoByTwoReproduceOneProcess) {
  const TrainRun tp2 = train(*dir_, "tp2", 2, {{"--tensor-model-parallel-size", "2"}});
  expect_parity(tp2, *single_, 1e-5, "TP=2");
  EXPECT_NE(tp2.output.find("tensor parallel: 2 ranks per group (818848 of 1636224 parameters on each)"),
            std::string::npos)
      << tp2.output;
  const TrainRun tp2dp2 = train(*dir_, "tp2dp2", 4, {{"--tensor-model-parallel-size", "2"}});
  expect_parity(tp2dp2, *single_, 1e-5, "TP=2 x DP=2");
  const TrainRun tp2dp2z = train(*dir_, "tp2dp2z", 4,
                                 {{"--tensor-model-parallel-size", "2"}, {"--use-distributed-optimizer", ""}});
  expect_parity(tp2dp2z, *single_, 1e-5, "TP=2 x DP=2, distributed optimizer");
}

TEST(TrainParallelLayout, TensorParallelSizeThatDoesNotFitFailsAtOnce) {
  TempDir dir;
  auto r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {{"--tensor-model-parallel-size", "2"}}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the world size 3 is not divisible by --tensor-model-parallel-size 2"), std::string::npos)
      << r.output;
  r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {{"--tensor-model-parallel-size", "3"}}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--tensor-model-parallel-size 3 does not divide --num-attention-heads 2"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "work started before the layout was checked";
}

TEST_F(TrainParallel, CheckpointFromOneLayoutResumesUnderAnother) {
  const std::string ckpt = dir_->file("ckpt");
  // TP = 2 × DP = 2 with a sharded optimizer stops at iteration 10; 2 replicated data-parallel ranks (TP = 1)
  // resume to 15; then TP = 2 alone resumes to 20. Losses continue the uninterrupted single-process run.
  const TrainRun first = train(*dir_, "first", 4,
                          {{"--use-distributed-optimizer", ""}, {"--tensor-model-parallel-size", "2"},
                           {"--save", ckpt}, {"--exit-interval", "10"}});
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_EQ(first.loss.size(), 10u) << first.output;
  const TrainRun second = train(*dir_, "second", 2, {{"--save", ckpt}, {"--load", ckpt}, {"--exit-interval", "15"}});
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("loaded checkpoint"), std::string::npos) << second.output;
  const TrainRun third = train(*dir_, "third", 2, {{"--save", ckpt}, {"--load", ckpt}, {"--tensor-model-parallel-size", "2"}});
  ASSERT_EQ(third.status, 0) << third.output;
  TrainRun resumed = first;
  resumed.loss.insert(resumed.loss.end(), second.loss.begin(), second.loss.end());
  resumed.loss.insert(resumed.loss.end(), third.loss.begin(), third.loss.end());
  resumed.grad_norm.insert(resumed.grad_norm.end(), second.grad_norm.begin(), second.grad_norm.end());
  resumed.grad_norm.insert(resumed.grad_norm.end(), third.grad_norm.begin(), third.grad_norm.end());
  resumed.valid.insert(resumed.valid.end(), second.valid.begin(), second.valid.end());
  resumed.valid.insert(resumed.valid.end(), third.valid.begin(), third.valid.end());
  expect_parity(resumed, *single_, 1e-5, "TP=2 x DP=2 ZeRO -> DP=2 -> TP=2, resumed");
  // Every saved model is one whole Hugging Face model, whatever the layout that wrote it.
  for (const char* iter : {"iter_0000010", "iter_0000015", "iter_0000020"}) {
    const std::string model = read_file(ckpt + "/" + iter + "/model.safetensors");
    EXPECT_NE(model.find("\"transformer.wte.weight\":{\"dtype\":\"F32\",\"shape\":[50304,32]"), std::string::npos)
        << iter << ": " << model.substr(0, 300);
    EXPECT_NE(model.find("\"transformer.h.1.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[32,96]"),
              std::string::npos)
        << iter;
  }
}

TEST(TrainParallelLayout, WorldSizeThatDoesNotFitTheBatchFailsAtOnce) {
  TempDir dir;
  auto r = run_command("timeout 60 " + mpirun_prefix(3) + train_args(dir, {}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--global-batch-size 4 is not divisible by --micro-batch-size 1 × data-parallel size 3 "
                          "(world size 3)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("cache"))) << "work started before the layout was checked";
}

TEST(TrainParallelFaults, ErrorOnOneRankEndsTheJobWithItsReason) {
  TempDir dir;
  // Only rank 0 writes checkpoints; --save names a regular file, so rank 0 fails at iteration 2 while the others
  // wait for it in a collective.
  lmforge::testing::write_file(dir.file("not-a-dir"), "x");
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command("timeout 60 " + mpirun_prefix(2) +
                       train_args(dir, {{"--save", dir.file("not-a-dir")}, {"--save-interval", "2"}}));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.status, 124) << "the job hung until the timeout: " << r.output;
  EXPECT_LT(seconds, 30);
  EXPECT_TRUE(std::regex_search(r.output, std::regex("lmforge train: error: rank 0 of 2 \\([^)]*\\): .*not-a-dir")))
      << r.output;
}

// Pids of the processes whose parent is `parent` and whose name is `name`.
std::vector<pid_t> children(pid_t parent, const std::string& name) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const size_t close = s.rfind(')');
    if (close == std::string::npos || s.find("(" + name + ")") == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));
    char state;
    long ppid;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back((pid_t)std::stol(pid));
  }
  return out;
}

TEST(TrainParallelFaults, SigkilledRankEndsTheJobNonZeroWithin30Seconds) {
  TempDir dir;
  const std::string log = dir.file("run.log");
  const std::string cmd = "exec env OMP_NUM_THREADS=1 " + mpirun_prefix(3) +
                          train_args(dir, {{"--global-batch-size", "3"}, {"--train-iters", "100000"}}) + " > " + log +
                          " 2>&1";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  const auto start = std::chrono::steady_clock::now();
  // Wait until training runs (a few iterations logged), then SIGKILL one rank.
  while (since(start) < 60) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.find(" iteration        3/") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<pid_t> ranks = children(pid, "lmforge");
  int status = 0;
  if (ranks.size() != 3 || ::waitpid(pid, &status, WNOHANG) != 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "expected 3 running ranks, found " << ranks.size() << ": " << read_file(log);
  }
  ASSERT_EQ(::kill(ranks.back(), SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && since(killed) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double seconds = since(killed);
  if (done == 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "mpirun did not end within 30 s of a rank being killed: " << read_file(log);
  }
  std::printf("[ fault ] job ended %.2f s after a rank was SIGKILLed\n", seconds);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << read_file(log);
  EXPECT_LT(seconds, 30);
  // No rank outlives the job (a zombie awaiting its reaper counts as gone).
  auto alive = [](pid_t p) {
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const size_t close = s.rfind(')');
    return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z' && s[close + 2] != 'X';
  };
  for (pid_t p : ranks) {
    const auto t = std::chrono::steady_clock::now();
    while (alive(p) && since(t) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(alive(p)) << "rank " << p << " still running 5 s after mpirun ended";
  }
}

TEST_F(TrainParallel, TwoHostsAsNetworkNamespacesOverTcpReproduceOneProcess) {
  NetnsPair hosts(*dir_, 232);
  ASSERT_EQ(hosts.error(), "") << "cannot create network namespaces (this test needs root and `ip netns`; run it "
                                  "as root or in a container with CAP_NET_ADMIN)";
  const TrainRun run = train(*dir_, "netns", 4, {{"--use-distributed-optimizer", ""}}, hosts.mpirun(2));
  expect_parity(run, *single_, 1e-6, "2 hosts x 2 ranks over TCP, distributed optimizer");
}

}  // namespace
