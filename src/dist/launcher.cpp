// defines: discover_rank(), take_local_rank_flag()
#include "dist/launcher.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

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
// `notice` receives what the user should hear about a default taken.
std::optional<Found> from_environment(const std::function<const char*(const char*)>& getenv, bool include_ompi,
                                      long flag_size, std::string& notice) {
  // torchrun sets RANK and WORLD_SIZE also under Slurm, where they are the more specific of the two.
  if (auto rank = env_int(getenv, "RANK")) {
    auto size = env_int(getenv, "WORLD_SIZE");
    if (!size && flag_size >= 0)
      return Found{*rank, flag_size, RankSource::Torchrun, "RANK=" + std::to_string(*rank)};
    if (!size && *rank == 0) {
      // Megatron: args.world_size = int(os.getenv("WORLD_SIZE", "1")) (seed recipes set RANK=0 alone).
      notice = "RANK=0 is set without WORLD_SIZE: training as one process (Megatron's default WORLD_SIZE=1)";
      return Found{0, 1, RankSource::Single, "RANK=0 without WORLD_SIZE"};
    }
    if (!size)
      throw Error("RANK=" + std::to_string(*rank) + " is set but WORLD_SIZE is not (torchrun sets both; without it "
                  "the world is one process, where rank " + std::to_string(*rank) + " cannot be)");
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

// torchrun's store: TORCHELASTIC_USE_AGENT_STORE=True (static rendezvous: the agent serves MASTER_PORT), False (c10d
// rendezvous: MASTER_PORT is a free port for rank 0), unset (another launcher, or by hand: whoever answers).
void torch_rendezvous(const std::function<const char*(const char*)>& getenv, RankInfo& info) {
  const char* addr = getenv("MASTER_ADDR");
  auto port = env_int(getenv, "MASTER_PORT");
  if (!addr || !*addr || !port)
    throw Error(info.origin + " is set (torchrun) but MASTER_ADDR and MASTER_PORT are not: set both to rank 0's "
                "address and a free port, or give --distributed-init-method tcp://HOST:PORT");
  if (*port < 1 || *port > 65535) throw Error("MASTER_PORT=" + std::to_string(*port) + " is not a TCP port");
  info.use_gloo = true;
  info.rendezvous = {addr, (int)*port};
  info.origin += ", MASTER_ADDR=" + info.rendezvous.host + ", MASTER_PORT=" + std::to_string(*port);
  const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  const std::string agent_store = agent ? agent : "";
  info.store = agent_store == "True" ? StoreRole::Launcher : agent_store == "False" ? StoreRole::Own : StoreRole::Detect;
  // One job's keys in a store that outlives it (the agent's, across restarts); a leading '/' as torch's own clients
  // add, so `TCPStore(...).get("lmforge/...")` in Python reads them.
  const char* run = getenv("TORCHELASTIC_RUN_ID");
  const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
  info.store_prefix = std::string("/lmforge/") + (run ? run : "") + "/" + (restart ? restart : "0") + "/";
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
  std::optional<Found> env = from_environment(getenv, request.no_mpi || flags, request.world_size, info.notice);
  const bool torch_env = env && env->source == RankSource::Torchrun;
  if (!env && request.rank < 0) {
    // torchrun sets both; a WORLD_SIZE alone would make every process rank 0 of a world none of them completes.
    if (auto size = env_int(getenv, "WORLD_SIZE"); size && *size > 1)
      throw Error("WORLD_SIZE=" + std::to_string(*size) + " is set but RANK is not: set RANK for every process "
                  "(torchrun sets both), or give " + (request.rank_flag.empty() ? "--rank" : request.rank_flag));
  }
  if (flags) {
    long rank = request.rank, size = request.world_size;
    const bool fairseq = !request.init_method.empty();
    const std::string rank_flag =
        !request.rank_flag.empty() ? request.rank_flag : fairseq ? "--distributed-rank" : "--rank";
    const std::string size_flag =
        !request.size_flag.empty() ? request.size_flag : fairseq ? "--distributed-world-size" : "--world-size";
    // A torchrun environment and a flag that disagree, with nothing else saying where to meet: a conflict, not a
    // precedence question (with --distributed-init-method fairseq's flags win, as fairseq has it).
    if (torch_env && !fairseq && request.rank >= 0 && request.rank != env->rank)
      throw Error("conflict: " + rank_flag + " " + std::to_string(request.rank) + " but the environment says RANK=" +
                  std::to_string(env->rank) + " (torchrun or another PyTorch launcher): drop the flag or make the two "
                  "agree");
    if (torch_env && !fairseq && request.world_size >= 0 && request.world_size != env->size)
      throw Error("conflict: " + size_flag + " " + std::to_string(request.world_size) +
                  " but the environment says WORLD_SIZE=" + std::to_string(env->size) +
                  " (torchrun or another PyTorch launcher): drop the flag or make the two agree");
    std::string origin = rank_flag + "/" + size_flag;
    if (rank < 0 && size == 1 && !env) {
      // fairseq: --distributed-world-size 1 alone is one process.
      rank = 0;
      origin = size_flag + " 1";
    } else if (rank < 0 || size < 0) {
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
  } else if (torch_env && info.world_size > 1 && (info.source == RankSource::Torchrun || env->rank == info.rank)) {
    // torchrun's variables (flags that agree with them included) meet where torchrun says.
    torch_rendezvous(getenv, info);
  }
  if (info.rank >= info.world_size)
    throw Error("rank " + std::to_string(info.rank) + " is not below the world size " +
                std::to_string(info.world_size) + " (" + info.origin + ")");
  return info;
}

int take_local_rank_flag(std::vector<std::string>& args, const std::function<const char*(const char*)>& getenv_in) {
  const std::function<const char*(const char*)> getenv =
      getenv_in ? getenv_in : [](const char* name) -> const char* { return std::getenv(name); };
  int found = -1;
  std::string found_as;
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    std::string name, value;
    for (const char* spelling : {"--local_rank", "--local-rank"}) {
      if (a == spelling) {
        if (i + 1 >= args.size()) throw Error(std::string(spelling) + " needs a value (this process's local rank)");
        name = spelling;
        value = args[++i];
      } else if (a.rfind(std::string(spelling) + "=", 0) == 0) {
        name = spelling;
        value = a.substr(name.size() + 1);
      }
    }
    if (name.empty()) {
      kept.push_back(a);
      continue;
    }
    if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
      throw Error(name + " " + value + " is not a local rank (a non-negative integer)");
    const int n = std::stoi(value);
    if (found >= 0 && n != found)
      throw Error("conflict: " + found_as + " and " + name + " " + value + " give two local ranks");
    found = n;
    found_as = name + " " + value;
  }
  if (found >= 0) {
    if (auto env = env_int(getenv, "LOCAL_RANK"); env && *env != found)
      throw Error("conflict: " + found_as + " but the environment says LOCAL_RANK=" + std::to_string(*env) +
                  " (the launcher's flag and its variable must agree)");
  }
  args = std::move(kept);
  return found;
}

}  // namespace lmforge::dist
