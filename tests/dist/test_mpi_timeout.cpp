// defines: tests of the MPI communicator's timeout (--distributed-timeout-minutes under mpirun): with one rank
//          stopped (SIGSTOP), the other's barrier, all-reduce and recv end within the timeout with an Error naming
//          the operation (and the peer for a transfer) instead of hanging, without holding a core meanwhile
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "dist/communicator.h"
#include "dist/mpi_session.h"
#include "mpi_test_util.h"
#include "util/error.h"

namespace {

using lmforge::testing::mpirun_prefix;
using lmforge::testing::run_command;

double cpu_seconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Run by mpirun through the cases below (LMFORGE_MPI_TIMEOUT_CASE names the operation); skipped otherwise.
TEST(MpiTimeout, Worker) {
  const char* op = std::getenv("LMFORGE_MPI_TIMEOUT_CASE");
  if (!op) GTEST_SKIP() << "a rank of the MpiTimeout cases (started by them under mpirun)";
  lmforge::dist::MpiSession mpi;
  auto comm = lmforge::dist::make_mpi_communicator(std::chrono::milliseconds(2000));
  comm->barrier();  // every rank is up
  if (comm->rank() == 1) ::raise(SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  try {
    const std::string what = op;
    double x = 1;
    char byte = 0;
    if (what == "barrier") comm->barrier();
    if (what == "all-reduce") comm->all_reduce_sum(&x, 1);
    if (what == "recv") comm->recv(&byte, 1, 1);
    std::printf("rank 0: %s returned although rank 1 is stopped\n", op);
  } catch (const lmforge::Error& e) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank 0 ended after %.2f s, %.2f s of CPU: %s\n", wall, cpu_seconds() - c0, e.what());
    std::fflush(stdout);
    comm->abort("test", e.what(), 3);  // as lmforge train does: ends every rank, the stopped one too
  }
}

struct Outcome {
  int status;
  std::string output;
  double wall = -1, cpu = -1;
};

Outcome run_case(const std::string& op) {
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return {-1, "cannot find this test's executable", -1, -1};
  const auto r = run_command("timeout 60 " + mpirun_prefix(2) + "-x LMFORGE_MPI_TIMEOUT_CASE=" + op + " " +
                             std::string(exe, (size_t)n) + " --gtest_filter=MpiTimeout.Worker");
  Outcome o{r.status, r.output};
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("rank 0 ended after ([0-9.]+) s, ([0-9.]+) s of CPU"))) {
    o.wall = std::stod(m[1]);
    o.cpu = std::stod(m[2]);
  }
  return o;
}

void expect_timed_out(const Outcome& o, const std::string& message) {
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.status, 124) << "mpirun was still running after 60 s: " << o.output;
  EXPECT_NE(o.output.find(message), std::string::npos) << o.output;
  EXPECT_GE(o.wall, 1.9) << o.output;   // not before the timeout ...
  EXPECT_LE(o.wall, 10.0) << o.output;  // ... and not much after it
  EXPECT_LT(o.cpu, 0.5 * o.wall) << "the wait held a core: " << o.output;
  std::printf("[ timeout ] ended %.2f s after the stop (timeout 2 s), %.2f s of CPU\n", o.wall, o.cpu);
}

TEST(MpiTimeout, RecvFromAStoppedRankEndsWithinTheTimeoutNamingIt) {
  expect_timed_out(run_case("recv"),
                   "MPI recv: nothing from rank 1 within 0.0333333 min (2 s) (--distributed-timeout-minutes)");
}

TEST(MpiTimeout, CollectivesWithAStoppedRankEndWithinTheTimeout) {
  expect_timed_out(run_case("barrier"), "MPI barrier: nothing from rank 1 within");
  expect_timed_out(run_case("all-reduce"), "MPI all-reduce: nothing from rank 1 within");
}

}  // namespace
