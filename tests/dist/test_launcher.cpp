// discover_rank(): precedence of flags, mpirun and each launcher's variables, and errors for inconsistent values.
#include <gtest/gtest.h>

#include <map>

#include "dist/launcher.h"
#include "util/error.h"

namespace {

using lmforge::dist::discover_rank;
using lmforge::dist::RankInfo;
using lmforge::dist::RankRequest;
using lmforge::dist::RankSource;

RankInfo with_env(const std::map<std::string, std::string>& env, RankRequest request = {}) {
  return discover_rank(request, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& env, RankRequest request = {}) {
  try {
    with_env(env, request);
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Launcher, NothingSetIsOneProcess) {
  auto r = with_env({});
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.source, RankSource::Single);
  EXPECT_FALSE(r.use_mpi);
}

TEST(Launcher, FlagsWinOverEverything) {
  RankRequest req;
  req.rank = 2;
  req.world_size = 3;
  auto r = with_env({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "5"}, {"SLURM_PROCID", "7"},
                     {"SLURM_NTASKS", "9"}},
                    req);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 3);
  EXPECT_EQ(r.source, RankSource::Flags);
  EXPECT_FALSE(r.use_mpi);
}

TEST(Launcher, MpirunMeansMpiUnlessRefused) {
  std::map<std::string, std::string> env{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"},
                                         {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  EXPECT_TRUE(with_env(env).use_mpi);
  RankRequest no_mpi;
  no_mpi.no_mpi = true;
  // Refused: the Slurm variables come first in the static order, then Open MPI's.
  auto r = with_env(env, no_mpi);
  EXPECT_FALSE(r.use_mpi);
  EXPECT_EQ(r.source, RankSource::SlurmTasks);
  env.erase("SLURM_PROCID");
  r = with_env(env, no_mpi);
  EXPECT_EQ(r.source, RankSource::OpenMpiEnv);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
}

TEST(Launcher, SlurmArrayBeforeSlurmTasksAndOffsetByTheArrayMinimum) {
  auto r = with_env({{"SLURM_ARRAY_TASK_ID", "12"}, {"SLURM_ARRAY_TASK_MIN", "10"}, {"SLURM_ARRAY_TASK_COUNT", "4"},
                     {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(r.source, RankSource::SlurmArray);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 4);
  r = with_env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}});
  EXPECT_EQ(r.source, RankSource::SlurmTasks);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 6);
}

TEST(Launcher, KubernetesIndexNeedsTheCountAsWorldSize) {
  EXPECT_NE(error_of({{"JOB_COMPLETION_INDEX", "3"}}).find("--world-size"), std::string::npos);
  RankRequest req;
  req.world_size = 5;
  auto r = with_env({{"JOB_COMPLETION_INDEX", "3"}}, req);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 5);
  EXPECT_EQ(r.source, RankSource::Flags);  // one flag given: static mode, rank from the environment
}

TEST(Launcher, PmiVariables) {
  auto r = with_env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(r.source, RankSource::PmiEnv);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world_size, 2);
}

TEST(Launcher, InconsistentValuesAreErrors) {
  EXPECT_NE(error_of({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}).find("not below the world size"), std::string::npos);
  EXPECT_NE(error_of({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}).find("PMI_RANK=x"), std::string::npos);
  RankRequest req;
  req.rank = 1;
  EXPECT_NE(error_of({}, req).find("without --world-size"), std::string::npos);
  req.world_size = 0;
  EXPECT_NE(error_of({}, req).find("--world-size must be at least 1"), std::string::npos);
}

TEST(Launcher, TorchrunEnvironmentMeetsAtMasterOverGloo) {
  const std::map<std::string, std::string> env = {
      {"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}};  // torchrun under Slurm: torchrun's variables are the rank's
  auto r = with_env(env);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.source, RankSource::Torchrun);
  EXPECT_TRUE(r.use_gloo);
  EXPECT_FALSE(r.use_mpi);
  EXPECT_EQ(r.rendezvous.host, "10.0.0.1");
  EXPECT_EQ(r.rendezvous.port, 29500);
  EXPECT_EQ(r.origin, "RANK=3, WORLD_SIZE=4, MASTER_ADDR=10.0.0.1, MASTER_PORT=29500");
  // mpirun still wins: its ranks join MPI as before.
  auto m = env;
  m["OMPI_COMM_WORLD_SIZE"] = "4";
  EXPECT_TRUE(with_env(m).use_mpi);
  EXPECT_FALSE(with_env(m).use_gloo);
  // Without the master's address there is nowhere to meet.
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("RANK=0, WORLD_SIZE=2 is set (torchrun) but MASTER_ADDR "
                                                               "and MASTER_PORT are not"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}}).find("RANK=2 is set but WORLD_SIZE is not"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}})
                .find("rank 2 is not below the world size 2"),
            std::string::npos);
}

TEST(Launcher, InitMethodTakesRankAndSizeFromFairseqFlagsOrTheEnvironment) {
  RankRequest req;
  req.init_method = "tcp://node0:11111";
  req.rank = 4;
  req.world_size = 16;
  auto r = with_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}, req);
  EXPECT_EQ(r.rank, 4);
  EXPECT_EQ(r.world_size, 16);
  EXPECT_TRUE(r.use_gloo);
  EXPECT_EQ(r.rendezvous.host, "node0");  // the flag's address, not MASTER_ADDR
  EXPECT_EQ(r.rendezvous.port, 11111);
  EXPECT_EQ(r.origin, "--distributed-rank/--distributed-world-size, --distributed-init-method tcp://node0:11111");
  // fairseq under Slurm: the init method alone, rank and size from SLURM_PROCID/SLURM_NTASKS.
  RankRequest only;
  only.init_method = "tcp://node0:11111";
  r = with_env({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}}, only);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world_size, 3);
  EXPECT_TRUE(r.use_gloo);
  EXPECT_NE(error_of({}, only).find("--distributed-init-method given without --distributed-rank"), std::string::npos)
      << error_of({}, only);
  RankRequest bad = req;
  bad.init_method = "env://";
  EXPECT_NE(error_of({}, bad).find("--distributed-init-method must be tcp://HOST:PORT"), std::string::npos);
  // The MPI-era flags do not start Gloo.
  RankRequest plain;
  plain.rank = 0;
  plain.world_size = 2;
  EXPECT_FALSE(with_env({}, plain).use_gloo);
}

TEST(Launcher, RankZeroWithoutWorldSizeIsOneProcessWithANotice) {
  // Megatron: WORLD_SIZE defaults to 1 (seed 003: MASTER_ADDR=localhost MASTER_PORT=9994 RANK=0 LOCAL_RANK=0).
  auto r = with_env({{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "localhost"}, {"MASTER_PORT", "9994"}});
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_FALSE(r.use_gloo);
  EXPECT_FALSE(r.use_mpi);
  EXPECT_NE(r.notice.find("RANK=0 is set without WORLD_SIZE: training as one process"), std::string::npos) << r.notice;
  // A rank above 0 cannot be in a world of one.
  EXPECT_NE(error_of({{"RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}})
                .find("RANK=1 is set but WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_TRUE(with_env({}).notice.empty());
}

TEST(Launcher, WorldSizeAboveOneWithoutRankIsAnErrorNamingRank) {
  const std::string e = error_of({{"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_NE(e.find("WORLD_SIZE=4 is set but RANK is not"), std::string::npos) << e;
  // One process of one, or another launcher's rank, is fine.
  EXPECT_EQ(with_env({{"WORLD_SIZE", "1"}}).world_size, 1);
  EXPECT_EQ(with_env({{"WORLD_SIZE", "4"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}).rank, 1);
}

TEST(Launcher, FlagsDisagreeingWithTorchrunsEnvironmentAreAConflictNamingBoth) {
  const std::map<std::string, std::string> env = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  RankRequest req;
  req.rank_flag = "--distributed-rank";
  req.size_flag = "--distributed-world-size";
  req.rank = 0;
  std::string e = error_of(env, req);
  EXPECT_NE(e.find("conflict: --distributed-rank 0 but the environment says RANK=1"), std::string::npos) << e;
  req.rank = -1;
  req.world_size = 4;
  e = error_of(env, req);
  EXPECT_NE(e.find("conflict: --distributed-world-size 4 but the environment says WORLD_SIZE=2"), std::string::npos)
      << e;
  // Flags that agree start as torchrun's environment does: at MASTER_ADDR:MASTER_PORT over Gloo.
  req.rank = 1;
  req.world_size = 2;
  auto r = with_env(env, req);
  EXPECT_TRUE(r.use_gloo);
  EXPECT_EQ(r.rendezvous.port, 29500);
  EXPECT_EQ(r.rank, 1);
}

TEST(Launcher, DistributedWorldSizeOneAloneIsOneProcess) {
  RankRequest req;
  req.rank_flag = "--distributed-rank";
  req.size_flag = "--distributed-world-size";
  req.world_size = 1;
  auto r = with_env({}, req);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_FALSE(r.use_gloo);
  req.world_size = 2;
  EXPECT_NE(error_of({}, req).find("--distributed-world-size given without --distributed-rank"), std::string::npos);
}

TEST(Launcher, TorchelasticAgentStoreDecidesWhoHoldsTheStore) {
  std::map<std::string, std::string> env = {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                            {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                            {"TORCHELASTIC_RUN_ID", "job7"}, {"TORCHELASTIC_RESTART_COUNT", "2"}};
  auto r = with_env(env);
  EXPECT_EQ(r.store, lmforge::dist::StoreRole::Launcher);
  EXPECT_EQ(r.store_prefix, "/lmforge/job7/2/");
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";  // c10d rendezvous: MASTER_PORT is free for rank 0
  EXPECT_EQ(with_env(env).store, lmforge::dist::StoreRole::Own);
  env.erase("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(with_env(env).store, lmforge::dist::StoreRole::Detect);
  RankRequest tcp;
  tcp.init_method = "tcp://127.0.0.1:1234";
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_EQ(with_env(env, tcp).store, lmforge::dist::StoreRole::Own);  // tcp:// keeps lmforge's own store
}

TEST(Launcher, LocalRankFlagIsTakenOutAndCheckedAgainstLocalRank) {
  using lmforge::dist::take_local_rank_flag;
  auto env_of = [](std::map<std::string, std::string> env) {
    return [env](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  };
  std::vector<std::string> args = {"--local_rank=1", "train", "gpt", "--lr", "0.1"};
  EXPECT_EQ(take_local_rank_flag(args, env_of({{"LOCAL_RANK", "1"}})), 1);
  EXPECT_EQ(args, (std::vector<std::string>{"train", "gpt", "--lr", "0.1"}));
  args = {"train", "gpt", "--local-rank", "0"};
  EXPECT_EQ(take_local_rank_flag(args, env_of({})), 0);
  EXPECT_EQ(args, (std::vector<std::string>{"train", "gpt"}));
  args = {"train", "gpt"};
  EXPECT_EQ(take_local_rank_flag(args, env_of({})), -1);
  auto error = [&](std::vector<std::string> a, std::map<std::string, std::string> env) -> std::string {
    try {
      take_local_rank_flag(a, env_of(env));
    } catch (const lmforge::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({"--local_rank=1", "train"}, {{"LOCAL_RANK", "0"}})
                .find("conflict: --local_rank 1 but the environment says LOCAL_RANK=0"),
            std::string::npos);
  EXPECT_NE(error({"--local_rank=x"}, {}).find("--local_rank x is not a local rank"), std::string::npos);
  EXPECT_NE(error({"--local_rank=1", "--local-rank", "2"}, {}).find("give two local ranks"), std::string::npos);
}

}  // namespace
