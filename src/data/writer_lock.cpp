// defines: WriterLock, output_prefix_lock_base()
#include "data/writer_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "data/file_util.h"
#include "util/error.h"

namespace lmforge::data {
namespace {

std::string describe_holder(const LeaseState& s) {
  char age[32];
  std::snprintf(age, sizeof age, "%.0f", s.age_seconds);
  return "host " + s.owner.host + " pid " + std::to_string(s.owner.pid) + " (last heartbeat " + age + " s ago)";
}

// The clock probe exists only while the lock is taken or checked, so a killed process leaves at most one.
std::string probe_path(const std::string& lock_base, const LeaseOwner& owner) {
  return lock_base + ".probe-" + owner.host + "-" + owner.token;
}

}  // namespace

std::string output_prefix_lock_base(const std::string& output_prefix) {
  const std::filesystem::path p(output_prefix);
  const std::string dir = p.parent_path().string();
  return (dir.empty() ? "" : dir + "/") + "." + p.filename().string() + ".lock";
}

WriterLock::WriterLock(const std::string& lock_base, const std::string& target, double lease_seconds)
    : target_(target), lock_base_(lock_base) {
  const LeaseOwner owner = this_process_owner();
  ServerClock clock(probe_path(lock_base, owner));
  for (int attempt = 0; attempt < 3 && !lease_; ++attempt) {
    std::optional<LeaseState> seen;
    lease_ = Lease::try_acquire(lock_base, lease_seconds, clock, owner, &seen);
    if (lease_ || !seen) continue;  // no holder seen: another process released or raced; try again
    // A holder on this machine whose process is gone (kill -9, crash) need not be waited for.
    if (owner_is_dead(seen->owner)) {
      lease_ = Lease::try_acquire(lock_base, -1, clock, owner, &seen);
      if (lease_ || !seen) continue;
    }
    throw Error(target_ + " is locked by another lmforge process: " + describe_holder(*seen) + ", lock file " +
                lease_file(lock_base, seen->generation) +
                ". Two writers would mix their files; wait for it to finish. If that process is gone on another "
                "machine, the lock is taken over once its heartbeat is " +
                std::to_string(static_cast<long>(lease_seconds)) + " s old");
  }
  if (!lease_) throw Error(target_ + ": could not take the lock " + lock_base + " (other processes kept racing for it)");
  const double interval = std::max(0.05, lease_seconds / 4);
  heartbeat_ = std::thread([this, interval] { heartbeat_loop(interval); });
}

void WriterLock::heartbeat_loop(double interval_seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto interval = std::chrono::duration<double>(interval_seconds);
  while (!wake_.wait_for(lock, interval, [this] { return stop_; })) {
    try {
      if (!lease_->heartbeat()) lost_ = true;
    } catch (const Error&) {
      // A failed touch (file server unreachable for a moment) is retried at the next beat; check_held() decides.
    }
  }
}

void WriterLock::check_held() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!lost_ && lease_->heartbeat()) return;
  lost_ = true;
  std::string holder = "another process";
  ServerClock clock(probe_path(lock_base_, this_process_owner()));
  if (auto now = read_lease(lock_base_, clock)) holder = describe_holder(*now);
  throw Error(target_ + ": this process lost its lock to " + holder +
              " (it was stopped or cut off longer than the lock's lease); nothing more is written");
}

WriterLock::~WriterLock() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  // Released: an mtime at the epoch reads as expired to every process, so the next one takes over at once.
  if (!lost_ && lease_ && lease_->held()) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
    ::utimensat(AT_FDCWD, lease_->path().c_str(), times, 0);
  }
}

}  // namespace lmforge::data
