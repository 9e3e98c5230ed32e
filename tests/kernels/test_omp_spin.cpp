// defines: the tests of use_short_omp_spin(): with no wait policy set the program restarts with GOMP_SPINCOUNT set
//          (libgomp reads it only when loaded), and a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cpu/omp_spin.h"

namespace lmforge::kernels::cpu {
namespace {

// Where the restarted test process writes what it found: run as a child of the tests below only.
constexpr const char* kProbeFile = "LMFORGE_OMP_SPIN_PROBE";

// The restarted image: writes GOMP_SPINCOUNT as it finds it (or "unset").
TEST(OmpSpin, Probe) {
  const char* out = std::getenv(kProbeFile);
  if (out == nullptr) GTEST_SKIP() << "run by the tests below in a restarted child";
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::string comm;  // the process name ps, pkill and the rank-finding tests see
  std::getline(std::ifstream("/proc/self/comm"), comm);
  std::ofstream(out) << (spin ? spin : "unset") << " " << comm;
}

// In a child process: the environment set as given, then use_short_omp_spin() with arguments that run only the
// probe above if the program restarts; without a restart the child writes "no restart" itself. Returns the file.
std::string run_child(const char* wait_policy, const char* spin_count) {
  char path[] = "/tmp/lmforge_omp_spin_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  close(fd);
  const pid_t pid = fork();
  if (pid == 0) {
    ::setenv(kProbeFile, path, 1);
    if (wait_policy) ::setenv("OMP_WAIT_POLICY", wait_policy, 1);
    else ::unsetenv("OMP_WAIT_POLICY");
    if (spin_count) ::setenv("GOMP_SPINCOUNT", spin_count, 1);
    else ::unsetenv("GOMP_SPINCOUNT");
    char self[] = "kernels_test_omp_spin", filter[] = "--gtest_filter=OmpSpin.Probe";
    char* argv[] = {self, filter, nullptr};
    use_short_omp_spin(argv);
    std::ofstream(path) << "no restart";
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::stringstream got;
  got << std::ifstream(path).rdbuf();
  std::remove(path);
  return got.str();
}

// The restarted image keeps the program's name (exec'ing /proc/self/exe itself named it "exe", and the pipeline
// fault test then found no lmforge ranks to kill).
TEST(OmpSpin, RestartsWithShortSpinWhenNoPolicyIsSetKeepingTheProgramsName) {
  const std::string name = std::string("kernels_test_omp_spin").substr(0, 15);  // comm: 15 characters at most
  EXPECT_EQ(run_child(nullptr, nullptr), std::string(kOmpSpinCount) + " " + name);
}

TEST(OmpSpin, LeavesAUsersChoiceAlone) {
  EXPECT_EQ(run_child("active", nullptr), "no restart");
  EXPECT_EQ(run_child(nullptr, "300000"), "no restart");
}

}  // namespace
}  // namespace lmforge::kernels::cpu
