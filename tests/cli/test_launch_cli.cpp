// defines: tests of `lmforge launch` as a user runs it: its help, a failing rank ending the job with its status, the
// multi-host path over ssh (an `ssh` on PATH that runs the remote command here), and launcher lines it refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_util.h"

namespace {

using lmforge::testing::run_command;
using lmforge::testing::TempDir;
using lmforge::testing::write_file;

const std::string kExe = LMFORGE_EXE;

TEST(LaunchCli, HelpSaysAGpuIsAProcessAndNamesDeepSpeedsFlags) {
  const auto r = run_command(kExe + " launch --help");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* text : {"a \"GPU\" (a slot) is one process", "--num_gpus", "--num_nodes", "--hostfile", "--include",
                           "--exclude", "--master_addr", "--master_port", "--launcher", "pdsh", "openmpi", "slurm"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
}

TEST(LaunchCli, AFailingRankEndsTheJobWithItsStatus) {
  const auto direct = run_command(kExe + " train gpt --no-such-flag 1");
  ASSERT_NE(direct.status, 0);
  const auto r = run_command(kExe + " launch --num_gpus 2 --master_port 1 train gpt --no-such-flag 1");
  EXPECT_EQ(r.status, direct.status) << r.output;
  EXPECT_NE(r.output.find("lmforge launch: 2 ranks on this machine"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with status " + std::to_string(direct.status)), std::string::npos) << r.output;
}

TEST(LaunchCli, SeveralHostsRunOneLaunchPerHostOverSsh) {
  // An ssh that drops its options and the host and runs the command here: each "host" runs its share of the ranks,
  // which print their environment.
  TempDir dir;
  const std::string bin = dir.file("bin");
  std::filesystem::create_directories(bin);
  write_file(bin + "/ssh",
             "#!/bin/sh\nwhile [ \"$1\" = -o ]; do shift 2; done\nhost=$1; shift\necho \"ssh to $host\" >&2\n"
             "exec sh -c \"$1\"\n");
  std::filesystem::permissions(bin + "/ssh", std::filesystem::perms::owner_all);
  write_file(dir.file("hostfile"), "nodeA slots=2\nnodeB slots=1\n");
  // `inspect --help` stands in for training: every rank runs it and succeeds.
  const auto r = run_command("cd " + dir.path() + " && PATH=" + bin + ":$PATH " + kExe +
                             " launch --hostfile hostfile --master_port 6031 inspect --help");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("3 ranks on 2 hosts over ssh (nodeA:0,1@nodeB:0), master nodeA:6031"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ssh to nodeA"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ssh to nodeB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("host nodeB (node 1): 1 of 3 ranks"), std::string::npos) << r.output;
}

TEST(LaunchCli, LinesDeepSpeedRefusesAreErrors) {
  TempDir dir;
  write_file(dir.file("hostfile"), "127.0.0.1 slots=2\n");
  auto r = run_command(kExe + " launch --hostfile " + dir.file("hostfile") + " -i 127.0.0.1:5 train gpt");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("host '127.0.0.1' has no slot 5"), std::string::npos) << r.output;
  r = run_command(kExe + " launch --num_gpus 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("give the lmforge command to run"), std::string::npos) << r.output;
}

}  // namespace
