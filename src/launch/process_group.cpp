// defines: run_process_group()
//
// Signals are blocked in this process while the group runs and taken with sigtimedwait, so no handler (and no global
// flag) is needed; each child unblocks them again before exec.
#include "launch/process_group.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>

#include "util/error.h"

namespace lmforge::launch {
namespace {

using Clock = std::chrono::steady_clock;

int status_of(int wstatus) { return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus); }

std::string describe(int status) {
  if (status > 128) return "was ended by signal " + std::to_string(status - 128) + " (" + strsignal(status - 128) + ")";
  return "exited with status " + std::to_string(status);
}

}  // namespace

int run_process_group(const std::vector<Process>& processes, std::ostream& log, std::chrono::milliseconds grace) {
  sigset_t watched, previous;
  sigemptyset(&watched);
  sigaddset(&watched, SIGCHLD);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGTERM);
  sigprocmask(SIG_BLOCK, &watched, &previous);
  std::map<pid_t, size_t> running;  // pid → index
  auto signal_all = [&](int sig) {
    for (const auto& [pid, index] : running) ::kill(pid, sig);
  };
  for (size_t i = 0; i < processes.size(); i++) {
    const Process& p = processes[i];
    std::vector<char*> argv;
    for (const auto& a : p.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string reason = std::strerror(errno);
      signal_all(SIGTERM);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      throw Error("cannot start " + p.name + ": fork: " + reason);
    }
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      for (const auto& [k, v] : p.env) ::setenv(k.c_str(), v.c_str(), 1);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "lmforge launch: error: cannot run %s for %s: %s\n", argv[0], p.name.c_str(),
                   std::strerror(errno));
      ::_exit(127);
    }
    running[pid] = i;
  }
  int result = 0;
  Clock::time_point kill_at = Clock::time_point::max();
  while (!running.empty()) {
    // Reap whatever ended.
    int wstatus = 0;
    pid_t pid;
    while (!running.empty() && (pid = ::waitpid(-1, &wstatus, WNOHANG)) > 0) {
      auto it = running.find(pid);
      if (it == running.end()) continue;
      const size_t index = it->second;
      running.erase(it);
      const int status = status_of(wstatus);
      if (status != 0 && result == 0) {
        result = status;
        log << "lmforge launch: " << processes[index].name << " " << describe(status);
        if (!running.empty()) log << "; ending the other " << running.size() << " with it";
        log << std::endl;
        signal_all(SIGTERM);
        kill_at = Clock::now() + grace;
      }
    }
    if (running.empty()) break;
    if (Clock::now() >= kill_at) {
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }
    timespec wait{0, 100 * 1000 * 1000};
    const int sig = ::sigtimedwait(&watched, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      log << "lmforge launch: " << strsignal(sig) << " received; passing it on to " << running.size()
          << (running.size() == 1 ? " process" : " processes") << std::endl;
      signal_all(sig);
      if (result == 0) result = 128 + sig;
      if (kill_at == Clock::time_point::max()) kill_at = Clock::now() + grace;
    }
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace lmforge::launch
