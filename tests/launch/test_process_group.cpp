// run_process_group(): every process runs; the first failure ends the rest and is the group's status.
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

#include "launch/process_group.h"

namespace {

using lmforge::launch::Process;
using lmforge::launch::run_process_group;

Process sh(const std::string& script, const std::string& name) { return Process{{"sh", "-c", script}, {}, name}; }

TEST(ProcessGroup, AllSucceedingIsZeroAndEnvironmentIsSet) {
  std::ostringstream log;
  Process p = sh("test \"$RANK\" = 3", "rank 3");
  p.env = {{"RANK", "3"}};
  EXPECT_EQ(run_process_group({p, sh("exit 0", "rank 1")}, log), 0) << log.str();
}

// The long-running processes exec their sleep, so the signal the group sends reaches the sleep itself: a shell
// ended while its `sleep` child ran left that child holding the test's output pipe, and ctest waited out the whole
// sleep (60 s) after the test had passed in a fraction of a second.
TEST(ProcessGroup, AFailingProcessEndsTheOthersWithItsStatus) {
  std::ostringstream log;
  const auto start = std::chrono::steady_clock::now();
  const int status = run_process_group({sh("exec sleep 60", "rank 0"), sh("sleep 0.2; exit 7", "rank 1")}, log);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status, 7);
  EXPECT_LT(seconds, 20.0);
  EXPECT_NE(log.str().find("rank 1 exited with status 7; ending the other 1 with it"), std::string::npos) << log.str();
}

TEST(ProcessGroup, AProcessThatIgnoresTermIsKilledAfterTheGrace) {
  std::ostringstream log;
  const int status = run_process_group({sh("trap '' TERM; exec sleep 30", "rank 0"), sh("exit 3", "rank 1")}, log,
                                       std::chrono::milliseconds(300));
  EXPECT_EQ(status, 3);
}

TEST(ProcessGroup, AMissingProgramIs127) {
  std::ostringstream log;
  EXPECT_EQ(run_process_group({Process{{"/nonexistent/program"}, {}, "rank 0"}}, log), 127);
}

}  // namespace
