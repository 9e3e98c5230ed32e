// defines: DistributedGpusPlan, plan_distributed_gpus(), run_distributed_gpus(): fairseq's --distributed-gpus G,
//          "this command starts G ranks" (fairseq spawns one process per GPU: ranks --distributed-rank .. +G-1)
#pragma once
#include <string>
#include <vector>

namespace lmforge::cli {

struct DistributedGpusPlan {
  int start_rank = 0, world_size = 0, gpus = 0;
  std::string init_method;  // the given one, or tcp://127.0.0.1:<free port> when none was given
};

// G ranks from one command: the world size (--distributed-world-size, default G), the first rank
// (--distributed-rank, default 0) and the rendezvous (--distributed-init-method, default a free local port when the
// command starts the whole world). Errors: G not dividing the world size, ranks past the world, several commands
// without an init method.
DistributedGpusPlan plan_distributed_gpus(int gpus, int rank, int world_size, const std::string& init_method);

// Runs this command's own arguments (`args`, argv without the program name) once per rank with --distributed-rank,
// --distributed-world-size, --distributed-init-method set and --distributed-gpus 1 appended (a flag given twice
// takes the last value), as one group: a failing rank ends the others. Returns the group's exit status.
int run_distributed_gpus(const DistributedGpusPlan& plan, std::vector<std::string> args);

// This process's own arguments (from /proc/self/cmdline), without the program name.
std::vector<std::string> own_arguments();

}  // namespace lmforge::cli
