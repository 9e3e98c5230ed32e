// defines: local_rank_device() (which visible GPU a process of a multi-process job takes); host code only, C++17,
//          header-only and without CUDA headers, so the tests check it in every build, GPU or not
#pragma once
#include <cstdlib>
#include <string>

#include "util/error.h"

namespace lmforge::kernels::cuda {

// The visible GPU of this process among `count`: its rank on the node (torchrun's LOCAL_RANK, Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID; the first one set) modulo count, else
// 0. One process per GPU, as Megatron and fairseq place ranks; another placement narrows CUDA_VISIBLE_DEVICES per
// process (count is then 1). `source` (when given) receives how it was chosen, for the backend's info line.
// lmforge::Error for a variable that is not a non-negative integer.
inline int local_rank_device(int count, std::string* source) {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end != '\0' || r < 0)
      throw Error(std::string("choosing the CUDA device: ") + name + "=" + v + " is not a local rank (0, 1, ...)");
    if (source) *source = std::string(name) + "=" + v;
    return count > 0 ? (int)(r % count) : 0;
  }
  if (source) *source = "no local rank set";
  return 0;
}

}  // namespace lmforge::kernels::cuda
