// defines: add_launch_command(): `lmforge launch`, DeepSpeed's `deepspeed` launcher for lmforge commands
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "launch/launch_plan.h"

namespace lmforge::cli {

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<launch::LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start an lmforge command as the ranks of a job, as DeepSpeed's `deepspeed` launcher starts a script: "
      "`lmforge launch [flags] train gpt ...` (deepspeed --num_gpus 2 pretrain_gpt.py ... becomes lmforge launch "
      "--num_gpus 2 train gpt ...). Each rank gets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and "
      "CUDA_VISIBLE_DEVICES as DeepSpeed's launch.py sets them, and the ranks meet at MASTER_ADDR:MASTER_PORT (rank 0 "
      "listens there). lmforge trains on the CPU: on a machine without GPUs a \"GPU\" (a slot) is one process, so "
      "--num_gpus 4 starts 4 processes. One host that is this machine (its name, localhost or a loopback address) "
      "runs its ranks directly; several hosts run one `lmforge launch` per host over ssh (--launcher pdsh/ssh, "
      "passwordless ssh and the same lmforge path and working directory on every host), or every rank under mpirun "
      "(--launcher openmpi) or srun (--launcher slurm). When a rank fails, the others are ended and launch exits "
      "with that rank's status.");
  cmd->prefix_command();  // the first word that is not a launcher flag starts the command to run
  cmd->add_option("--num_nodes,--num-nodes", o->num_nodes,
                  "Use the first N hosts of the hostfile (default: all of them; without a hostfile only 1)");
  cmd->add_option("--num_gpus,--num-gpus", o->num_gpus,
                  "Ranks per host, slots 0..N-1 (a \"GPU\" is one process here; default: the hostfile's slots, or 1 "
                  "without a hostfile)");
  cmd->add_option("-H,--hostfile", o->hostfile,
                  "DeepSpeed's hostfile: one `HOST slots=N` per line (# comments); without this flag /job/hostfile "
                  "if it exists, else this machine alone")
      ->capture_default_str();
  cmd->add_option("-i,--include", o->include,
                  "Only these hosts/slots: HOST[:SLOT,SLOT...]@HOST2... (a host alone: all its slots), e.g. "
                  "-i node1:0,1@node2 (DeepSpeed's syntax); not with --num_nodes/--num_gpus or --exclude");
  cmd->add_option("-e,--exclude", o->exclude,
                  "Every host/slot of the hostfile except these: HOST[:SLOT,...]@HOST2... (a host alone: the whole "
                  "host)");
  cmd->add_option("--master_addr,--master-addr", o->master_addr,
                  "Address of rank 0, where the ranks meet (default: 127.0.0.1 on one machine, else the first host)");
  cmd->add_option("--master_port,--master-port", o->master_port, "Port rank 0 listens at for the rendezvous")
      ->capture_default_str();
  cmd->add_option("--launcher", o->launcher,
                  "How several hosts are started: pdsh or ssh (one `ssh HOST lmforge launch --node_rank K ...` per "
                  "host), openmpi (mpirun -n RANKS -hostfile FILE lmforge ...; the ranks then use MPI), slurm (srun "
                  "-n RANKS [-w HOSTS] lmforge ...)")
      ->check(CLI::IsMember({"pdsh", "ssh", "openmpi", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--node_rank,--node-rank", o->node_rank,
                  "Set by lmforge launch on each host of a multi-host job: this host's index in --world_info");
  cmd->add_option("--world_info,--world-info", o->world_info,
                  "Set by lmforge launch on each host of a multi-host job: every host and its slots, HOST:0,1@HOST2:0,1");
  cmd->callback([o, cmd] {
    launch::LaunchOptions options = *o;
    options.hostfile_given = cmd->count("--hostfile") > 0;
    options.command = cmd->remaining();
    const int status = launch::run_launch(options, std::cerr);
    if (status != 0) {
      std::cout.flush();
      std::exit(status);
    }
  });
}

}  // namespace lmforge::cli
