// defines: plan_launch(), run_launch(), shell_quote()
//
// DeepSpeed's runner: hosts and slots from the hostfile (or this machine alone), cut by --include/--exclude or
// --num_nodes/--num_gpus; one host runs its ranks itself, several hosts run one launcher per host (pdsh there, ssh
// here), or mpirun/srun run every rank. Each rank gets DeepSpeed's launch.py environment: RANK (hosts in order, slots
// in order), LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and CUDA_VISIBLE_DEVICES (the host's slots).
#include "launch/launch_plan.h"

#include <unistd.h>

#include <filesystem>

#include "util/error.h"

namespace lmforge::launch {
namespace {

std::string joined(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); i++) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

size_t total_slots(const Resources& r) {
  size_t n = 0;
  for (const auto& [host, slots] : r) n += slots.size();
  return n;
}

// The ranks of host `node` of `world`, as processes of this machine.
std::vector<Process> local_ranks(const Resources& world, size_t node, const std::string& master_addr, int master_port,
                                 const std::string& exe, const std::vector<std::string>& command) {
  size_t first = 0;
  for (size_t n = 0; n < node; n++) first += world[n].second.size();
  const std::vector<int>& slots = world[node].second;
  std::vector<Process> out;
  for (size_t i = 0; i < slots.size(); i++) {
    Process p;
    p.argv.push_back(exe);
    p.argv.insert(p.argv.end(), command.begin(), command.end());
    p.env = {{"RANK", std::to_string(first + i)},
             {"LOCAL_RANK", std::to_string(i)},
             {"WORLD_SIZE", std::to_string(total_slots(world))},
             {"LOCAL_WORLD_SIZE", std::to_string(slots.size())},
             {"MASTER_ADDR", master_addr},
             {"MASTER_PORT", std::to_string(master_port)},
             {"CUDA_VISIBLE_DEVICES", joined(slots)}};
    p.name = "rank " + std::to_string(first + i);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

LaunchPlan plan_launch(const LaunchOptions& o, const std::string& exe, const std::string& cwd) {
  if (o.command.empty())
    throw Error("give the lmforge command to run after the launcher's flags, e.g. `lmforge launch --num_gpus 2 train "
                "gpt --num-layers 2 ...`");
  if (o.command[0] == "launch") throw Error("the command to launch is `launch` itself: give e.g. `train gpt ...`");
  if (o.master_port < 1 || o.master_port > 65535)
    throw Error("--master_port " + std::to_string(o.master_port) + " is not a TCP port");
  LaunchPlan plan;
  if (o.node_rank >= 0) {  // one host's share of a multi-host job (started over ssh by the first launcher)
    const Resources world = parse_world_info(o.world_info);
    if ((size_t)o.node_rank >= world.size())
      throw Error("--node_rank " + std::to_string(o.node_rank) + " is not below the " + std::to_string(world.size()) +
                  " hosts of --world_info " + o.world_info);
    if (o.master_addr.empty()) throw Error("--node_rank needs --master_addr");
    plan.processes = local_ranks(world, (size_t)o.node_rank, o.master_addr, o.master_port, exe, o.command);
    plan.summary = "host " + world[(size_t)o.node_rank].first + " (node " + std::to_string(o.node_rank) + "): " +
                   std::to_string(plan.processes.size()) + " of " + std::to_string(total_slots(world)) + " ranks";
    return plan;
  }
  if (o.num_nodes == 0 || o.num_gpus == 0 || o.num_nodes < -1 || o.num_gpus < -1)
    throw Error("--num_nodes and --num_gpus must be at least 1");
  const bool filtered = !o.include.empty() || !o.exclude.empty();
  if (filtered && (o.num_nodes >= 0 || o.num_gpus >= 0))
    throw Error("--num_nodes/--num_gpus cannot be combined with --include/--exclude (DeepSpeed refuses it too)");
  Resources pool;
  const bool from_file = o.hostfile_given || std::filesystem::exists(o.hostfile);
  if (from_file) {
    pool = read_hostfile(o.hostfile);
  } else {
    if (filtered) throw Error("--include/--exclude name hosts of a hostfile, but there is none (" + o.hostfile + ")");
    if (o.num_nodes > 1)
      throw Error("--num_nodes " + std::to_string(o.num_nodes) + " needs a hostfile listing the hosts (--hostfile; " +
                  o.hostfile + " does not exist)");
    // No hostfile: this machine, --num_gpus ranks (DeepSpeed: every GPU; lmforge trains on the CPU: 1).
    pool = {{"localhost", {}}};
    for (int i = 0; i < std::max(1, o.num_gpus); i++) pool[0].second.push_back(i);
  }
  const Resources active = limit_resources(filter_resources(pool, o.include, o.exclude), o.num_nodes, o.num_gpus);
  const size_t ranks = total_slots(active);
  const bool local = active.size() == 1 && is_this_machine(active[0].first);
  const std::string master = !o.master_addr.empty() ? o.master_addr : local ? "127.0.0.1" : active[0].first;
  const std::vector<std::pair<std::string, std::string>> master_env = {{"MASTER_ADDR", master},
                                                                       {"MASTER_PORT", std::to_string(o.master_port)}};
  if (o.launcher == "openmpi") {
    if (filtered || o.num_nodes >= 0 || o.num_gpus >= 0)
      throw Error("--launcher openmpi runs the hostfile's slots as they are: --include/--exclude and --num_nodes/"
                  "--num_gpus are not supported with it (as in DeepSpeed)");
    Process p;
    p.argv = {"mpirun", "-n", std::to_string(ranks)};
    if (from_file) p.argv.insert(p.argv.end(), {"-hostfile", o.hostfile});
    p.argv.push_back(exe);
    p.argv.insert(p.argv.end(), o.command.begin(), o.command.end());
    p.env = master_env;
    p.name = "mpirun";
    plan.processes.push_back(std::move(p));
    plan.summary = std::to_string(ranks) + " ranks under mpirun" + (from_file ? " (hostfile " + o.hostfile + ")" : "");
    return plan;
  }
  if (o.launcher == "slurm") {
    Process p;
    p.argv = {"srun", "-n", std::to_string(ranks)};
    if (o.num_nodes > 0) p.argv.insert(p.argv.end(), {"--nodes", std::to_string(o.num_nodes)});
    if (from_file) {
      std::string hosts;
      for (const auto& [host, slots] : active) hosts += (hosts.empty() ? "" : ",") + host;
      p.argv.insert(p.argv.end(), {"-w", hosts});
    }
    p.argv.push_back(exe);
    p.argv.insert(p.argv.end(), o.command.begin(), o.command.end());
    p.env = master_env;
    p.name = "srun";
    plan.processes.push_back(std::move(p));
    plan.summary = std::to_string(ranks) + " ranks under srun";
    return plan;
  }
  if (o.launcher != "pdsh" && o.launcher != "ssh")
    throw Error("--launcher " + o.launcher + " is not one of pdsh, ssh, openmpi, slurm");
  if (local) {
    plan.processes = local_ranks(active, 0, master, o.master_port, exe, o.command);
    plan.summary = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on this machine (" +
                   active[0].first + ", slots " + joined(active[0].second) + "), master " + master + ":" +
                   std::to_string(o.master_port);
    return plan;
  }
  // One launcher per host over ssh (DeepSpeed's pdsh runner runs deepspeed.launcher.launch on each).
  const std::string info = world_info(active);
  for (size_t node = 0; node < active.size(); node++) {
    std::string remote = "cd " + shell_quote(cwd) + " && exec " + shell_quote(exe) + " launch --node_rank " +
                         std::to_string(node) + " --world_info " + shell_quote(info) + " --master_addr " +
                         shell_quote(master) + " --master_port " + std::to_string(o.master_port);
    for (const auto& a : o.command) remote += " " + shell_quote(a);
    Process p;
    p.argv = {"ssh", "-o", "BatchMode=yes", active[node].first, remote};
    p.name = "host " + active[node].first + " (ssh)";
    plan.processes.push_back(std::move(p));
  }
  plan.summary = std::to_string(ranks) + " ranks on " + std::to_string(active.size()) + " hosts over ssh (" + info +
                 "), master " + master + ":" + std::to_string(o.master_port);
  return plan;
}

int run_launch(const LaunchOptions& options, std::ostream& log) {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw Error("cannot find the lmforge executable (/proc/self/exe): " + ec.message());
  const std::string cwd = std::filesystem::current_path().string();
  const LaunchPlan plan = plan_launch(options, exe, cwd);
  log << "lmforge launch: " << plan.summary << std::endl;
  return run_process_group(plan.processes, log);
}

}  // namespace lmforge::launch
