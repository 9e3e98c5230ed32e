// The claim/lease primitive of claim mode: exclusive creation (one winner among racing threads), heartbeat age
// read from mtimes against a freshly touched probe, takeover only after the lease (one winner again, and the old
// holder learns it lost), and a commit that never replaces a file already published.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "data/lease.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using namespace lmforge::data;
using lmforge::testing::read_file;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

// Moves a file's mtime `seconds` into the past, as if its holder had stopped heartbeating that long ago.
void age_file(const std::string& path, double seconds) {
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  struct timespec times[2];
  times[0] = st.st_atim;
  times[1] = st.st_mtim;
  times[1].tv_sec -= static_cast<time_t>(seconds);
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

LeaseOwner owner(const std::string& token) { return LeaseOwner{"hostA", 42, token, ""}; }

TEST(Lease, ExclusiveCreateHasOneWinnerAndNamesTheHolder) {
  TempDir dir;
  ServerClock clock(dir.file("probe"));
  auto a = Lease::try_acquire(dir.file("shard-1"), 10, clock, owner("aaaa"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->generation(), 0u);
  EXPECT_FALSE(a->took_over());
  EXPECT_EQ(read_file(dir.file("shard-1.0")), "hostA 42 aaaa\n");
  // The same host and pid (another PID namespace) with another token does not get it, and sees the holder.
  std::optional<LeaseState> seen;
  EXPECT_FALSE(Lease::try_acquire(dir.file("shard-1"), 10, clock, owner("bbbb"), &seen));
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->owner.token, "aaaa");
  EXPECT_EQ(seen->owner.host, "hostA");
  EXPECT_EQ(seen->owner.pid, 42);
  EXPECT_TRUE(a->held());
}

TEST(Lease, RacingThreadsGetExactlyOneLeaseEachTime) {
  TempDir dir;
  for (int round = 0; round < 20; ++round) {
    const std::string base = dir.file("race-" + std::to_string(round));
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        ServerClock clock(dir.file("probe-" + std::to_string(round) + "-" + std::to_string(t)));
        if (Lease::try_acquire(base, 10, clock, owner("t" + std::to_string(t)))) ++winners;
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(winners.load(), 1) << base;
  }
}

TEST(Lease, HeartbeatAgeIsMtimeAgainstTheProbe) {
  TempDir dir;
  ServerClock clock(dir.file("probe"));
  auto a = Lease::try_acquire(dir.file("s"), 10, clock, owner("aaaa"));
  ASSERT_TRUE(a);
  age_file(a->path(), 30);
  auto state = read_lease(dir.file("s"), clock);
  ASSERT_TRUE(state);
  EXPECT_GT(state->age_seconds, 29.0);
  EXPECT_LT(state->age_seconds, 35.0);
  EXPECT_TRUE(a->heartbeat());
  state = read_lease(dir.file("s"), clock);
  EXPECT_GE(state->age_seconds, 0.0);
  EXPECT_LT(state->age_seconds, 2.0);
  EXPECT_FALSE(read_lease(dir.file("none"), clock));
}

TEST(Lease, TakeoverOnlyAfterTheLeaseAndTheOldHolderLearnsItLost) {
  TempDir dir;
  ServerClock clock(dir.file("probe"));
  auto a = Lease::try_acquire(dir.file("s"), 10, clock, owner("aaaa"));
  ASSERT_TRUE(a);
  age_file(a->path(), 5);  // within the lease: still a live holder
  EXPECT_FALSE(Lease::try_acquire(dir.file("s"), 10, clock, owner("bbbb")));
  age_file(a->path(), 20);  // 25 s without a heartbeat: past the lease
  auto b = Lease::try_acquire(dir.file("s"), 10, clock, owner("bbbb"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->generation(), 1u);
  ASSERT_TRUE(b->took_over());
  EXPECT_EQ(b->took_over()->owner.token, "aaaa");
  EXPECT_GT(b->took_over()->age_seconds, 24.0);
  // The stopped holder resumes: its heartbeat and check both say the lease is gone; the new holder's stand.
  EXPECT_FALSE(a->held());
  EXPECT_FALSE(a->heartbeat());
  EXPECT_TRUE(b->held());
  EXPECT_TRUE(b->heartbeat());
  auto state = read_lease(dir.file("s"), clock);
  ASSERT_TRUE(state);
  EXPECT_EQ(state->generation, 1u);
  EXPECT_EQ(state->owner.token, "bbbb");
}

TEST(Lease, RacingTakeoversHaveOneWinner) {
  TempDir dir;
  ServerClock clock0(dir.file("probe"));
  auto a = Lease::try_acquire(dir.file("s"), 1, clock0, owner("aaaa"));
  ASSERT_TRUE(a);
  age_file(a->path(), 100);
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      ServerClock clock(dir.file("probe-" + std::to_string(t)));
      auto l = Lease::try_acquire(dir.file("s"), 1, clock, owner("t" + std::to_string(t)));
      if (l) {
        EXPECT_EQ(l->generation(), 1u);
        ++winners;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST(Lease, CommitNeverReplacesAPublishedFile) {
  TempDir dir;
  write_file(dir.file("mine"), "first");
  EXPECT_EQ(commit_no_clobber(dir.file("mine"), dir.file("final")), CommitResult::Committed);
  EXPECT_FALSE(std::filesystem::exists(dir.file("mine")));
  write_file(dir.file("late"), "second");
  EXPECT_EQ(commit_no_clobber(dir.file("late"), dir.file("final")), CommitResult::AlreadyThere);
  EXPECT_EQ(read_file(dir.file("final")), "first");
  EXPECT_EQ(read_file(dir.file("late")), "second");  // kept: the caller decides what to do with it
  EXPECT_THROW(commit_no_clobber(dir.file("absent"), dir.file("other")), lmforge::Error);
}

// A holder that exited but was not reaped yet (a zombie: a SIGKILLed MPI rank whose launcher ended first, in a
// container whose init reaps late) is dead: it answers kill(pid, 0) but never renews its lease. Before, its lock
// was held until the lease ran out, so a resumed job on the same --save failed.
TEST(Lease, ZombieHolderIsDead) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  LeaseOwner owner = this_process_owner();
  owner.pid = child;
  bool dead = false;
  for (int i = 0; i < 200 && !dead; i++) {  // until the child has exited (it stays a zombie: nobody reaps it yet)
    dead = owner_is_dead(owner);
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(dead);
  EXPECT_EQ(::kill(child, 0), 0) << "the zombie still answers kill(0)";
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(owner_is_dead(owner));  // reaped: gone
  owner.pid = ::getpid();
  EXPECT_FALSE(owner_is_dead(owner));  // this process is alive
}

TEST(Lease, ErrorsNameThePath) {
  TempDir dir;
  try {
    ServerClock clock(dir.file("no/such/dir/probe"));
    FAIL() << "no error";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/probe"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(on_fuse(dir.path()));
}

}  // namespace
