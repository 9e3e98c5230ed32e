// defines: tests of WriterLock: a second writer fails naming the holder's host and pid, a holder killed with
//          SIGKILL on this machine is taken over at once, a holder elsewhere only after its lease, a released lock
//          is free at once, and a holder that lost its lock learns it before publishing
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "data/lease.h"
#include "data/writer_lock.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using lmforge::Error;
using lmforge::data::WriterLock;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

std::string error_of_lock(const std::string& base, double lease = 60) {
  try {
    WriterLock lock(base, "output prefix X", lease);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void set_mtime_ago(const std::string& path, double seconds) {
  struct timespec times[2] = {{0, UTIME_OMIT}, {time(nullptr) - static_cast<time_t>(seconds), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// A child process that takes the lock, tells the parent through a pipe, then waits to be killed.
pid_t child_holding(const std::string& base) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    WriterLock lock(base, "output prefix X", 60);
    (void)!::write(fds[1], "x", 1);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  char c;
  EXPECT_EQ(::read(fds[0], &c, 1), 1);
  ::close(fds[0]);
  return pid;
}

TEST(WriterLock, SecondWriterFailsNamingTheHoldersHostAndPid) {
  TempDir dir;
  const pid_t holder = child_holding(dir.file(".out.lock"));
  const std::string error = error_of_lock(dir.file(".out.lock"));
  EXPECT_NE(error.find("output prefix X is locked by another lmforge process: host " + lmforge::data::host_name() +
                       " pid " + std::to_string(holder)),
            std::string::npos)
      << error;
  ::kill(holder, SIGTERM);
  ::waitpid(holder, nullptr, 0);
}

TEST(WriterLock, HolderKilledOnThisMachineIsTakenOverAtOnce) {
  TempDir dir;
  const pid_t holder = child_holding(dir.file(".out.lock"));
  ::kill(holder, SIGKILL);  // no release: its lock file stays with a fresh heartbeat
  ::waitpid(holder, nullptr, 0);
  WriterLock lock(dir.file(".out.lock"), "output prefix X", 600);  // no waiting out the 600 s lease
  ASSERT_TRUE(lock.took_over().has_value());
  EXPECT_EQ(lock.took_over()->owner.pid, holder);
  EXPECT_EQ(lock.lock_file(), dir.file(".out.lock.1"));
}

TEST(WriterLock, HolderOnAnotherMachineIsTakenOverOnlyAfterItsLease) {
  TempDir dir;
  // A holder whose pid means nothing here (another boot id / PID namespace): only its heartbeat age counts.
  write_file(dir.file(".out.lock.0"), "otherhost 1 0123456789abcdef bootid-elsewhere:4026531836\n");
  const std::string error = error_of_lock(dir.file(".out.lock"), 30);
  EXPECT_NE(error.find("host otherhost pid 1"), std::string::npos) << error;
  EXPECT_NE(error.find("taken over once its heartbeat is 30 s old"), std::string::npos) << error;
  set_mtime_ago(dir.file(".out.lock.0"), 31);
  WriterLock lock(dir.file(".out.lock"), "output prefix X", 30);
  EXPECT_EQ(lock.took_over()->owner.host, "otherhost");
}

TEST(WriterLock, ReleasedLockIsFreeAtOnceAndEachRunIsANewGeneration) {
  TempDir dir;
  { WriterLock a(dir.file(".out.lock"), "output prefix X", 600); }
  { WriterLock b(dir.file(".out.lock"), "output prefix X", 600); }
  WriterLock c(dir.file(".out.lock"), "output prefix X", 600);
  EXPECT_EQ(c.lock_file(), dir.file(".out.lock.2"));
  EXPECT_NE(error_of_lock(dir.file(".out.lock")), "");  // held by this very process: still refused
}

TEST(WriterLock, HolderThatLostItsLockLearnsItBeforePublishing) {
  TempDir dir;
  WriterLock slow(dir.file(".out.lock"), "output prefix X", 30);
  slow.check_held();
  // As if this process had been stopped for longer than the lease and another machine took over.
  write_file(dir.file(".out.lock.1"), "otherhost 7 fedcba9876543210\n");
  try {
    slow.check_held();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost its lock to host otherhost pid 7"), std::string::npos) << e.what();
  }
}

TEST(WriterLock, OutputPrefixLockIsAHiddenFileBesideTheOutputs) {
  EXPECT_EQ(lmforge::data::output_prefix_lock_base("a/b/out"), "a/b/.out.lock");
  EXPECT_EQ(lmforge::data::output_prefix_lock_base("out"), ".out.lock");
}

}  // namespace
