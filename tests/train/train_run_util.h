// defines: helpers for tests that run `lmforge train gpt` under mpirun: TensorBoard scalars read back at float
//          precision (TFRecord framing and protobuf wire format, independent of the writer), a tiny GPT's flags on
//          Megatron's sample dataset with 1,001 ids (train/tiny_vocab_data.h), train() runs and expect_parity(),
//          run_and_read() and reference_run() (a one-process reference run made once for all the test processes of
//          a build), a fixture holding the one-process run, and kill_rank_mid_run() (an mpirun job whose rank is
//          SIGKILLed while it trains)
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "dist/mpi_test_util.h"
#include "test_util.h"
#include "train/tiny_vocab_data.h"
#include "util/strings.h"

// One executable includes this once: plain (non-inline) definitions are fine.
namespace train_runs {

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

// A tiny GPT on the GPT-2 sample with 1,001 ids (NullTokenizer, train/tiny_vocab_data.h); 10 iterations of a global
// batch of 4 one-sample micro-batches (evaluated at 5 and 10), with Megatron's dropout (0.1, said explicitly): every
// layout and resume must draw the single process's masks.
// ~60 tests make several runs each; each layout's claim (every iteration's loss, gradient norm and validation loss
// equal to one process's) holds at 10 iterations as at 20.
Flags tiny_flags(const TempDir& dir) {
  return {{"--hidden-dropout", "0.1"}, {"--attention-dropout", "0.1"},{"--num-layers", "2"}, {"--hidden-size", "32"}, {"--num-attention-heads", "2"}, {"--seq-length", "32"},
          {"--max-position-embeddings", "32"}, {"--micro-batch-size", "1"}, {"--global-batch-size", "4"},
          {"--lr", "0.003"}, {"--min-lr", "0.0003"}, {"--lr-decay-style", "cosine"}, {"--lr-warmup-iters", "2"},
          {"--weight-decay", "0.1"}, {"--clip-grad", "1.0"},
          {"--split", "949,50,1"}, {"--log-interval", "1"}, {"--eval-interval", "5"}, {"--eval-iters", "2"},
          {"--data-cache-path", dir.file("cache")}, {"--train-iters", "10"}, {"--threads", "1"},
          {"--tokenizer-type", "NullTokenizer"}, {"--vocab-size", "1000"},
          {"--data-path", lmforge::testing::tiny_vocab_data()}};
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

// A run's exit status, output and TensorBoard scalars (tag → values in file order).
struct ScalarRun {
  int status = -1;
  std::string output;
  std::map<std::string, std::vector<float>> scalars;
};

// Runs `cmd`, which writes its TensorBoard events into `tb` (emptied first), and reads the scalars back.
ScalarRun run_and_read(const std::string& cmd, const std::string& tb) {
  fs::remove_all(tb);
  ScalarRun run;
  const auto r = run_command(cmd);
  run.status = r.status;
  run.output = r.output;
  if (r.status == 0 && fs::exists(tb)) run.scalars = read_scalars(tb);
  return run;
}

// ---- one-process reference runs, made once per build ---------------------------------------------------------------
//
// ctest runs every test in a process of its own, so a fixture's SetUpTestSuite made its one-process reference run
// again for each test (14 tests in 6 executables compare with the same tiny GPT run). reference_run() keeps a
// successful run's status, output and scalars in the build tree, keyed by its whole command line, with the test's
// temporary directory and the TensorBoard directory written as placeholders (where the data cache and the events go
// does not change what is computed), and by the identity of the lmforge executable (size, modification time,
// inode): another flag, another model or a rebuilt executable runs afresh. The runs are deterministic (the layout
// tests compare their bits), so a kept run is the run the test would have made. Written to a temporary name and
// renamed, so tests running side by side read either nothing or a whole file.

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; !from.empty() && (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
  return s;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string executable_identity() {
  struct stat st {};
  if (::stat(LMFORGE_EXE, &st) != 0) return "missing";
  return std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
}

// The kept run of `key`, if a whole one is there.
bool read_reference(const std::string& path, const std::string& key, ScalarRun& run) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line != "lmforge test reference run 1") return false;
  if (!std::getline(in, line) || line != key) return false;  // a hash collision, or a half-written file
  size_t bytes = 0, tags = 0;
  if (!(in >> run.status >> bytes)) return false;
  in.get();
  run.output.resize(bytes);
  if (!in.read(run.output.data(), (std::streamsize)bytes) || !(in >> tags)) return false;
  for (size_t t = 0; t < tags; t++) {
    size_t length = 0, count = 0;
    if (!(in >> length)) return false;
    in.get();
    std::string tag(length, '\0');
    if (!in.read(tag.data(), (std::streamsize)length) || !(in >> count)) return false;
    std::vector<float>& values = run.scalars[tag];
    for (size_t i = 0; i < count; i++) {
      uint32_t bits = 0;
      if (!(in >> std::hex >> bits >> std::dec)) return false;
      float x;
      std::memcpy(&x, &bits, 4);
      values.push_back(x);
    }
  }
  return (in >> line) && line == "end";
}

void write_reference(const std::string& path, const std::string& key, const ScalarRun& run) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  bool written = false;
  {
    std::ofstream out(tmp, std::ios::binary);
    out << "lmforge test reference run 1\n" << key << "\n" << run.status << " " << run.output.size() << "\n"
        << run.output << "\n" << run.scalars.size() << "\n";
    for (const auto& [tag, values] : run.scalars) {
      out << tag.size() << " " << tag << " " << values.size();
      for (const float x : values) {
        uint32_t bits;
        std::memcpy(&bits, &x, 4);
        out << " " << std::hex << bits << std::dec;
      }
      out << "\n";
    }
    out << "end\n";
    out.close();
    written = !out.fail();
  }
  // Not kept (a full disk, a read-only build tree): the next test makes the run again.
  std::error_code ec;
  if (written) fs::rename(tmp, path, ec);
  if (!written || ec) fs::remove(tmp, ec);
}

// run_and_read(cmd, tb) for a one-process run writing only into `dir` (its data cache) and `tb`, made once per build.
// Files are named <executable hash>-<key hash>; those of an earlier executable are removed when a run is kept.
ScalarRun reference_run(const TempDir& dir, const std::string& cmd, const std::string& tb) {
  const std::string identity = executable_identity();
  const std::string key = identity + " " + replace_all(replace_all(cmd, tb, "<tb>"), dir.path(), "<dir>");
  const std::string store = std::string(LMFORGE_BINARY_DIR) + "/tests/reference-runs";
  char name[40];
  std::snprintf(name, sizeof name, "%016llx-%016llx", (unsigned long long)fnv1a(identity),
                (unsigned long long)fnv1a(key));
  const std::string path = store + "/" + name;
  ScalarRun run;
  if (read_reference(path, key, run)) return run;
  run = run_and_read(cmd, tb);
  std::error_code ec;
  fs::create_directories(store, ec);
  if (run.status != 0 || ec) return run;
  for (const auto& old : fs::directory_iterator(store, ec))
    if (old.path().filename().string().compare(0, 16, name, 16) != 0) fs::remove(old.path(), ec);
  write_reference(path, key, run);
  return run;
}

// TrainRun of a GPT run's scalars.
TrainRun train_run_of(const ScalarRun& r) {
  TrainRun run;
  run.status = r.status;
  run.output = r.output;
  for (const char* tag : {"lm loss", "grad-norm", "lm loss validation", "lm loss test"}) {
    auto it = r.scalars.find(tag);
    if (it == r.scalars.end()) continue;
    std::vector<float>& into = std::string(tag) == "lm loss" ? run.loss
                               : std::string(tag) == "grad-norm" ? run.grad_norm : run.valid;
    into.insert(into.end(), it->second.begin(), it->second.end());
  }
  return run;
}

// Runs with np ranks (0: a plain single process, no mpirun) and collects the TensorBoard scalars.
TrainRun train(const TempDir& dir, const std::string& name, int np, const Flags& overrides = {},
          const std::string& launcher = "") {
  Flags flags = overrides;
  const std::string tb = dir.file("tb-" + name);
  flags["--tensorboard-dir"] = tb;
  const std::string prefix = !launcher.empty() ? launcher : np > 0 ? mpirun_prefix(np) : "";
  return train_run_of(run_and_read("timeout 120 env OMP_NUM_THREADS=1 " + prefix + train_args(dir, flags), tb));
}

// train(dir, name, 0, overrides) made once per build (reference_run): the one-process run fixtures compare with.
TrainRun train_reference(const TempDir& dir, const std::string& name, const Flags& overrides = {}) {
  Flags flags = overrides;
  const std::string tb = dir.file("tb-" + name);
  flags["--tensorboard-dir"] = tb;
  return train_run_of(reference_run(dir, "timeout 120 env OMP_NUM_THREADS=1 " + train_args(dir, flags), tb));
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

// ---- a rank killed while the job trains ----------------------------------------------------------------------------

// The child processes of `parent` whose command name is `name`.
std::vector<pid_t> children(pid_t parent, const std::string& name) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(stat)), {});
    const size_t open = s.find('('), close = s.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (s.substr(open + 1, close - open - 1) != name) continue;
    std::istringstream rest(s.substr(close + 2));
    char state;
    long ppid;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back((pid_t)std::stol(pid));
  }
  return out;
}

using lmforge::seconds_since;  // util/strings.h's, unqualified here and in the tests using namespace train_runs

struct KilledRun {
  pid_t mpirun = 0;
  std::vector<pid_t> ranks;  // the lmforge ranks mpirun started
  int status = 0;            // mpirun's wait status
  double seconds = 0.0;      // from the SIGKILL to mpirun's end
};

// Starts `cmd` (an mpirun of `ranks` lmforge processes writing to `log`) in its own process group; once the log shows
// iteration 3, SIGKILLs the rank victim(ranks) and waits for mpirun. A fatal failure (the group killed) when the ranks
// are not all running, or when mpirun outlives the kill by 30 s ("... of <what> being killed"): call it under
// ASSERT_NO_FATAL_FAILURE.
void kill_rank_mid_run(const std::string& cmd, const std::string& log, size_t ranks,
                       const std::function<pid_t(std::vector<pid_t>&)>& victim, const std::string& what,
                       KilledRun& run) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  run.mpirun = pid;
  const auto start = std::chrono::steady_clock::now();
  auto text = [&] {  // the log so far (empty before mpirun created it)
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  while (seconds_since(start) < 60 && text().find(" iteration        3/") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  run.ranks = children(pid, "lmforge");
  if (run.ranks.size() != ranks || ::waitpid(pid, &run.status, WNOHANG) != 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &run.status, 0);
    FAIL() << "expected " << ranks << " running ranks, found " << run.ranks.size() << ": " << read_file(log);
  }
  ASSERT_EQ(::kill(victim(run.ranks), SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  pid_t done = 0;
  while ((done = ::waitpid(pid, &run.status, WNOHANG)) == 0 && seconds_since(killed) < 30)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  run.seconds = seconds_since(killed);
  if (done == 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &run.status, 0);
    FAIL() << "mpirun did not end within 30 s of " << what << " being killed: " << read_file(log);
  }
}

// The single-process reference run, shared by the tests of every executable (train_reference).
class TrainParallel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    single_ = new TrainRun(train_reference(*dir_, "single"));
  }
  static void TearDownTestSuite() {
    delete single_;
    delete dir_;
  }
  static inline TempDir* dir_ = nullptr;
  static inline TrainRun* single_ = nullptr;
};

}  // namespace train_runs
