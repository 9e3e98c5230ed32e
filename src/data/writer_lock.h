// defines: WriterLock (one writer at a time for an output: a prep output prefix, a checkpoint directory) on the
//          lease of data/lease.h, the primitive claim mode's shard claims use too
//
// The lock is the lease "<dir>/.<name>.lock": generation files .<name>.lock.0, .1, … (see Lease). The holder
// heartbeats it from a thread every quarter of the lease. Another process gets it when:
//   - the holder released it (its generation file's mtime is set to the epoch, so it reads as expired);
//   - the holder is known dead: same machine and PID namespace (LeaseOwner::process_space) and its pid is gone,
//     as after kill -9 or a crash: taken over at once;
//   - the holder's heartbeat is older than the lease by the file server's clock (another machine that died or
//     a stopped process): taken over after the lease.
// Otherwise acquiring is an Error naming what is locked and the holder's host, pid and heartbeat age. A holder
// that was stopped past its lease and taken over learns it through check_held() before it publishes anything.
// Generation files stay (one small file per run that took the lock): removing them could let two processes
// hold it (a lease is found by its generation 0).
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "data/lease.h"

namespace lmforge::data {

constexpr double kDefaultWriterLockLeaseSeconds = 120;

class WriterLock {
 public:
  // Locks `target` (for messages: "output prefix out", "checkpoint directory ckpt") with the lease files
  // `lock_base`.N. Error when a live process holds it, naming target, host, pid and heartbeat age.
  WriterLock(const std::string& lock_base, const std::string& target,
             double lease_seconds = kDefaultWriterLockLeaseSeconds);
  ~WriterLock();  // stops the heartbeat and releases
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  // Error when the lock was taken over meanwhile (this process stopped longer than the lease), naming the new
  // holder: call before publishing results under the locked names.
  void check_held();
  // The holder this lock took over from (dead or expired), if any.
  const std::optional<LeaseState>& took_over() const { return lease_->took_over(); }
  const std::string& lock_file() const { return lease_->path(); }

 private:
  void heartbeat_loop(double interval_seconds);
  std::string target_, lock_base_;
  std::optional<Lease> lease_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool lost_ = false;
  std::thread heartbeat_;
};

// The lock base of a prep output prefix: "<dir>/.<name>.lock" for prefix "<dir>/<name>".
std::string output_prefix_lock_base(const std::string& output_prefix);

}  // namespace lmforge::data
