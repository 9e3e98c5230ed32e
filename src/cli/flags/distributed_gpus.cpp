// defines: plan_distributed_gpus(), run_distributed_gpus(), own_arguments()
#include "cli/flags/distributed_gpus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "dist/launcher.h"
#include "launch/process_group.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

// A port no one listens at now (the kernel's choice), for a rendezvous this command alone takes part in.
int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("--distributed-gpus: cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw Error("--distributed-gpus: cannot find a free local port for the ranks to meet at");
  return ntohs(a.sin_port);
}

}  // namespace

DistributedGpusPlan plan_distributed_gpus(int gpus, int rank, int world_size, const std::string& init_method) {
  DistributedGpusPlan p;
  p.gpus = gpus;
  p.world_size = world_size > 0 ? world_size : gpus;
  p.start_rank = rank > 0 ? rank : 0;
  if (p.world_size % gpus != 0)
    throw Error("--distributed-gpus " + std::to_string(gpus) + " does not divide --distributed-world-size " +
                std::to_string(p.world_size) + ": every command starts " + std::to_string(gpus) +
                " ranks (fairseq), so the world must be a whole number of such commands");
  if (p.start_rank + gpus > p.world_size)
    throw Error("--distributed-rank " + std::to_string(p.start_rank) + " with --distributed-gpus " +
                std::to_string(gpus) + " means ranks " + std::to_string(p.start_rank) + ".." +
                std::to_string(p.start_rank + gpus - 1) + ", past the world size " + std::to_string(p.world_size));
  if (!init_method.empty()) {
    p.init_method = init_method;
  } else if (p.world_size == gpus) {
    p.init_method = "tcp://127.0.0.1:" + std::to_string(free_local_port());
  } else {
    throw Error("--distributed-gpus " + std::to_string(gpus) + " of a world of " + std::to_string(p.world_size) +
                " ranks needs --distributed-init-method tcp://HOST:PORT (rank 0's host) on every command");
  }
  return p;
}

std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); i++)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  if (args.empty()) throw Error("cannot read this process's arguments (/proc/self/cmdline)");
  args.erase(args.begin());
  return args;
}

int run_distributed_gpus(const DistributedGpusPlan& plan, std::vector<std::string> args) {
  // A launcher's --local_rank belongs to this command, not to the ranks it starts (each gets its own LOCAL_RANK).
  dist::take_local_rank_flag(args, [](const char*) -> const char* { return nullptr; });
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw Error("cannot find the lmforge executable (/proc/self/exe): " + ec.message());
  std::vector<launch::Process> ranks;
  for (int i = 0; i < plan.gpus; i++) {
    launch::Process p;
    p.argv.push_back(exe);
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    const std::string rank = std::to_string(plan.start_rank + i);
    p.argv.insert(p.argv.end(), {"--distributed-rank", rank, "--distributed-world-size", std::to_string(plan.world_size),
                                 "--distributed-init-method", plan.init_method, "--distributed-gpus", "1"});
    p.env = {{"LOCAL_RANK", std::to_string(i)}};
    p.name = "rank " + rank;
    ranks.push_back(std::move(p));
  }
  std::cerr << "lmforge train: --distributed-gpus " << plan.gpus << ": starting ranks " << plan.start_rank << ".."
            << plan.start_rank + plan.gpus - 1 << " of " << plan.world_size << " (rendezvous " << plan.init_method
            << ")" << std::endl;
  return launch::run_process_group(ranks, std::cerr);
}

}  // namespace lmforge::cli
