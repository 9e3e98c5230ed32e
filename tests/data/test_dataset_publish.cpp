// defines: tests that overwriting a dataset never exposes a mix: the directory events of a finish() over an older
//          dataset (watched with inotify) never leave the final names holding the new .bin beside the old .idx or
//          the reverse; and a publisher SIGKILLed before each of its renames and unlinks in turn (stopped there
//          under ptrace) leaves, once the next reader has opened the dataset, the old dataset whole or the new one
//          whole, never a lone .bin
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <elf.h>
#endif

#include <filesystem>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "test_util.h"

namespace {

using lmforge::data::DType;
using lmforge::data::IndexedDatasetWriter;
using lmforge::testing::TempDir;

void write_dataset(const std::string& prefix, int32_t token) {
  IndexedDatasetWriter w(prefix, DType::Int32);
  const std::vector<int32_t> ids{token, token, token};
  w.add_sequence(ids);
  w.end_document();
  w.finish();
}

// The sequence of states the final names go through, from the directory's events: 'o' old, 'n' new, '-' none.
std::vector<std::string> states_while_overwriting(const TempDir& dir) {
  write_dataset(dir.file("d"), 1);
  const int fd = ::inotify_init1(IN_NONBLOCK);
  EXPECT_GE(fd, 0);
  ::inotify_add_watch(fd, dir.path().c_str(), IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE);
  write_dataset(dir.file("d"), 2);
  std::string state = "oo";  // .bin, .idx
  std::vector<std::string> states{state};
  alignas(inotify_event) char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    for (char* p = buf; p < buf + n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(p);
      const std::string name = e->len ? e->name : "";
      const int slot = name == "d.bin" ? 0 : name == "d.idx" ? 1 : -1;
      if (slot >= 0 && (e->mask & (IN_DELETE | IN_MOVED_FROM))) state[(size_t)slot] = '-';
      if (slot >= 0 && (e->mask & IN_MOVED_TO)) state[(size_t)slot] = 'n';
      if (slot >= 0) states.push_back(state);
      p += sizeof(inotify_event) + e->len;
    }
  }
  ::close(fd);
  return states;
}

TEST(DatasetPublish, OverwritingNeverPairsTheNewBinWithTheOldIdx) {
  TempDir dir;
  const std::vector<std::string> states = states_while_overwriting(dir);
  std::string seen;
  for (const auto& s : states) seen += s + " ";
  for (const auto& s : states) {
    EXPECT_NE(s, "no") << "new .bin beside the old .idx: " << seen;
    EXPECT_NE(s, "on") << "old .bin beside the new .idx: " << seen;
  }
  EXPECT_EQ(states.back(), "nn") << seen;
  auto ds = lmforge::data::IndexedDataset::open(dir.file("d"));
  std::vector<int32_t> out;
  ds->read_sequence(0, out);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 2, 2}));
}

// The syscall a tracee stopped at a syscall entry is making, or -1 where this test does not know the registers.
long syscall_at_entry(pid_t pid) {
#if defined(__x86_64__)
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) return -1;
  return static_cast<long>(regs.orig_rax);
#elif defined(__aarch64__)
  user_pt_regs regs{};
  iovec io{&regs, sizeof regs};
  if (::ptrace(PTRACE_GETREGSET, pid, reinterpret_cast<void*>(static_cast<uintptr_t>(NT_PRSTATUS)), &io) != 0)
    return -1;
  return static_cast<long>(regs.regs[8]);
#else
  (void)pid;
  return -1;
#endif
}

// Syscalls that change which file a name in the directory refers to.
bool changes_names(long nr) {
#ifdef SYS_rename
  if (nr == SYS_rename) return true;
#endif
#ifdef SYS_unlink
  if (nr == SYS_unlink) return true;
#endif
#ifdef SYS_link
  if (nr == SYS_link) return true;
#endif
  return nr == SYS_renameat || nr == SYS_renameat2 || nr == SYS_unlinkat || nr == SYS_linkat;
}

enum class PublishEnd { Killed, Finished, Untraceable };

// Publishes n.bin/n.idx over d.bin/d.idx in a child process traced with ptrace, which is SIGKILLed at the entry of
// its `k`-th name-changing syscall (before that syscall runs).
PublishEnd publish_killed_at(const TempDir& dir, int k) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(3);
    ::raise(SIGSTOP);
    try {
      lmforge::data::publish_dataset(dir.file("n.bin"), dir.file("n.idx"), dir.file("d.bin"), dir.file("d.idx"));
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFSTOPPED(status)) return PublishEnd::Untraceable;  // ptrace refused (a sandbox): the child exited 3
  const uintptr_t trace_options = PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL;
  ::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(trace_options));
  int seen = 0;
  bool entry = true;
  for (;;) {
    ::ptrace(PTRACE_SYSCALL, pid, nullptr, nullptr);
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0) << "the publish failed";
      return PublishEnd::Finished;
    }
    if (WIFSIGNALED(status)) return PublishEnd::Finished;
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != (SIGTRAP | 0x80)) continue;
    if (entry) {
      const long nr = syscall_at_entry(pid);
      if (nr < 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return PublishEnd::Untraceable;
      }
      if (changes_names(nr) && ++seen == k) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);  // reaped: recovery sees the pid gone
        return PublishEnd::Killed;
      }
    }
    entry = !entry;
  }
}

TEST(DatasetPublish, KilledBeforeEachRenameLeavesTheOldOrTheNewDatasetWhole) {
  bool killed_after_new_bin = false;
  for (int k = 1; k < 20; ++k) {
    TempDir dir;
    write_dataset(dir.file("d"), 1);  // the older dataset
    write_dataset(dir.file("n"), 2);  // the new one, standing in for a writer's temporaries
    const PublishEnd run = publish_killed_at(dir, k);
    if (run == PublishEnd::Untraceable) GTEST_SKIP() << "ptrace is not available here";
    if (run == PublishEnd::Killed && std::filesystem::exists(dir.file("d.bin")) &&
        !std::filesystem::exists(dir.file("d.idx")))
      killed_after_new_bin = true;
    // The next reader (training, inspect) opens the dataset: it must find one of the two whole.
    std::vector<int32_t> out;
    try {
      auto ds = lmforge::data::IndexedDataset::open(dir.file("d"));
      ASSERT_EQ(ds->sequence_count(), 1u);
      ds->read_sequence(0, out);
    } catch (const std::exception& e) {
      FAIL() << "killed before name change " << k << ": no dataset left: " << e.what();
    }
    EXPECT_TRUE(out == (std::vector<int32_t>{1, 1, 1}) || out == (std::vector<int32_t>{2, 2, 2}))
        << "killed before name change " << k;
    // What the next writer does first: an older pair left beside a whole new one is removed.
    lmforge::data::recover_interrupted_publish(dir.file("d"));
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos)
          << "killed before name change " << k << ": " << e.path() << " left behind";
    if (run == PublishEnd::Finished) {
      EXPECT_EQ(out, (std::vector<int32_t>{2, 2, 2}));
      break;
    }
  }
  EXPECT_TRUE(killed_after_new_bin) << "no kill fell between the new .bin and the new .idx";
}

}  // namespace
