// defines: run_claim_prep(), claimer_status_json()
//
// One thread prepares shards; a heartbeat thread touches the lease of the shard in hand and rewrites this
// process's status file every quarter lease, and raises `lost` when the lease was taken over (this process was
// stopped or starved past the lease). The preparing thread then abandons the shard at its next block, or at the
// latest finds out when committing: every committed file is published with link(), which never replaces what
// another process committed first.
#include "prep/claim_prep.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "data/lease.h"
#include "prep/shard_assembly.h"
#include "prep/shard_plan.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/progress.h"
#include "util/strings.h"

namespace lmforge::prep {
namespace {

using data::commit_no_clobber;
using data::CommitResult;
using data::on_fuse;
using data::read_lease;
using data::this_process_owner;
using data::Lease;
using data::LeaseOwner;
using data::LeaseState;
using data::ServerClock;

using Clock = std::chrono::steady_clock;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Thrown into the pipeline (from its progress callback) when the shard's lease was lost.
struct ClaimLost {};

void write_file_atomically(const std::string& path, const std::string& tmp, const std::string& text) {
  {
    data::UniqueFd fd = data::open_write_truncate(tmp);
    data::write_all(fd.get(), text.data(), text.size(), tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error(data::os_error(path, "cannot rename " + tmp + " to it"));
}

bool same_bytes(const std::string& a, const std::string& b) {
  data::MappedFile fa(a), fb(b);
  return fa.size() == fb.size() && (fa.size() == 0 || std::memcmp(fa.data(), fb.data(), fa.size()) == 0);
}

// Heartbeats for the lease in hand and the status file, on its own thread.
class Heartbeat {
 public:
  Heartbeat(double interval, std::string status_path, ClaimerStatus status)
      : interval_(interval), status_path_(std::move(status_path)), status_(std::move(status)),
        thread_([this] { loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    ::unlink(status_path_.c_str());
  }
  // Lease now in hand (nullptr: none); clears `lost`.
  void hold(Lease* lease, int64_t shard) {
    std::lock_guard<std::mutex> lock(mutex_);
    lease_ = lease;
    lost_ = false;
    status_.shard = shard;
    status_.shard_bytes_done = 0;
  }
  void progress(uint64_t bytes) { shard_bytes_.store(bytes, std::memory_order_relaxed); }
  void add_done(uint64_t bytes, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++status_.shards_done;
    status_.bytes_done += bytes;
    status_.busy_seconds += seconds;
  }
  bool lost() const { return lost_.load(); }
  // Beat now (a lease just taken, or a status worth showing at once).
  void beat() {
    std::lock_guard<std::mutex> lock(mutex_);
    beat_locked();
  }

 private:
  void beat_locked() {
    if (lease_ && !lease_->heartbeat()) lost_ = true;
    status_.shard_bytes_done = shard_bytes_.load(std::memory_order_relaxed);
    write_file_atomically(status_path_, status_path_ + ".tmp", claimer_status_json(status_));
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      try {
        beat_locked();
      } catch (const std::exception& e) {
        // A failing heartbeat (file server gone) is not fatal by itself: the claim lapses and is taken over.
        std::fprintf(stderr, "prep: warning: heartbeat failed: %s\n", e.what());
      }
      wake_.wait_for(lock, std::chrono::duration<double>(interval_), [this] { return stop_; });
    }
  }

  double interval_;
  std::string status_path_;
  ClaimerStatus status_;
  Lease* lease_ = nullptr;
  std::atomic<bool> lost_{false};
  std::atomic<uint64_t> shard_bytes_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything above is constructed
};

struct Claimer {
  const PrepOptions& options;
  const text::Tokenizer& tokenizer;
  data::DType dtype;
  double lease_seconds;
  std::string dir, claims, tmp_dir;
  LeaseOwner owner;
  ServerClock& clock;
  Heartbeat& heartbeat;
  PieceEncoders& encoders;
  InputGuard* inputs = nullptr;  // set once the plan is taken
};

std::string who(const LeaseOwner& o) { return o.host + " pid " + std::to_string(o.pid); }

double mtime_seconds(const struct stat& st) { return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9; }

// What one pass over the shared directory sees, from two directory listings (the shard directory and claims/)
// instead of probing every shard's files: with a thousand claimers polling near the end, probing was several
// metadata operations per shard per claimer per poll on one file server.
struct PassView {
  std::vector<bool> manifest;        // shard-NNNNNN.json listed: probably complete (complete_shard() decides)
  std::vector<int64_t> generation;   // newest claim generation listed per shard, -1 for none
  std::vector<std::string> stale_claimers;  // status files (and probes) of claimers silent for two leases
};

// Parses "shard-NNNNNN<rest>" (NNNNNN < n); false for other names.
bool shard_index_of(const std::string& name, size_t n, uint32_t& index, std::string& rest) {
  if (name.size() < 12 || name.compare(0, 6, "shard-") != 0) return false;
  uint64_t v = 0;
  for (size_t i = 6; i < 12; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + uint64_t(name[i] - '0');
  }
  if (v >= n) return false;
  index = static_cast<uint32_t>(v);
  rest = name.substr(12);
  return true;
}

// Status files older than `stale_after` seconds (server clock) are listed in stale_claimers.
PassView scan_pass(const Claimer& c, size_t n, double now, double stale_after) {
  PassView v{std::vector<bool>(n, false), std::vector<int64_t>(n, -1), {}};
  std::error_code ec;
  uint32_t index = 0;
  std::string rest;
  for (const auto& e : std::filesystem::directory_iterator(c.dir, ec))
    if (shard_index_of(e.path().filename().string(), n, index, rest) && rest == ".json") v.manifest[index] = true;
  for (const auto& e : std::filesystem::directory_iterator(c.claims, ec)) {
    const std::string name = e.path().filename().string();
    if (shard_index_of(name, n, index, rest)) {
      // "shard-NNNNNN.G" (a generation; temporaries of the exclusive create have more after G)
      if (rest.size() < 2 || rest[0] != '.' || rest.find_first_not_of("0123456789", 1) != std::string::npos) continue;
      v.generation[index] = std::max<int64_t>(v.generation[index], std::stoll(rest.substr(1)));
    } else if (name.rfind("claimer-", 0) == 0 && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      struct stat st {};  // a live claimer rewrites its status file every quarter lease
      if (::stat(e.path().c_str(), &st) == 0 && now - mtime_seconds(st) > stale_after)
        v.stale_claimers.push_back(name);
    }
  }
  return v;
}

// A claimer silent for two leases is gone (killed, its machine preempted): its status file and clock probe are
// removed so that `lmforge inspect` and the listings stop carrying it. Should it only have been stopped, it
// writes its status again when it resumes and recreates its probe.
void remove_stale_claimers(const Claimer& c, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::string tag = name.substr(8, name.size() - 8 - 5);  // claimer-<tag>.json
    ::unlink((c.claims + "/" + name).c_str());
    ::unlink((c.claims + "/probe-" + tag).c_str());
  }
}

// The plan: read and checked against this process's flags when there is one; else written by whichever process
// takes the plan lease first while the others wait for it.
ShardPlan take_plan(const Claimer& c, uint64_t shard_bytes) {
  const ShardPlan mine = make_shard_plan(c.options, shard_bytes, /*split=*/false);
  const std::string path = c.dir + "/plan.json";
  bool said = false;
  for (;;) {
    if (exists(path)) {
      ShardPlan plan = read_plan(c.options.output_prefix);
      check_same_plan(c.options.output_prefix, plan, mine);
      return plan;
    }
    std::optional<LeaseState> seen;
    if (auto lease = Lease::try_acquire(c.claims + "/plan", c.lease_seconds, c.clock, c.owner, &seen)) {
      const ShardPlan plan = make_shard_plan(c.options, shard_bytes);
      const std::string tmp = path + ".tmp-" + c.owner.host + "-" + c.owner.token;
      {
        const std::string text = plan_to_json(plan);
        data::UniqueFd fd = data::open_write_truncate(tmp);
        data::write_all(fd.get(), text.data(), text.size(), tmp);
        if (::fsync(fd.get()) != 0) throw Error(data::os_error(tmp, "fsync failed"));
      }
      if (commit_no_clobber(tmp, path) == CommitResult::AlreadyThere) {
        ::unlink(tmp.c_str());  // a planner this process took over finished after all: use (and check) its plan
        continue;
      }
      std::fprintf(stderr, "prep: claim: wrote plan %s: %zu shards\n", plan.id.c_str(), plan.shards.size());
      return plan;
    }
    if (!said && seen)
      std::fprintf(stderr, "prep: claim: waiting for %s to write the plan\n", who(seen->owner).c_str());
    said = true;
    sleep_seconds(0.1);
  }
}

enum class ShardOutcome { Committed, Lost };

// Publishes one finished file of a shard. A file already there without the shard's manifest was left by a claimer
// that died between its links: it holds the same bytes (shards are deterministic) or, if damaged, is replaced
// while this process still holds the lease.
void publish_part(const Lease& lease, const std::string& from, const std::string& to) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (commit_no_clobber(from, to) == CommitResult::Committed) return;
    if (same_bytes(from, to)) {
      ::unlink(from.c_str());
      return;
    }
    if (!lease.held()) throw ClaimLost{};
    std::fprintf(stderr, "prep: claim: warning: %s differs from this process's copy and has no manifest; replacing it\n",
                 to.c_str());
    ::unlink(to.c_str());
  }
  throw Error(to + ": cannot publish " + from + " (the name keeps reappearing with other bytes)");
}

ShardOutcome prepare_claimed(const Claimer& c, const ShardPlan& plan, uint32_t index, Lease& lease) {
  const Shard& shard = plan.shards.at(index);
  const std::string& prefix = c.options.output_prefix;
  std::vector<std::unique_ptr<data::IndexedDatasetWriter>> writers;
  std::vector<data::IndexedDatasetWriter*> ptrs;
  auto tmp_prefix = [&](const std::string& key) { return c.tmp_dir + "/" + shard_name(index) + "_" + key + "_document"; };
  for (const auto& key : plan.json_keys) {
    writers.push_back(std::make_unique<data::IndexedDatasetWriter>(tmp_prefix(key), c.dtype));
    ptrs.push_back(writers.back().get());
  }
  ShardManifest m;
  m.plan_id = plan.id;
  m.index = index;
  m.path = shard.piece.path;
  m.begin = shard.piece.begin;
  m.end = shard.piece.end;
  m.whole_file = shard.piece.whole_file;
  m.host = c.owner.host;
  m.rank = -1;  // claim mode has no ranks
  // The input must still be the plan's, before this shard is cut from it and again before it is committed (the
  // file may be rewritten while it is read): shards from two contents would assemble into a dataset of neither.
  const std::string what = shard_name(index) + " (bytes " + std::to_string(shard.piece.begin) + "-" +
                           std::to_string(shard.piece.end) + " of it)";
  c.inputs->check(shard.file, what);
  const auto start = Clock::now();
  prepare_pieces(c.options, c.tokenizer, {shard.piece}, ptrs, m.counts,
                 [&](uint64_t done) {
                   c.heartbeat.progress(done);
                   if (c.heartbeat.lost()) throw ClaimLost{};
                 },
                 nullptr, &c.encoders);
  for (auto& w : writers) w->finish();
  if (!lease.held()) throw ClaimLost{};
  c.inputs->check(shard.file, what);
  for (const auto& key : plan.json_keys)
    for (const char* ext : {".bin", ".idx"})
      publish_part(lease, tmp_prefix(key) + ext, shard_dataset_prefix(prefix, index, key) + ext);
  m.counts.seconds = seconds_since(start);
  const std::string tmp = c.tmp_dir + "/" + shard_name(index) + ".json";
  {
    const std::string text = manifest_to_json(m);
    data::UniqueFd fd = data::open_write_truncate(tmp);
    data::write_all(fd.get(), text.data(), text.size(), tmp);
    if (::fsync(fd.get()) != 0) throw Error(data::os_error(tmp, "fsync failed"));
  }
  if (commit_no_clobber(tmp, shard_manifest_path(prefix, index)) == CommitResult::AlreadyThere) {
    ::unlink(tmp.c_str());
    return ShardOutcome::Lost;
  }
  c.heartbeat.add_done(shard.piece.size, m.counts.seconds);
  return ShardOutcome::Committed;
}

// Removes what an abandoned shard left in this process's temporary directory.
void clear_tmp_dir(const std::string& tmp_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tmp_dir, ec)) std::filesystem::remove_all(e.path(), ec);
}

}  // namespace

std::string claimer_status_name(const ClaimerStatus& s) {
  return "claimer-" + s.host + "-" + std::to_string(s.pid) + "-" + s.token + ".json";
}

std::string claimer_status_json(const ClaimerStatus& s) {
  char nums[256];
  std::snprintf(nums, sizeof nums,
                "\"lease_seconds\": %.3f, \"shards_done\": %llu, \"bytes_done\": %llu, \"busy_seconds\": %.3f, "
                "\"shard\": %lld, \"shard_bytes_done\": %llu",
                s.lease_seconds, static_cast<unsigned long long>(s.shards_done),
                static_cast<unsigned long long>(s.bytes_done), s.busy_seconds, static_cast<long long>(s.shard),
                static_cast<unsigned long long>(s.shard_bytes_done));
  return "{\"host\": " + json_quote(s.host) + ", \"pid\": " + std::to_string(s.pid) + ", \"token\": " +
         json_quote(s.token) + ", " + nums + "}\n";
}

std::optional<PrepSummary> run_claim_prep(const PrepOptions& options, uint64_t shard_bytes, double lease_seconds,
                                          std::ostream& out) {
  if (!(lease_seconds > 0)) throw Error("--claim-lease must be a positive number of seconds");
  const auto start = Clock::now();
  const auto tokenizer = text::make_tokenizer(options.tokenizer);
  check_eod(options, *tokenizer);
  const std::string dir = shard_dir(options.output_prefix), claims = dir + "/claims";
  std::filesystem::create_directories(claims);
  if (on_fuse(dir))
    throw Error(dir + " is on a FUSE file system (gcsfuse, s3fs, ...), which gives neither atomic exclusive create "
                "nor atomic rename: claims would race. Use a POSIX shared file system (NFS, Filestore, Lustre, "
                "local disk) for --output-prefix, or a static split (--rank/--world-size) and copy the result.");
  const LeaseOwner owner = this_process_owner();
  const std::string tag = owner.host + "-" + std::to_string(owner.pid) + "-" + owner.token;
  ServerClock clock(claims + "/probe-" + tag);
  ClaimerStatus status;
  status.host = owner.host;
  status.pid = owner.pid;
  status.token = owner.token;
  status.lease_seconds = lease_seconds;
  // Four beats per lease: one late beat (a loaded server, a short pause) does not yet lose the claim.
  Heartbeat heartbeat(lease_seconds / 4, claims + "/" + claimer_status_name(status), status);
  PieceEncoders encoders(options, *tokenizer);
  const std::string tmp_dir = dir + "/tmp-" + tag;
  std::filesystem::create_directories(tmp_dir);
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_tmp{tmp_dir};
  Claimer c{options, *tokenizer, data::dtype_for_vocab_size(tokenizer->vocab_size()), lease_seconds, dir, claims,
            tmp_dir, owner, clock, heartbeat, encoders};

  const ShardPlan plan = take_plan(c, shard_bytes);
  InputGuard inputs(plan, dir);
  c.inputs = &inputs;
  remove_stale_tmp_dirs(options.output_prefix, false);
  const size_t n = plan.shards.size();
  std::fprintf(stderr, "prep: claim: %s (token %s) joins plan %s: %zu shards, %.1f MB; lease %.0f s\n",
               who(owner).c_str(), owner.token.c_str(), plan.id.c_str(), n, plan.total_bytes / 1e6, lease_seconds);

  // Each process starts its scans at its own random shard, so processes starting together do not all race for
  // shard 0; completion is permanent, so a shard seen done is never looked at again.
  std::vector<bool> done(n, false);
  std::mt19937_64 rng(std::random_device{}());
  size_t next = n ? rng() % n : 0;
  uint64_t mine = 0, mine_bytes = 0, lost = 0;
  bool said_waiting = false;
  double poll = 1;  // seconds between passes that found nothing to claim; grows while waiting
  for (;;) {
    size_t remaining = 0;
    bool worked = false;
    // One listing of each directory and one server-clock reading per pass; then per shard at most one stat of
    // its newest claim, and the claim itself only for a shard that looks free or expired.
    const double now = clock.now();
    const PassView view = scan_pass(c, n, now, 2 * lease_seconds);
    remove_stale_claimers(c, view.stale_claimers);
    for (size_t k = 0; k < n && !worked; ++k) {
      const uint32_t i = static_cast<uint32_t>((next + k) % n);
      if (done[i]) continue;
      if (view.manifest[i] && complete_shard(options.output_prefix, plan, i)) {
        done[i] = true;
        continue;
      }
      ++remaining;
      if (view.generation[i] >= 0) {
        struct stat st {};
        const std::string newest =
            data::lease_file(claims + "/" + shard_name(i), static_cast<uint32_t>(view.generation[i]));
        if (::stat(newest.c_str(), &st) == 0 && now - mtime_seconds(st) <= lease_seconds) continue;  // held
      }
      auto lease = Lease::try_acquire(claims + "/" + shard_name(i), lease_seconds, clock, owner);
      if (!lease) continue;
      if (complete_shard(options.output_prefix, plan, i)) {  // committed between the check and the claim
        done[i] = true;
        continue;
      }
      if (lease->took_over())
        std::fprintf(stderr, "prep: claim: took over %s from %s (no heartbeat for %.1f s)\n", shard_name(i).c_str(),
                     who(lease->took_over()->owner).c_str(), lease->took_over()->age_seconds);
      heartbeat.hold(&*lease, i);
      heartbeat.beat();
      ShardOutcome outcome;
      try {
        outcome = prepare_claimed(c, plan, i, *lease);
      } catch (const ClaimLost&) {
        outcome = ShardOutcome::Lost;
      } catch (...) {
        heartbeat.hold(nullptr, -1);
        // A failure after the claim was lost (another process cleaned this one's directory) is not this
        // process's error: the shard is another's now.
        if (!lease->held() || exists(shard_manifest_path(options.output_prefix, i))) {
          outcome = ShardOutcome::Lost;
        } else {
          throw;
        }
      }
      heartbeat.hold(nullptr, -1);
      clear_tmp_dir(tmp_dir);
      std::filesystem::create_directories(tmp_dir);
      if (outcome == ShardOutcome::Committed) {
        ++mine;
        mine_bytes += plan.shards[i].piece.size;
      } else {
        ++lost;
        std::fprintf(stderr, "prep: claim: lost %s: its claim was taken over while this process was stopped or "
                     "slow; this copy is discarded (the committed shard is not touched)\n", shard_name(i).c_str());
      }
      done[i] = true;
      next = i + 1;
      worked = true;
    }
    if (worked) {
      poll = 1;
      continue;
    }
    if (remaining == 0) break;
    if (!said_waiting)
      std::fprintf(stderr, "prep: claim: no free shard; waiting for %zu shard(s) claimed by other processes "
                   "(taken over if their heartbeat stops for %.0f s)\n", remaining, lease_seconds);
    said_waiting = true;
    // Near the end most claimers only wait: each polls less often the longer it waits (1 s growing to a quarter
    // lease, with jitter so a thousand of them do not poll in step); a claim that expires is still noticed
    // within a quarter lease of expiring.
    sleep_seconds(std::min(poll, lease_seconds / 4) * (0.75 + 0.5 * double(rng() % 1000) / 1000.0));
    poll = std::min(poll * 1.5, std::max(1.0, lease_seconds / 4));
  }
  const double busy = seconds_since(start);
  std::fprintf(stderr, "prep: claim: this process committed %llu shards (%.1f MB) in %.2f s%s\n",
               static_cast<unsigned long long>(mine), mine_bytes / 1e6, busy,
               lost ? (", lost " + std::to_string(lost) + " to takeover").c_str() : "");

  // Every shard is complete: exactly one process assembles (the assemble lease), the others wait for it.
  const std::string marker = dir + "/assembled.json";
  std::string level_name;
  for (const auto& key : plan.json_keys)
    level_name += (level_name.empty() ? "" : ", ") + options.output_prefix + "_" + key + "_" + plan.level;
  bool said_assembling = false;
  // Every shard is done, so every live claimer is waiting here and beats its status every quarter lease: one
  // silent for a whole lease is gone, and its status file goes with it.
  const auto forget_dead_claimers = [&] {
    remove_stale_claimers(c, scan_pass(c, n, clock.now(), lease_seconds).stale_claimers);
  };
  // The marker alone is not trusted: the datasets it stands for may have been deleted or moved since (or a kill
  // fell inside an assembly's publish). Datasets that are not as assembled are assembled again from the shards,
  // under a lease named after that marker file (its inode and mtime): the first assembly's lease may still be
  // within its term, and a marker replaced by a newer assembly gives a new name, so each stale marker is
  // reassembled by one process.
  std::string said_stale;
  for (;;) {
    std::string base = claims + "/assemble";
    struct stat marker_st {};
    if (::stat(marker.c_str(), &marker_st) == 0) {
      const std::string problem = assembled_problem(options.output_prefix, plan);
      if (problem.empty()) {
        forget_dead_claimers();
        out << "prep: nothing left to claim: all " << n << " shards are done and " << level_name
            << " is assembled; this process can stop\n";
        return std::nullopt;
      }
      if (said_stale != problem)
        std::fprintf(stderr, "prep: claim: %s says the datasets were assembled, but %s; assembling them again from "
                     "the shards\n", marker.c_str(), problem.c_str());
      said_stale = problem;
      base = claims + "/reassemble-" + std::to_string(marker_st.st_ino) + "-" +
             std::to_string(marker_st.st_mtim.tv_sec) + "." + std::to_string(marker_st.st_mtim.tv_nsec);
    }
    std::optional<LeaseState> seen;
    if (auto lease = Lease::try_acquire(base, lease_seconds, clock, owner, &seen)) {
      if (exists(marker) && assembled_problem(options.output_prefix, plan).empty()) continue;  // done meanwhile
      heartbeat.hold(&*lease, -1);
      std::vector<ShardManifest> manifests;
      for (const Shard& s : plan.shards) {
        auto m = complete_shard(options.output_prefix, plan, s.index);
        if (!m) throw Error(shard_manifest_path(options.output_prefix, s.index) + ": missing after every shard was done");
        manifests.push_back(std::move(*m));
      }
      PrepSummary summary = assemble_shards(options.output_prefix, plan, manifests);
      write_assembled_marker(options.output_prefix, plan, owner.text(), marker + ".tmp-" + tag);
      forget_dead_claimers();
      heartbeat.hold(nullptr, -1);
      summary.seconds = seconds_since(start);
      out << "prep: nothing left to claim: all " << n << " shards are done; this process assembled " << level_name
          << "\n";
      return summary;
    }
    if (!said_assembling && seen)
      std::fprintf(stderr, "prep: claim: %s is assembling; waiting for it\n", who(seen->owner).c_str());
    said_assembling = true;
    sleep_seconds(std::min(1.0, lease_seconds / 4));
  }
}

}  // namespace lmforge::prep
