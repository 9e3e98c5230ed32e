// `lmforge train gpt` under PyTorch's own launchers (Debian's python3-torch: torch.distributed.launch and torchrun,
// static --master_port and --rdzv_backend c10d), under `lmforge launch` (DeepSpeed's launcher), fairseq's
// --distributed-gpus and seed 003's RANK=0 recipe: 2 (or 4) ranks reproduce the one-process run with the same global
// batch, as the Gloo parity tests require.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <future>

#include "train/train_run_util.h"

namespace {

using namespace train_runs;

using lmforge::testing::free_port;

bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// A training run whose command line is `before` + `lmforge` + `after` + `train gpt` and the tiny flags.
TrainRun train_line(const TempDir& dir, const std::string& name, const std::string& before, const std::string& after,
                    Flags overrides = {}, const std::string& program = LMFORGE_EXE) {
  const std::string tb = dir.file("tb-" + name);
  fs::remove_all(tb);
  overrides["--tensorboard-dir"] = tb;
  std::string cmd = train_args(dir, overrides);
  cmd.replace(0, std::strlen(LMFORGE_EXE), program + after);
  TrainRun run;
  auto r = run_command("timeout 180 env OMP_NUM_THREADS=1 " + before + cmd);
  run.status = r.status;
  run.output = r.output;
  if (r.status != 0 || !fs::exists(tb)) return run;
  const auto scalars = read_scalars(tb);
  auto get = [&](const char* tag) { return scalars.count(tag) ? scalars.at(tag) : std::vector<float>{}; };
  run.loss = get("lm loss");
  run.grad_norm = get("grad-norm");
  run.valid = get("lm loss validation");
  const auto test = get("lm loss test");
  run.valid.insert(run.valid.end(), test.begin(), test.end());
  return run;
}

std::string legacy_launch() {
  return "/usr/bin/python3 -m torch.distributed.launch --redirects 1 --tee 1 --nproc_per_node 2 --nnodes 1 --node_rank 0 "
         "--master_addr 127.0.0.1 --master_port " + std::to_string(free_port());
}

TEST_F(TrainParallel, TorchDistributedLaunchTwoRanksJoinTheLaunchersStoreAndReproduceOneProcess) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  // Seed 001's launcher line. torch 1.13's legacy launcher refuses --no_python without --use_env (its own check),
  // and with --use_env passes no --local_rank.
  const TrainRun r = train_line(*dir_, "torch-launch", legacy_launch() + " --use_env --no_python ", "");
  expect_parity(r, *single_, 1e-6, "2 ranks under python -m torch.distributed.launch --use_env --no_python");
}

TEST_F(TrainParallel, TorchDistributedLaunchPassesLocalRankWhichIsAccepted) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  // Without --use_env the legacy launcher runs a Python program with --local_rank=N first: a one-line wrapper that
  // executes lmforge with its arguments, as a site's wrapper script would (`lmforge --local_rank=0 train gpt ...`).
  const std::string shim = dir_->file("lmforge_shim.py");
  std::ofstream(shim) << "import os, sys\nos.execv('" << LMFORGE_EXE << "', ['lmforge'] + sys.argv[1:])\n";
  const TrainRun r = train_line(*dir_, "torch-launch-local-rank", legacy_launch() + " ", "", {}, shim);
  expect_parity(r, *single_, 1e-6, "2 ranks under python -m torch.distributed.launch, --local_rank=N passed");
}

TEST_F(TrainParallel, TorchrunStaticMasterPortTwoRanksReproduceOneProcess) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  const std::string launcher = "/usr/bin/torchrun --redirects 1 --tee 1 --nproc_per_node 2 --master_addr 127.0.0.1 "
                               "--master_port " + std::to_string(free_port()) + " --no_python ";
  expect_parity(train_line(*dir_, "torchrun-static", launcher, ""), *single_, 1e-6, "2 ranks under torchrun (static)");
}

TEST_F(TrainParallel, TorchrunC10dRendezvousTwoRanksReproduceOneProcess) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  const std::string launcher = "/usr/bin/torchrun --redirects 1 --tee 1 --nnodes 1 --nproc_per_node 2 --rdzv_backend "
                               "c10d --rdzv_endpoint 127.0.0.1:" + std::to_string(free_port()) + " --no_python ";
  expect_parity(train_line(*dir_, "torchrun-c10d", launcher, ""), *single_, 1e-6, "2 ranks under torchrun (c10d)");
}

TEST_F(TrainParallel, LmforgeLaunchNumGpusTwoReproducesOneProcess) {
  // deepspeed --num_nodes 1 --num_gpus 2 pretrain_gpt.py ...
  const std::string after = " launch --num_nodes 1 --num_gpus 2 --master_port " + std::to_string(free_port());
  expect_parity(train_line(*dir_, "launch-gpus", "", after), *single_, 1e-6, "lmforge launch --num_gpus 2");
}

TEST_F(TrainParallel, LmforgeLaunchIncludeWithHostfileReproducesOneProcess) {
  // deepspeed --master_port P -i 127.0.0.1:0,1 --hostfile hostfile
  const std::string hostfile = dir_->file("hostfile");
  std::ofstream(hostfile) << "127.0.0.1 slots=2\n";
  const std::string after =
      " launch --master_port " + std::to_string(free_port()) + " -i 127.0.0.1:0,1 --hostfile " + hostfile;
  expect_parity(train_line(*dir_, "launch-include", "", after), *single_, 1e-6, "lmforge launch -i --hostfile");
}

TEST_F(TrainParallel, RankZeroWithoutWorldSizeIsOneProcessWithANotice) {
  // Seed 003: MASTER_ADDR=localhost MASTER_PORT=9994 RANK=0 LOCAL_RANK=0 python pretrain_gpt.py ...
  const TrainRun r = train_line(
      *dir_, "rank0", "MASTER_ADDR=localhost MASTER_PORT=" + std::to_string(free_port()) + " RANK=0 LOCAL_RANK=0 ", "");
  expect_parity(r, *single_, 0.0 + 1e-12, "RANK=0 without WORLD_SIZE");
  EXPECT_NE(r.output.find("notice: RANK=0 is set without WORLD_SIZE: training as one process"), std::string::npos)
      << r.output;
}

TEST_F(TrainParallel, DistributedGpusTwoStartsTwoRanksThatReproduceOneProcess) {
  const TrainRun r = train_line(*dir_, "dgpus", "", "", {{"--distributed-gpus", "2"}});
  expect_parity(r, *single_, 1e-6, "--distributed-gpus 2 (one command, two ranks)");
  EXPECT_NE(r.output.find("--distributed-gpus 2: starting ranks 0..1 of 2"), std::string::npos) << r.output;
}

TEST_F(TrainParallel, DistributedGpusOfTwoCommandsMakeAWorldOfFour) {
  // Seed 004's two-node line: --distributed-world-size 4 --distributed-gpus 2 --distributed-rank 0|2 over tcp://.
  const std::string url = "tcp://127.0.0.1:" + std::to_string(free_port());
  Flags common = {{"--distributed-init-method", url}, {"--distributed-world-size", "4"}, {"--distributed-gpus", "2"}};
  Flags second = common;
  second["--distributed-rank"] = "2";
  second["--tensorboard-dir"] = dir_->file("tb-dgpus4-second");
  auto other = std::async(std::launch::async, [&] {
    return run_command("timeout 180 env OMP_NUM_THREADS=1 " + train_args(*dir_, second));
  });
  Flags first = common;
  first["--distributed-rank"] = "0";
  const TrainRun r = train_line(*dir_, "dgpus4", "", "", first);
  const auto o = other.get();
  EXPECT_EQ(o.status, 0) << o.output;
  expect_parity(r, *single_, 1e-6, "2 commands x --distributed-gpus 2");
}

TEST(TorchLaunchersCli, DistributedGpusNotDividingTheWorldIsRefused) {
  const auto r = run_command(std::string(LMFORGE_EXE) + " train gpt --num-layers 2 --hidden-size 32 "
                             "--num-attention-heads 2 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 "
                             "--train-iters 1 --data-path x --vocab-file x --merge-file x --distributed-gpus 3 "
                             "--distributed-world-size 4 --distributed-rank 0 --distributed-init-method tcp://127.0.0.1:1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--distributed-gpus 3 does not divide --distributed-world-size 4"), std::string::npos)
      << r.output;
}

TEST(TorchLaunchersCli, LocalRankFlagMustAgreeWithLocalRank) {
  const auto r = run_command("env LOCAL_RANK=0 " + std::string(LMFORGE_EXE) + " --local_rank=1 train gpt --help");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("conflict: --local_rank 1 but the environment says LOCAL_RANK=0"), std::string::npos)
      << r.output;
  const auto ok = run_command("env LOCAL_RANK=1 " + std::string(LMFORGE_EXE) + " --local_rank=1 train gpt --help");
  EXPECT_EQ(ok.status, 0) << ok.output;
}

}  // namespace
