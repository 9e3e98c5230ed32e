// defines: RankRequest, RankInfo, discover_rank(): this process's rank and the world size, from flags, MPI or the
//          environment of common launchers (Slurm, Kubernetes indexed jobs, Open MPI, PMI)
#pragma once
#include <functional>
#include <string>

#include "dist/tcp_store.h"

namespace lmforge::dist {

struct RankRequest {
  int rank = -1;          // --rank; -1: not given
  int world_size = -1;    // --world-size; -1: not given
  bool no_mpi = false;    // --no-mpi: never join MPI, even when started by mpirun
  std::string init_method;  // --distributed-init-method tcp://HOST:PORT (training): meet there, collectives on Gloo
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
};

// Precedence: --rank/--world-size flags (either one given: static mode; a missing one is taken from the
// environment below) > mpirun (OMPI_COMM_WORLD_SIZE set, unless no_mpi; rank and size then come from MPI)
// > RANK/WORLD_SIZE (torchrun and other PyTorch launchers; rendezvous at MASTER_ADDR:MASTER_PORT)
// > SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT (rank = id − SLURM_ARRAY_TASK_MIN) > SLURM_PROCID/SLURM_NTASKS
// > JOB_COMPLETION_INDEX (Kubernetes indexed jobs; the count must come from --world-size)
// > OMPI_COMM_WORLD_RANK/SIZE (with no_mpi) > PMI_RANK/PMI_SIZE (MPICH/Intel MPI's hydra) > a single process.
// --distributed-init-method counts as a flag: rank and size then come from the flags or, when not given, from the
// environment (torchrun's RANK/WORLD_SIZE, Slurm, …) — fairseq's rule.
// Malformed or inconsistent values (rank ≥ size, non-numbers) are an Error naming the variable or flag.
// `getenv` is injectable for tests.
RankInfo discover_rank(const RankRequest& request,
                       const std::function<const char*(const char*)>& getenv = nullptr);

}  // namespace lmforge::dist
