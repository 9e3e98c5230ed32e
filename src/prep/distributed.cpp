// defines: sharded_mode(), run_sharded_prep()
//
// Under MPI the main thread of each rank only talks (polls messages, sleeps a few ms when idle) and a worker
// thread prepares one shard at a time with the usual TBB pipeline, so rank 0 serves requests while it works on
// shards too. Messages are a few int64 values:
//   request  (rank → 0): "give me a shard"; carries the sender's shards done, bytes done and busy time
//   progress (rank → 0): bytes done in the current shard, about once a second
//   assign   (0 → rank): a shard index, or −1 when none is left
//   final    (rank → 0): the sender's totals and host name, after it received −1 and its worker is idle
// Rank 0 assembles after every other rank sent `final`. A rank that throws prints the reason with its rank and
// calls MPI_Abort, so mpirun ends the whole job non-zero; a rank that dies is noticed by mpirun, which does the same.
#include "prep/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <ostream>
#include <thread>

#include "data/file_util.h"
#include "data/indexed_dataset.h"
#include "dist/mpi_session.h"
#include "prep/claim_prep.h"
#include "prep/shard_assembly.h"
#include "prep/shard_plan.h"
#include "text/tokenizer_factory.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/strings.h"

namespace lmforge::prep {
namespace {

using Clock = std::chrono::steady_clock;

enum Tag : int { kRequest = 1, kProgress = 2, kAssign = 3, kFinal = 4 };

std::string mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// What one process needs to prepare shards.
struct ShardContext {
  const PrepOptions& options;
  const ShardPlan& plan;
  const text::Tokenizer& tokenizer;
  data::DType dtype;
  std::string tmp_dir;
  int rank;
  std::string host;
};

// Prepares one shard into the process's temporary directory, renames its datasets into the shard directory and
// publishes the manifest last. `bytes_done` follows the shard's progress (read by another thread).
ShardManifest prepare_shard(const ShardContext& ctx, uint32_t index, std::atomic<uint64_t>& bytes_done,
                            PieceEncoders* encoders) {
  const Shard& shard = ctx.plan.shards.at(index);
  const std::string& prefix = ctx.options.output_prefix;
  const auto start = Clock::now();
  std::vector<std::unique_ptr<data::IndexedDatasetWriter>> writers;
  std::vector<data::IndexedDatasetWriter*> ptrs;
  for (const auto& key : ctx.plan.json_keys) {
    writers.push_back(std::make_unique<data::IndexedDatasetWriter>(
        ctx.tmp_dir + "/" + shard_name(index) + "_" + key + "_document", ctx.dtype));
    ptrs.push_back(writers.back().get());
  }
  ShardManifest m;
  m.plan_id = ctx.plan.id;
  m.index = index;
  m.path = shard.piece.path;
  m.begin = shard.piece.begin;
  m.end = shard.piece.end;
  m.whole_file = shard.piece.whole_file;
  m.host = ctx.host;
  m.rank = ctx.rank;
  prepare_pieces(ctx.options, ctx.tokenizer, {shard.piece}, ptrs, m.counts,
                 [&](uint64_t done) { bytes_done.store(done, std::memory_order_relaxed); }, nullptr, encoders);
  for (auto& w : writers) w->finish();
  for (const auto& key : ctx.plan.json_keys) {
    const std::string from = ctx.tmp_dir + "/" + shard_name(index) + "_" + key + "_document";
    const std::string to = shard_dataset_prefix(prefix, index, key);
    for (const char* ext : {".bin", ".idx"}) {
      if (::rename((from + ext).c_str(), (to + ext).c_str()) != 0)
        throw Error(data::os_error(to + ext, "cannot rename " + from + ext + " to it"));
    }
  }
  m.counts.seconds = seconds_since(start);
  publish_manifest(prefix, ctx.tmp_dir, m);
  bytes_done.store(shard.piece.size, std::memory_order_relaxed);
  return m;
}

// One shard at a time on a long-lived background thread, so the caller's thread stays free for messages and the
// thread's tokenizer caches (PieceEncoders) carry over from shard to shard.
class ShardWorker {
 public:
  explicit ShardWorker(const ShardContext& ctx) : ctx_(ctx), thread_([this] { loop(); }) {}
  ~ShardWorker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  bool busy() const { return busy_; }
  void start(uint32_t index) {
    busy_ = true;
    bytes_.store(0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = index;
      done_ = false;
    }
    wake_.notify_all();
  }
  // If the current shard finished: rethrows its error, else returns true (the result is in result()).
  bool finished() {
    if (!busy_) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!done_) return false;
    }
    busy_ = false;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return true;
  }
  const ShardManifest& result() const { return result_; }
  uint64_t bytes_in_progress() const { return busy_ ? bytes_.load(std::memory_order_relaxed) : 0; }

 private:
  void loop() {
    std::unique_ptr<PieceEncoders> encoders;
    for (;;) {
      int64_t index;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || job_ >= 0; });
        if (stop_) return;
        index = std::exchange(job_, -1);
      }
      try {
        if (!encoders) encoders = std::make_unique<PieceEncoders>(ctx_.options, ctx_.tokenizer);
        result_ = prepare_shard(ctx_, static_cast<uint32_t>(index), bytes_, encoders.get());
      } catch (...) {
        error_ = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
  }

  const ShardContext& ctx_;
  std::mutex mutex_;
  std::condition_variable wake_;
  int64_t job_ = -1;
  bool done_ = false, stop_ = false;
  bool busy_ = false;  // caller's thread only
  std::atomic<uint64_t> bytes_{0};
  ShardManifest result_;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once everything above is constructed
};

struct RankStats {
  std::string host;
  uint64_t shards = 0, bytes = 0, current = 0;
  double busy_seconds = 0, wall_seconds = 0;
  bool final = false;
};

std::string progress_text(const std::string& who, uint64_t shards_done, uint64_t shards_total, uint64_t found,
                          uint64_t bytes_done, uint64_t bytes_total, double seconds) {
  const double t = std::max(seconds, 1e-9);
  std::string line = who + ": shards " + format_count(shards_done) + "/" + format_count(shards_total);
  if (found) line += " (" + format_count(found) + " found complete)";
  line += " | " + mb(bytes_done) + " of " + mb(bytes_total);
  if (bytes_total) line += " (" + std::to_string(100 * bytes_done / bytes_total) + "%)";
  char rate[48];
  std::snprintf(rate, sizeof rate, " | %.1f MB/s", bytes_done / t / 1e6);
  line += rate;
  if (bytes_done > 0 && bytes_done < bytes_total)
    line += " | ETA " + format_duration(t * double(bytes_total - bytes_done) / double(bytes_done));
  return line;
}

void print_rank_report(const std::vector<RankStats>& ranks, double wall, std::ostream& out) {
  out << "per-rank report (this run):\n";
  char line[200];
  uint64_t shards = 0, bytes = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankStats& s = ranks[r];
    std::snprintf(line, sizeof line, "  rank %-4zu %-20s %6llu shards %10.1f MB  busy %7.2f s  %7.2f MB/s\n", r,
                  s.host.c_str(), static_cast<unsigned long long>(s.shards), s.bytes / 1e6, s.busy_seconds,
                  s.busy_seconds > 0 ? s.bytes / s.busy_seconds / 1e6 : 0.0);
    out << line;
    shards += s.shards;
    bytes += s.bytes;
  }
  std::snprintf(line, sizeof line, "  all %zu ranks: %llu shards, %.1f MB in %.2f s (%.2f MB/s)\n", ranks.size(),
                static_cast<unsigned long long>(shards), bytes / 1e6, wall, wall > 0 ? bytes / wall / 1e6 : 0.0);
  out << line;
}

std::vector<int64_t> pack_string(const std::string& s) {
  std::vector<int64_t> v((s.size() + 7) / 8, 0);
  std::memcpy(v.data(), s.data(), s.size());
  return v;
}

std::string unpack_string(const int64_t* p, size_t count) {
  std::string s(reinterpret_cast<const char*>(p), count * 8);
  s.erase(s.find_last_not_of('\0') + 1);
  return s;
}

void check_common(const PrepOptions& options) {
  if (options.inputs.empty()) throw Error("no --input given");
  if (options.output_prefix.empty()) throw Error("no --output-prefix given");
  check_json_keys(options);
  if (options.workers < 0) throw Error("--workers must be at least 1 (or 0 for every core)");
  check_sentence_options(options);
}

// Every shard complete: the manifests, in plan order (Error naming the first one missing).
std::vector<ShardManifest> all_manifests(const std::string& prefix, const ShardPlan& plan) {
  std::vector<ShardManifest> out;
  for (const Shard& s : plan.shards) {
    auto m = complete_shard(prefix, plan, s.index);
    if (!m) throw Error(shard_manifest_path(prefix, s.index) + ": missing after every rank finished");
    out.push_back(std::move(*m));
  }
  return out;
}

// ------------------------------------------------------------------------------------------------------------
// Static: rank r of N takes shards r, r+N, …

std::optional<PrepSummary> run_static(const PrepOptions& options, uint64_t shard_bytes, const dist::RankInfo& rank,
                                      std::ostream& out) {
  const auto start = Clock::now();
  const auto tokenizer = text::make_tokenizer(options.tokenizer);
  check_eod(options, *tokenizer);
  const ShardPlan plan = make_shard_plan(options, shard_bytes);
  write_or_check_plan(options.output_prefix, plan);
  remove_stale_tmp_dirs(options.output_prefix, false);
  const std::string who = rank.world_size == 1 ? std::string("prep")
                                               : "prep rank " + std::to_string(rank.rank) + "/" + std::to_string(rank.world_size);

  std::vector<uint32_t> mine, todo;
  uint64_t todo_bytes = 0;
  for (const Shard& s : plan.shards) {
    if (s.index % static_cast<uint32_t>(rank.world_size) != static_cast<uint32_t>(rank.rank)) continue;
    mine.push_back(s.index);
    if (!complete_shard(options.output_prefix, plan, s.index)) {
      todo.push_back(s.index);
      todo_bytes += s.piece.size;
    }
  }
  std::fprintf(stderr, "%s: plan %s: %zu shards in all (%s); this process (%s) has %zu, found %zu complete, %zu to prepare\n",
               who.c_str(), plan.id.c_str(), plan.shards.size(), mb(plan.total_bytes).c_str(), rank.origin.c_str(),
               mine.size(), mine.size() - todo.size(), todo.size());

  ShardContext ctx{options, plan, *tokenizer, data::dtype_for_vocab_size(tokenizer->vocab_size()),
                   make_process_tmp_dir(options.output_prefix), rank.rank, host_name()};
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_tmp{ctx.tmp_dir};

  ProgressLine progress(options.progress_seconds);
  uint64_t done_bytes = 0, done_shards = 0;
  const auto work_start = Clock::now();
  {
    ShardWorker worker(ctx);
    for (uint32_t index : todo) {
      worker.start(index);
      try {
        while (!worker.finished()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          if (progress.due())
            progress.print(progress_text(who, done_shards, todo.size(), 0, done_bytes + worker.bytes_in_progress(),
                                         todo_bytes, seconds_since(work_start)));
        }
      } catch (...) {
        progress.finish();
        throw;
      }
      done_bytes += plan.shards[index].piece.size;
      ++done_shards;
    }
  }
  progress.finish();
  const double busy = seconds_since(work_start);
  char line[160];
  std::snprintf(line, sizeof line, "%s: prepared %llu shards, %.1f MB in %.2f s (%.2f MB/s)\n", who.c_str(),
                static_cast<unsigned long long>(done_shards), done_bytes / 1e6, busy,
                busy > 0 ? done_bytes / busy / 1e6 : 0.0);
  std::fputs(line, stderr);

  if (rank.world_size > 1) {
    out << who << ": done. Once every rank has finished, assemble the datasets with:\n  lmforge merge --shards "
        << options.output_prefix << "\n";
    return std::nullopt;
  }
  PrepSummary summary = assemble_shards(options.output_prefix, plan, all_manifests(options.output_prefix, plan));
  remove_stale_tmp_dirs(options.output_prefix, true);
  summary.seconds = seconds_since(start);
  return summary;
}

// ------------------------------------------------------------------------------------------------------------
// MPI: dynamic hand-out by rank 0

// --workers 0 means every core; with several ranks on one node that would oversubscribe it, so under mpirun each
// rank takes its share of the node's cores (Open MPI says how many ranks share this node).
PrepOptions with_node_share_of_cores(const PrepOptions& options) {
  PrepOptions o = options;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (o.workers == 0 && local) {
    const long ranks_here = std::max(1L, std::strtol(local, nullptr, 10));
    o.workers = static_cast<int>(std::max(1L, static_cast<long>(std::thread::hardware_concurrency()) / ranks_here));
  }
  return o;
}

std::optional<PrepSummary> run_mpi(const PrepOptions& options_in, uint64_t shard_bytes, std::ostream& out) {
  const PrepOptions options = with_node_share_of_cores(options_in);
  dist::MpiSession mpi;
  const int me = mpi.rank(), world = mpi.size();
  const std::string host = mpi.processor_name();
  try {
    const auto start = Clock::now();
    const auto tokenizer = text::make_tokenizer(options.tokenizer);
    check_eod(options, *tokenizer);

    // Rank 0 alone reads the inputs' metadata and boundaries (1,000 ranks statting a shared file system at once
    // would be the slow part of starting), checks the shard directory, and sends the plan to everyone.
    ShardPlan plan;
    std::vector<uint32_t> pending;
    std::vector<ShardManifest> found;
    std::string plan_text;
    if (me == 0) {
      plan = make_shard_plan(options, shard_bytes);
      write_or_check_plan(options.output_prefix, plan);
      remove_stale_tmp_dirs(options.output_prefix, false);
      for (const Shard& s : plan.shards) {
        if (auto m = complete_shard(options.output_prefix, plan, s.index))
          found.push_back(std::move(*m));
        else
          pending.push_back(s.index);
      }
      plan_text = plan_to_json(plan);
      // Largest first (longest-processing-time order): a big compressed file handed out last would leave every
      // other rank idle while one works through it. Output order is the plan's, whatever the hand-out order.
      std::stable_sort(pending.begin(), pending.end(), [&](uint32_t a, uint32_t b) {
        return plan.shards[a].piece.size > plan.shards[b].piece.size;
      });
    }
    mpi.broadcast(plan_text);
    if (me != 0) plan = plan_from_json(plan_text, "plan from rank 0");

    uint64_t pending_bytes = 0;
    for (uint32_t i : pending) pending_bytes += plan.shards[i].piece.size;
    if (me == 0)
      std::fprintf(stderr, "prep: plan %s: %zu shards (%s) on %d ranks; found %zu of %zu shards complete, %zu to prepare\n",
                   plan.id.c_str(), plan.shards.size(), mb(plan.total_bytes).c_str(), world, found.size(),
                   plan.shards.size(), pending.size());

    ShardContext ctx{options, plan, *tokenizer, data::dtype_for_vocab_size(tokenizer->vocab_size()),
                     make_process_tmp_dir(options.output_prefix), me, host};
    ShardWorker worker(ctx);
    std::vector<RankStats> ranks(static_cast<size_t>(world));
    RankStats& self = ranks[static_cast<size_t>(me)];
    self.host = host;
    size_t next = 0;                 // rank 0: next entry of `pending` to hand out
    int finals = 0;                  // rank 0: ranks that sent `final`
    bool no_more = false, asked = false, sent_final = false;
    Clock::time_point shard_start{}, last_progress = Clock::now();
    const auto work_start = Clock::now();
    ProgressLine progress(options.progress_seconds);
    std::vector<int64_t> msg;

    auto hand_out = [&]() -> int64_t { return next < pending.size() ? static_cast<int64_t>(pending[next++]) : -1; };
    auto start_shard = [&](int64_t index) {
      if (index < 0) {
        no_more = true;
        return;
      }
      shard_start = Clock::now();
      worker.start(static_cast<uint32_t>(index));
    };

    while (true) {
      bool active = false;
      if (worker.finished()) {
        ++self.shards;
        self.bytes += worker.result().end - worker.result().begin;
        self.busy_seconds += seconds_since(shard_start);
        active = true;
      }
      if (!worker.busy() && !no_more) {
        if (me == 0) {
          start_shard(hand_out());
        } else if (!asked) {
          const int64_t m[3] = {static_cast<int64_t>(self.shards), static_cast<int64_t>(self.bytes),
                                static_cast<int64_t>(self.busy_seconds * 1e3)};
          mpi.send(0, kRequest, m);
          asked = true;
        }
        active = true;
      }
      int source = 0, tag = 0;
      while (mpi.poll(source, tag, msg)) {
        active = true;
        RankStats& r = ranks[static_cast<size_t>(source)];
        if (tag == kAssign) {
          asked = false;
          start_shard(msg.at(0));
        } else if (tag == kRequest) {
          r.shards = static_cast<uint64_t>(msg.at(0));
          r.bytes = static_cast<uint64_t>(msg.at(1));
          r.busy_seconds = msg.at(2) / 1e3;
          r.current = 0;
          const int64_t index = hand_out();
          mpi.send(source, kAssign, std::span<const int64_t>(&index, 1));
        } else if (tag == kProgress) {
          r.current = static_cast<uint64_t>(msg.at(0));
        } else if (tag == kFinal) {
          r.shards = static_cast<uint64_t>(msg.at(0));
          r.bytes = static_cast<uint64_t>(msg.at(1));
          r.busy_seconds = msg.at(2) / 1e3;
          r.current = 0;
          r.host = unpack_string(msg.data() + 3, msg.size() - 3);
          r.final = true;
          ++finals;
        }
      }
      if (me != 0 && worker.busy() && seconds_since(last_progress) >= 0.5) {
        const int64_t m[1] = {static_cast<int64_t>(worker.bytes_in_progress())};
        mpi.send(0, kProgress, m);
        last_progress = Clock::now();
      }
      if (me == 0 && progress.due()) {
        uint64_t shards = 0, bytes = 0;
        self.current = worker.bytes_in_progress();
        for (const auto& r : ranks) {
          shards += r.shards;
          bytes += r.bytes + r.current;
        }
        progress.print(progress_text("prep", found.size() + shards, plan.shards.size(), found.size(), bytes,
                                     pending_bytes, seconds_since(work_start)));
      }
      if (no_more && !worker.busy()) {
        if (me != 0 && !sent_final) {
          std::vector<int64_t> m = {static_cast<int64_t>(self.shards), static_cast<int64_t>(self.bytes),
                                    static_cast<int64_t>(self.busy_seconds * 1e3)};
          const auto h = pack_string(host);
          m.insert(m.end(), h.begin(), h.end());
          mpi.send(0, kFinal, m);
          sent_final = true;
          break;
        }
        if (me == 0 && finals == world - 1) break;
      }
      if (!active) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    {
      std::error_code ec;
      std::filesystem::remove_all(ctx.tmp_dir, ec);
    }
    if (me != 0) return std::nullopt;

    progress.finish();
    const double wall = seconds_since(work_start);
    PrepSummary summary = assemble_shards(options.output_prefix, plan, all_manifests(options.output_prefix, plan));
    remove_stale_tmp_dirs(options.output_prefix, true);
    summary.seconds = seconds_since(start);
    print_rank_report(ranks, wall, out);
    return summary;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmforge prep: error: rank %d of %d (%s): %s\n", me, world, host.c_str(), e.what());
    std::fflush(stderr);
    mpi.abort(1);
  }
}

}  // namespace

std::optional<dist::RankInfo> sharded_mode(const DistributedOptions& options) {
  if (options.claim) {
    // Claimers have no rank: launcher variables (a Slurm array, mpirun) only started them.
    if (options.rank.rank >= 0 || options.rank.world_size >= 0)
      throw Error("--claim takes no --rank/--world-size: claimers share out the shards by claiming them");
    return dist::RankInfo{};
  }
  const dist::RankInfo info = dist::discover_rank(options.rank);
  if (info.use_mpi || info.world_size > 1 || info.source == dist::RankSource::Flags || options.shard_bytes > 0)
    return info;
  return std::nullopt;
}

std::optional<PrepSummary> run_sharded_prep(const PrepOptions& options, const DistributedOptions& distributed,
                                            const dist::RankInfo& rank, std::ostream& out) {
  check_common(options);
  const uint64_t shard_bytes = distributed.shard_bytes ? distributed.shard_bytes : kDefaultShardBytes;
  create_output_dir(options.output_prefix);
  if (distributed.claim) return run_claim_prep(options, shard_bytes, distributed.claim_lease_seconds, out);
  if (rank.use_mpi) return run_mpi(options, shard_bytes, out);
  return run_static(options, shard_bytes, rank, out);
}

}  // namespace lmforge::prep
