// defines: RankRequest, RankInfo, discover_rank(): this process's rank and the world size, from flags, MPI or the
//          environment of common launchers (Slurm, Kubernetes indexed jobs, Open MPI, PMI, torchrun);
//          take_local_rank_flag() (torch.distributed.launch's --local_rank)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dist/tcp_store.h"

namespace lmforge::dist {

struct RankRequest {
  int rank = -1;          // --rank; -1: not given
  int world_size = -1;    // --world-size; -1: not given
  bool no_mpi = false;    // --no-mpi: never join MPI, even when started by mpirun
  std::string init_method;  // --distributed-init-method tcp://HOST:PORT (training): meet there, collectives on Gloo
  // How the command spells the two flags, for messages ("": --rank and --world-size, or fairseq's
  // --distributed-rank and --distributed-world-size when init_method is given).
  std::string rank_flag, size_flag;
};

enum class RankSource { Single, Flags, Mpi, Torchrun, SlurmArray, SlurmTasks, JobCompletionIndex, OpenMpiEnv, PmiEnv };

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  RankSource source = RankSource::Single;
  bool use_mpi = false;   // launched by Open MPI's mpirun and MPI was not refused: join MPI for rank and size
  // The ranks meet at a TCP store and run their collectives over Gloo: --distributed-init-method was given, or
  // torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) gave rank and size.
  bool use_gloo = false;
  Endpoint rendezvous;    // with use_gloo: the init method's, or MASTER_ADDR:MASTER_PORT
  int local_rank = -1;    // LOCAL_RANK (torchrun), for the log; -1: not set
  std::string origin = "a single process";  // where rank and size came from, for logs ("SLURM_PROCID=3, SLURM_NTASKS=8")
  // With use_gloo: who holds the store at `rendezvous` (tcp://: lmforge's rank 0; torch launchers: the launcher
  // when TORCHELASTIC_USE_AGENT_STORE=True, lmforge's rank 0 when it is False, whoever answers when it is unset),
  // and the prefix of this job's keys in a launcher's store (its run id and restart count).
  StoreRole store = StoreRole::Own;
  std::string store_prefix;
  std::string notice;  // a decision the user should hear about (RANK=0 without WORLD_SIZE), "" if none
};

// Precedence: --rank/--world-size flags (either one given: static mode; a missing one is taken from the
// environment below) > mpirun (OMPI_COMM_WORLD_SIZE set, unless no_mpi; rank and size then come from MPI)
// > RANK/WORLD_SIZE (torchrun and other PyTorch launchers; rendezvous at MASTER_ADDR:MASTER_PORT)
// > SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (rank = id − SLURM_ARRAY_TASK_MIN) > SLURM_PROCID/SLURM_NTASKS
// > JOB_COMPLETION_INDEX (Kubernetes indexed jobs; the count must come from --world-size)
// > OMPI_COMM_WORLD_RANK/SIZE (with no_mpi) > PMI_RANK/PMI_SIZE (MPICH/Intel MPI's hydra) > a single process.
// --distributed-init-method counts as a flag: rank and size then come from the flags or, when not given, from the
// environment (torchrun's RANK/WORLD_SIZE, Slurm, …) — fairseq's rule.
// Malformed or inconsistent values (rank ≥ size, non-numbers) are an Error naming the variable or flag; so are
// RANK above 0 without WORLD_SIZE, WORLD_SIZE above 1 without RANK (and no other launcher's rank), and flags that
// disagree with torchrun's RANK/WORLD_SIZE when no --distributed-init-method is given (with one, fairseq's flags win). RANK=0 without WORLD_SIZE is one process with a notice (Megatron's
// defaults: WORLD_SIZE 1). Flags that agree with torchrun's environment meet at MASTER_ADDR:MASTER_PORT as torchrun
// starts do.
// `getenv` is injectable for tests.
RankInfo discover_rank(const RankRequest& request,
                       const std::function<const char*(const char*)>& getenv = nullptr);

// torch.distributed.launch (and Megatron's own scripts) pass `--local_rank=N` to every process, before the
// subcommand when started with --no_python (`lmforge --local_rank=0 train gpt ...`). Removes every `--local_rank=N`,
// `--local_rank N`, `--local-rank=N` and `--local-rank N` from `args` and returns N (-1: none). An N that is not a
// non-negative integer, two different values, or a value other than LOCAL_RANK's is an Error naming both; with
// LOCAL_RANK unset the value is returned for the caller to record.
int take_local_rank_flag(std::vector<std::string>& args,
                         const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace lmforge::dist
