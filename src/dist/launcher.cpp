// defines: discover_rank()
#include "dist/launcher.h"

#include <cstdlib>
#include <optional>

#include "util/error.h"

namespace lmforge::dist {
namespace {

std::optional<long> env_int(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* v = getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 1000000000)
    throw Error(std::string("environment variable ") + name + "=" + v + " is not a non-negative integer");
  return n;
}

struct Found {
  long rank, size;
  RankSource source;
  std::string origin;
};

std::string pair_origin(const char* rank_name, long rank, const char* size_name, long size) {
  return std::string(rank_name) + "=" + std::to_string(rank) + ", " + size_name + "=" + std::to_string(size);
}

// The first launcher environment present, in precedence order (MPI excluded: the caller decides about it).
std::optional<Found> from_environment(const std::function<const char*(const char*)>& getenv, bool include_ompi,
                                      long flag_size) {
  // torchrun sets RANK and WORLD_SIZE also under Slurm, where they are the more specific of the two.
  if (auto rank = env_int(getenv, "RANK")) {
    auto size = env_int(getenv, "WORLD_SIZE");
    if (!size) throw Error("RANK=" + std::to_string(*rank) + " is set but WORLD_SIZE is not (torchrun sets both)");
    return Found{*rank, *size, RankSource::Torchrun, pair_origin("RANK", *rank, "WORLD_SIZE", *size)};
  }
  if (auto id = env_int(getenv, "SLURM_ARRAY_TASK_ID")) {
    auto count = env_int(getenv, "SLURM_ARRAY_TASK_COUNT");
    const long min = env_int(getenv, "SLURM_ARRAY_TASK_MIN").value_or(0);
    if (!count && flag_size < 0)
      throw Error("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not; give --world-size");
    if (*id < min) throw Error("SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN");
    return Found{*id - min, count.value_or(flag_size), RankSource::SlurmArray,
                 "SLURM_ARRAY_TASK_ID=" + std::to_string(*id) + " (min " + std::to_string(min) +
                     "), SLURM_ARRAY_TASK_COUNT=" + std::to_string(count.value_or(flag_size))};
  }
  if (auto id = env_int(getenv, "SLURM_PROCID")) {
    auto n = env_int(getenv, "SLURM_NTASKS");
    if (!n) n = env_int(getenv, "SLURM_NPROCS");
    if (n) return Found{*id, *n, RankSource::SlurmTasks, pair_origin("SLURM_PROCID", *id, "SLURM_NTASKS", *n)};
  }
  if (auto index = env_int(getenv, "JOB_COMPLETION_INDEX")) {
    if (flag_size < 0)
      throw Error("JOB_COMPLETION_INDEX=" + std::to_string(*index) +
                  " is set (a Kubernetes indexed job) but the job's completion count is not in the environment; "
                  "give it as --world-size");
    return Found{*index, flag_size, RankSource::JobCompletionIndex,
                 "JOB_COMPLETION_INDEX=" + std::to_string(*index) + ", --world-size " + std::to_string(flag_size)};
  }
  if (include_ompi) {
    auto r = env_int(getenv, "OMPI_COMM_WORLD_RANK");
    auto s = env_int(getenv, "OMPI_COMM_WORLD_SIZE");
    if (r && s) return Found{*r, *s, RankSource::OpenMpiEnv, pair_origin("OMPI_COMM_WORLD_RANK", *r, "OMPI_COMM_WORLD_SIZE", *s)};
  }
  auto r = env_int(getenv, "PMI_RANK");
  auto s = env_int(getenv, "PMI_SIZE");
  if (r && s) return Found{*r, *s, RankSource::PmiEnv, pair_origin("PMI_RANK", *r, "PMI_SIZE", *s)};
  return std::nullopt;
}

}  // namespace

RankInfo discover_rank(const RankRequest& request, const std::function<const char*(const char*)>& getenv_in) {
  const std::function<const char*(const char*)> getenv =
      getenv_in ? getenv_in : [](const char* name) -> const char* { return std::getenv(name); };
  if (request.rank < -1 || request.rank > 1000000000) throw Error("--rank must be 0 or more");
  if (request.world_size == 0 || request.world_size < -1) throw Error("--world-size must be at least 1");

  RankInfo info;
  const bool flags = request.rank >= 0 || request.world_size >= 0 || !request.init_method.empty();
  const bool mpirun = getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  if (!flags && mpirun && !request.no_mpi) {
    info.use_mpi = true;
    info.source = RankSource::Mpi;
    info.origin = "MPI";
    return info;  // rank and size are filled in once MPI is initialised
  }
  std::optional<Found> env = from_environment(getenv, request.no_mpi || flags, request.world_size);
  if (flags) {
    long rank = request.rank, size = request.world_size;
    // Training spells the flags as fairseq does.
    const bool fairseq = !request.init_method.empty();
    const std::string rank_flag = fairseq ? "--distributed-rank" : "--rank";
    const std::string size_flag = fairseq ? "--distributed-world-size" : "--world-size";
    std::string origin = rank_flag + "/" + size_flag;
    if (rank < 0 || size < 0) {
      const std::string first = fairseq && rank < 0 && size < 0 ? "--distributed-init-method" : rank < 0 ? size_flag : rank_flag;
      if (!env)
        throw Error(rank < 0 ? first + " given without " + rank_flag + ", and no launcher variable (RANK, SLURM_PROCID, "
                               "SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX, PMI_RANK, …) gives the rank"
                             : first + " given without " + size_flag + ", and no launcher variable gives the world size");
      if (rank < 0) rank = env->rank;
      if (size < 0) size = env->size;
      origin = env->origin + (request.rank >= 0 ? ", " + rank_flag : "") + (request.world_size >= 0 ? ", " + size_flag : "");
    }
    info.rank = static_cast<int>(rank);
    info.world_size = static_cast<int>(size);
    info.source = RankSource::Flags;
    info.origin = origin;
  } else if (env) {
    info.rank = static_cast<int>(env->rank);
    info.world_size = static_cast<int>(env->size);
    info.source = env->source;
    info.origin = env->origin;
  }
  if (info.world_size < 1) throw Error("world size is 0 (" + info.origin + ")");
  info.local_rank = (int)env_int(getenv, "LOCAL_RANK").value_or(-1);
  if (!request.init_method.empty()) {
    info.use_gloo = true;
    info.rendezvous = parse_tcp_init_method(request.init_method);
    info.origin += ", --distributed-init-method " + request.init_method;
  } else if (info.source == RankSource::Torchrun) {
    const char* addr = getenv("MASTER_ADDR");
    auto port = env_int(getenv, "MASTER_PORT");
    if (!addr || !*addr || !port)
      throw Error(info.origin + " is set (torchrun) but MASTER_ADDR and MASTER_PORT are not: set both to rank 0's "
                  "address and a free port, or give --distributed-init-method tcp://HOST:PORT");
    if (*port < 1 || *port > 65535) throw Error("MASTER_PORT=" + std::to_string(*port) + " is not a TCP port");
    info.use_gloo = true;
    info.rendezvous = {addr, (int)*port};
    info.origin += ", MASTER_ADDR=" + info.rendezvous.host + ", MASTER_PORT=" + std::to_string(*port);
  }
  if (info.rank >= info.world_size)
    throw Error("rank " + std::to_string(info.rank) + " is not below the world size " +
                std::to_string(info.world_size) + " (" + info.origin + ")");
  return info;
}

}  // namespace lmforge::dist
