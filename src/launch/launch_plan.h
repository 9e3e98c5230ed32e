// defines: LaunchOptions, plan_launch(), run_launch(): `lmforge launch`, DeepSpeed's launcher (deepspeed/launcher/
//          runner.py and launch.py) for lmforge commands
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "launch/process_group.h"
#include "launch/resources.h"

namespace lmforge::launch {

struct LaunchOptions {
  int num_nodes = -1, num_gpus = -1;  // -1: not given
  std::string hostfile = "/job/hostfile";  // DeepSpeed's default; a missing default means this machine alone
  bool hostfile_given = false;
  std::string include, exclude;
  std::string master_addr;  // "": 127.0.0.1 on one machine, else the first host
  int master_port = 29500;  // TORCH_DISTRIBUTED_DEFAULT_PORT
  std::string launcher = "pdsh";  // pdsh or ssh (one ssh per host), openmpi, slurm
  // Set by lmforge launch on each host of a multi-host job (DeepSpeed's launch.py): this host's index in world_info.
  int node_rank = -1;
  std::string world_info;
  std::vector<std::string> command;  // the lmforge command and its flags ("train", "gpt", ...)
};

// What a launch runs: the processes (ranks, or one ssh/mpirun/srun command per host or job) and a line saying so.
struct LaunchPlan {
  std::vector<Process> processes;
  std::string summary;
};

// `exe` is the lmforge executable to run (on every host, at the same path), `cwd` the directory the ranks run in.
// Errors (bad hostfile, include/exclude rules DeepSpeed refuses, several nodes without a hostfile, no command) are
// lmforge::Error.
LaunchPlan plan_launch(const LaunchOptions& options, const std::string& exe, const std::string& cwd);

// plan_launch, then run_process_group: the exit status of the job (the first failing rank's).
int run_launch(const LaunchOptions& options, std::ostream& log);

// `s` quoted for a POSIX shell (the remote side of ssh).
std::string shell_quote(const std::string& s);

}  // namespace lmforge::launch
