// defines: print_claim_status() (`lmforge inspect <prefix>.shards`)
//
// Reads only what claimers publish anyway (manifests, shard datasets, lease files, status files). Ages are judged by
// the file server's clock through a probe file, as the claimers do, so that what it calls live or expired is what
// they would; where it cannot write (a read-only mount, no permission) it writes nothing and judges by this
// machine's clock instead, and says so. Shards are validated as `lmforge merge --shards` validates them.
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>

#include "data/file_util.h"
#include "prep/claim_prep.h"
#include "data/lease.h"
#include "prep/shard_assembly.h"
#include "prep/shard_plan.h"
#include "util/error.h"
#include "util/progress.h"

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

struct SeenClaimer {
  ClaimerStatus status;
  double age = 0;  // seconds since its last heartbeat (server clock)
};

std::vector<SeenClaimer> read_claimers(const std::string& claims, const std::function<double()>& now) {
  std::vector<SeenClaimer> out;
  std::error_code ec;
  simdjson::dom::parser parser;
  for (const auto& e : std::filesystem::directory_iterator(claims, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("claimer-", 0) != 0 || name.size() < 5 || name.substr(name.size() - 5) != ".json") continue;
    struct stat st {};
    std::string text;
    try {
      data::UniqueFd fd = data::open_read(e.path().string());
      if (::fstat(fd.get(), &st) != 0) continue;
      char buf[2048];
      text.assign(buf, data::read_some(fd.get(), buf, sizeof buf, e.path().string()));
    } catch (const Error&) {
      continue;  // the claimer ended between listing and reading
    }
    simdjson::dom::element j;
    if (parser.parse(text).get(j)) continue;
    SeenClaimer c;
    std::string_view s;
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (!j["host"].get(s)) c.status.host = std::string(s);
    if (!j["token"].get(s)) c.status.token = std::string(s);
    if (!j["pid"].get(i)) c.status.pid = static_cast<long>(i);
    if (!j["lease_seconds"].get(d)) c.status.lease_seconds = d;
    if (!j["shards_done"].get(u)) c.status.shards_done = u;
    if (!j["bytes_done"].get(u)) c.status.bytes_done = u;
    if (!j["busy_seconds"].get(d)) c.status.busy_seconds = d;
    if (!j["shard"].get(i)) c.status.shard = i;
    if (!j["shard_bytes_done"].get(u)) c.status.shard_bytes_done = u;
    c.age = now() - (double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const SeenClaimer& a, const SeenClaimer& b) { return a.age < b.age; });
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

void print_claim_status(const std::string& shards_dir_in, std::ostream& out) {
  std::string dir = shards_dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string suffix = ".shards";
  if (dir.size() <= suffix.size() || dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw Error(dir + ": not a shard directory (<output-prefix>.shards)");
  const std::string prefix = dir.substr(0, dir.size() - suffix.size());
  const ShardPlan plan = read_plan(prefix);
  const std::string claims = dir + "/claims";
  // The file server's clock when a probe can be written there; else this machine's (nothing is written).
  std::optional<ServerClock> server;
  std::string why_local;
  if (::access(claims.c_str(), W_OK) == 0) {
    try {
      server.emplace(claims + "/probe-inspect-" + host_name() + "-" + std::to_string(::getpid()));
    } catch (const Error& e) {
      why_local = e.what();
    }
  } else {
    why_local = errno == ENOENT ? "there is no " + claims + " (not a --claim run)"
                                : claims + " is not writable here (" + std::strerror(errno) + ")";
  }
  const std::string clock_line =
      server ? "the file server's clock (through a probe file in " + claims + ")"
             : "this machine's clock, since " + why_local + ": no probe of the file server's clock is written, so "
               "the ages are off by any skew between this machine's clock and the file server's";
  const std::function<double()> now = [&server] {
    if (server) return server->now();
    struct timespec ts {};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  };

  const std::vector<SeenClaimer> claimers = read_claimers(claims, now);
  std::map<std::string, double> lease_of;  // token → that claimer's lease
  for (const auto& c : claimers) lease_of[c.status.token] = c.status.lease_seconds;
  uint64_t done = 0, done_bytes = 0, claimed = 0, expired = 0, free = 0;
  std::vector<std::string> damaged;  // "shard-NNNNNN: why" of shards with a manifest that merge would not take
  for (const Shard& s : plan.shards) {
    std::string problem;
    if (check_shard(prefix, plan, s.index, problem)) {
      ++done;
      done_bytes += s.piece.size;
      continue;
    }
    if (!problem.empty()) {
      damaged.push_back(shard_name(s.index) + ": " + problem);
      continue;
    }
    const auto lease = read_lease(claims + "/" + shard_name(s.index), now);
    if (!lease) {
      ++free;
      continue;
    }
    const auto it = lease_of.find(lease->owner.token);
    ++claimed;
    if (lease->age_seconds > (it == lease_of.end() ? kDefaultClaimLeaseSeconds : it->second)) ++expired;
  }
  out << "shard directory: " << dir << " (plan " << plan.id << ", " << plan.shards.size() << " shards, "
      << fmt("%.1f MB", plan.total_bytes / 1e6) << ")\n";
  out << "shards:          done " << format_count(done) << " (" << fmt("%.1f MB", done_bytes / 1e6) << "), claimed "
      << format_count(claimed);
  if (expired) out << " (" << expired << " with an expired lease: free to take over)";
  out << ", free " << format_count(free);
  if (!damaged.empty())
    out << ", damaged " << format_count(damaged.size()) << " (a manifest that `lmforge merge --shards` would not "
        << "take: not counted as done)";
  out << "\n";
  for (const auto& d : damaged) out << "  " << d << "\n";
  out << "clock:           heartbeat ages judged by " << clock_line << "\n";

  double rate = 0;
  size_t live = 0;
  for (const auto& c : claimers) live += c.age <= c.status.lease_seconds;
  out << "claimers:        " << live << " live, " << claimers.size() - live << " without a heartbeat for longer than "
      << "their lease (stopped or dead)\n";
  for (const auto& c : claimers) {
    const ClaimerStatus& s = c.status;
    const double speed = s.busy_seconds > 0 ? s.bytes_done / s.busy_seconds : 0;
    out << "  " << s.host << " pid " << s.pid << " (token " << s.token << "): ";
    if (c.age <= s.lease_seconds) {
      rate += speed;
      out << "heartbeat " << fmt("%.1f", std::max(0.0, c.age)) << " s ago";
    } else {
      out << "no heartbeat for " << fmt("%.1f", c.age) << " s (lease " << fmt("%.0f", s.lease_seconds) << " s)";
    }
    if (s.shard >= 0 && static_cast<size_t>(s.shard) < plan.shards.size()) {
      const uint64_t size = plan.shards[static_cast<size_t>(s.shard)].piece.size;
      out << ", on " << shard_name(static_cast<uint32_t>(s.shard)) << " ("
          << (size ? 100 * std::min(s.shard_bytes_done, size) / size : 100) << "%)";
    }
    out << ", committed " << format_count(s.shards_done) << " shards, " << fmt("%.1f MB", s.bytes_done / 1e6) << ", "
        << fmt("%.2f MB/s", speed / 1e6) << "\n";
  }
  const uint64_t left = plan.total_bytes - done_bytes;
  out << "throughput:      " << fmt("%.2f MB/s", rate / 1e6) << " (live claimers)";
  if (left == 0)
    out << "; nothing left\n";
  else if (rate > 0)
    out << "; ETA " << format_duration(left / rate) << " for " << fmt("%.1f MB", left / 1e6) << "\n";
  else
    out << "; no ETA: no live claimer has committed a shard yet\n";
  const std::string marker = dir + "/assembled.json";
  if (::access(marker.c_str(), F_OK) != 0) {
    out << "assembled:       no\n";
  } else if (const std::string problem = assembled_problem(prefix, plan); !problem.empty()) {
    out << "assembled:       no: " << marker << " says so, but " << problem << " (rerun the --claim command, or "
        << "`lmforge merge --shards " << prefix << "`, to assemble it again)\n";
  } else {
    out << "assembled:       yes, " << prefix << "_<key>_" << plan.level << ".bin/.idx\n";
  }
}

}  // namespace lmforge::prep
