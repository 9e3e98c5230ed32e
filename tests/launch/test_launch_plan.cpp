// lmforge launch's plan: which processes a DeepSpeed-style launch line starts, with which environment.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "launch/launch_plan.h"
#include "util/error.h"

namespace {

using namespace lmforge::launch;
namespace fs = std::filesystem;

std::map<std::string, std::string> env_of(const Process& p) {
  return std::map<std::string, std::string>(p.env.begin(), p.env.end());
}

std::string error_of(const LaunchOptions& o) {
  try {
    plan_launch(o, "/opt/lmforge", "/work");
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

LaunchOptions options(std::vector<std::string> command = {"train", "gpt", "--lr", "0.1"}) {
  LaunchOptions o;
  o.hostfile = "/nonexistent/job/hostfile";
  o.command = std::move(command);
  return o;
}

TEST(LaunchPlan, NoHostfileIsThisMachineWithNumGpusRanks) {
  LaunchOptions o = options();
  o.num_gpus = 2;
  const LaunchPlan p = plan_launch(o, "/opt/lmforge", "/work");
  ASSERT_EQ(p.processes.size(), 2u);
  for (int r = 0; r < 2; r++) {
    const Process& proc = p.processes[(size_t)r];
    EXPECT_EQ(proc.argv, (std::vector<std::string>{"/opt/lmforge", "train", "gpt", "--lr", "0.1"}));
    auto env = env_of(proc);
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], "29500");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1");
  }
  // Default: one rank.
  EXPECT_EQ(plan_launch(options(), "/opt/lmforge", "/work").processes.size(), 1u);
}

TEST(LaunchPlan, OneLocalHostOfAHostfileRunsLocallyWithItsSlots) {
  const fs::path dir = fs::temp_directory_path() / ("lmforge-launch-plan-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=2\nnode9 slots=4\n";
  LaunchOptions o = options();
  o.hostfile = (dir / "hostfile").string();
  o.hostfile_given = true;
  o.include = "127.0.0.1:0,1";
  o.master_port = 6030;
  LaunchPlan p = plan_launch(o, "/opt/lmforge", "/work");
  ASSERT_EQ(p.processes.size(), 2u);
  EXPECT_EQ(env_of(p.processes[1])["RANK"], "1");
  EXPECT_EQ(env_of(p.processes[1])["MASTER_PORT"], "6030");
  EXPECT_EQ(p.processes[0].argv[0], "/opt/lmforge");
  // Both hosts: one ssh per host, each running launch for its share; ranks numbered across hosts.
  o.include = "";
  p = plan_launch(o, "/opt/lmforge", "/work");
  ASSERT_EQ(p.processes.size(), 2u);
  EXPECT_EQ(p.processes[1].argv[0], "ssh");
  EXPECT_EQ(p.processes[1].argv[3], "node9");
  EXPECT_EQ(p.processes[1].argv[4],
            "cd '/work' && exec '/opt/lmforge' launch --node_rank 1 --world_info '127.0.0.1:0,1@node9:0,1,2,3' "
            "--master_addr '127.0.0.1' --master_port 6030 'train' 'gpt' '--lr' '0.1'");
  // What the second host's launch then starts: ranks 2..5 of 6.
  LaunchOptions node = options();
  node.node_rank = 1;
  node.world_info = "127.0.0.1:0,1@node9:0,1,2,3";
  node.master_addr = "127.0.0.1";
  p = plan_launch(node, "/opt/lmforge", "/work");
  ASSERT_EQ(p.processes.size(), 4u);
  EXPECT_EQ(env_of(p.processes[0])["RANK"], "2");
  EXPECT_EQ(env_of(p.processes[3])["RANK"], "5");
  EXPECT_EQ(env_of(p.processes[3])["LOCAL_RANK"], "3");
  EXPECT_EQ(env_of(p.processes[3])["WORLD_SIZE"], "6");
  // mpirun and srun run every rank themselves.
  o.launcher = "openmpi";
  p = plan_launch(o, "/opt/lmforge", "/work");
  ASSERT_EQ(p.processes.size(), 1u);
  EXPECT_EQ(p.processes[0].argv, (std::vector<std::string>{"mpirun", "-n", "6", "-hostfile", o.hostfile, "/opt/lmforge",
                                                           "train", "gpt", "--lr", "0.1"}));
  o.launcher = "slurm";
  p = plan_launch(o, "/opt/lmforge", "/work");
  EXPECT_EQ(p.processes[0].argv, (std::vector<std::string>{"srun", "-n", "6", "-w", "127.0.0.1,node9", "/opt/lmforge",
                                                           "train", "gpt", "--lr", "0.1"}));
  fs::remove_all(dir);
}

TEST(LaunchPlan, LinesDeepSpeedRefusesAreErrors) {
  LaunchOptions o = options();
  o.num_nodes = 2;
  EXPECT_NE(error_of(o).find("--num_nodes 2 needs a hostfile"), std::string::npos) << error_of(o);
  o = options();
  o.include = "a:0";
  EXPECT_NE(error_of(o).find("--include/--exclude name hosts of a hostfile"), std::string::npos);
  o.num_gpus = 1;
  EXPECT_NE(error_of(o).find("cannot be combined with --include/--exclude"), std::string::npos);
  EXPECT_NE(error_of(options({})).find("give the lmforge command"), std::string::npos);
  o = options();
  o.num_gpus = 0;
  EXPECT_NE(error_of(o).find("must be at least 1"), std::string::npos);
  o = options();
  o.hostfile_given = true;
  EXPECT_NE(error_of(o).find("cannot open the hostfile"), std::string::npos);
}

TEST(LaunchPlan, ShellQuotingSurvivesQuotes) { EXPECT_EQ(shell_quote("it's"), "'it'\\''s'"); }

}  // namespace
