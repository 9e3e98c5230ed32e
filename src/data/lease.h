// defines: ServerClock (the shared file system's clock, read through a probe file), Lease (an exclusive claim on
//          a name with heartbeats and takeover after a lease), commit_no_clobber() (publish a finished file
//          without ever replacing one already there), LeaseHeartbeat (a thread refreshing a lease while work runs)
//
// Only operations that are atomic on every POSIX file system that shares a directory between hosts (local disks,
// NFSv3/v4, Lustre, GPFS, CephFS) are used: link() of a fully written temporary onto the final name (fails with
// EEXIST when the name exists: the classic NFS-safe exclusive create, which also means a claim file is never seen
// half-written), stat/fstat, and utimensat(UTIME_NOW), which an NFS server stamps with its own clock. FUSE bucket
// mounts (gcsfuse, s3fs) do not give atomic link/rename or exclusive create; on_fuse() recognizes them.
//
// A lease named B is a series of generation files B.0, B.1, …; the newest one holds the lease. Its holder
// refreshes (touches) it as a heartbeat. Another process takes the lease over by creating the next generation
// exclusively, only when the newest one's mtime is more than the lease older than a probe file it has just
// touched: both times come from the file server's clock, so clocks skewed between client hosts do not matter.
// Creating generation g+1 can succeed for one process only, so two processes judging the same claim stale cannot
// both take it over, and the old holder learns it lost by seeing g+1 (never by a name being reused).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace lmforge::data {

// Who holds a lease. `token` is random per process: hosts in separate PID namespaces or containers can share a
// host name and pid, the token still tells them apart. `process_space` names the PID space the pid belongs to
// (the kernel's boot id and the PID-namespace inode): two owners with the same process_space can check each
// other's pid with kill(pid, 0); with different ones (another machine, container or boot) a pid says nothing.
struct LeaseOwner {
  std::string host;
  long pid = 0;
  std::string token;
  std::string process_space;  // empty when unknown (and in files written before it existed)
  std::string text() const;   // "host pid token [process_space]"
};

// A fresh owner for this process: host_name(), getpid(), 16 random hex digits, this_process_space().
LeaseOwner this_process_owner();
// "<boot id>:<pid namespace inode>" from /proc, or "" when /proc does not say.
std::string this_process_space();
// True only when `owner` is known to be gone: same process space as this process and its pid no longer exists
// or is a zombie (exited, not yet reaped).
bool owner_is_dead(const LeaseOwner& owner);
// gethostname(), or "unknown".
std::string host_name();

// The file server's "now": touches a probe file of this process and reads its mtime back.
class ServerClock {
 public:
  explicit ServerClock(std::string probe_path);  // creates the probe (Error naming the path when it cannot)
  ~ServerClock();                                // removes it
  ServerClock(const ServerClock&) = delete;
  ServerClock& operator=(const ServerClock&) = delete;
  double now();  // seconds since the epoch, by the server's clock
  const std::string& probe_path() const { return probe_; }

 private:
  std::string probe_;
};

// The newest generation of a lease as seen now.
struct LeaseState {
  uint32_t generation = 0;
  LeaseOwner owner;
  double age_seconds = 0;  // server clock minus the generation file's mtime (its last heartbeat)
};

// std::nullopt when no generation file of `base` exists.
std::optional<LeaseState> read_lease(const std::string& base, ServerClock& clock);
// The same with ages judged by `now` (seconds since the epoch): a reader without write access, which cannot keep a
// probe, judges by its own clock.
std::optional<LeaseState> read_lease(const std::string& base, const std::function<double()>& now);

class Lease {
 public:
  // Takes the lease `base` for `owner`: creates B.0 when there is none, or B.<g+1> when generation g's heartbeat
  // is older than `lease_seconds`. std::nullopt when a live holder has it or another process won the race; then
  // `seen` (if given) tells who holds it. Errors (permissions, missing directory) name the file and reason.
  static std::optional<Lease> try_acquire(const std::string& base, double lease_seconds, ServerClock& clock,
                                          const LeaseOwner& owner, std::optional<LeaseState>* seen = nullptr);

  // Touches the generation file (the heartbeat). False when the lease was lost: a newer generation exists (it was
  // taken over while this process was stopped or too slow) or the file is gone.
  bool heartbeat();
  // The same check without touching.
  bool held() const;

  uint32_t generation() const { return generation_; }
  // The lease taken over, if this one was: the previous holder and how old its heartbeat was.
  const std::optional<LeaseState>& took_over() const { return took_over_; }
  const std::string& path() const { return path_; }

 private:
  Lease(std::string base, uint32_t generation, std::optional<LeaseState> took_over);
  std::string base_, path_;
  uint32_t generation_ = 0;
  std::optional<LeaseState> took_over_;
};

// Heartbeats `lease` from a thread every quarter of the lease while it lives (a unit of work is made under it).
class LeaseHeartbeat {
 public:
  LeaseHeartbeat(Lease& lease, double lease_seconds)
      : thread_([this, &lease, lease_seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_) {
            cv_.wait_for(lock, std::chrono::duration<double>(lease_seconds / 4));
            if (!stop_) lease.heartbeat();
          }
        }) {}
  ~LeaseHeartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  LeaseHeartbeat(const LeaseHeartbeat&) = delete;
  LeaseHeartbeat& operator=(const LeaseHeartbeat&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// "<base>.<generation>"
std::string lease_file(const std::string& base, uint32_t generation);

enum class CommitResult { Committed, AlreadyThere };

// Publishes the finished file `from` under `to` with link() (then removes `from`), so an existing `to` is never
// replaced: AlreadyThere (and `from` kept) when another process published first. Errors name both paths.
CommitResult commit_no_clobber(const std::string& from, const std::string& to);

// The claim directory `dir` of a format whose claimers share out fixed units of work (NVIDIA HDF5 shards, ELECTRA
// TFRecord jobs): created, refused on FUSE, and joined: the first process records `plan` in dir/plan.txt (link of
// a temporary, so exactly one wins), the others must have made the same plan or are refused (Error naming the file
// and showing the recorded plan; `outputs` names what a differing plan would write). Returns this process's tag
// "<host>-<pid>-<token>" for its temporaries and probe file.
std::string join_claim_plan(const std::string& dir, const std::string& plan, const std::string& outputs);

// True when `path` is on a FUSE file system (statfs magic 0x65735546: gcsfuse, s3fs, rclone mount, …).
bool on_fuse(const std::string& path);

}  // namespace lmforge::data
