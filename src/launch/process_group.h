// defines: Process, run_process_group(): start several processes, wait for all, and end them all when one fails
//          (lmforge launch's ranks, the G ranks of fairseq's --distributed-gpus)
#pragma once
#include <chrono>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace lmforge::launch {

struct Process {
  std::vector<std::string> argv;                            // argv[0] is looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;     // set on top of this process's environment
  std::string name;                                         // for messages ("rank 3", "host node2")
};

// Starts every process (each inheriting stdin/stdout/stderr) and waits. The first one to fail (a non-zero exit or a
// signal) ends the others: SIGTERM, then SIGKILL after `grace`; `log` hears which one failed. SIGINT and SIGTERM sent
// to this process are passed on to the group. Returns 0 when every process exited 0, else the first failure's exit
// status (128 + the signal when a signal ended it).
int run_process_group(const std::vector<Process>& processes, std::ostream& log,
                      std::chrono::milliseconds grace = std::chrono::seconds(10));

}  // namespace lmforge::launch
