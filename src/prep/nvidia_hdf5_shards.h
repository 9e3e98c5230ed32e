// defines: run_nvidia_hdf5_sharded(): `lmforge prep --output-format nvidia-hdf5` over many processes and machines,
//          one output shard per input file, as NVIDIA runs create_pretraining_data.py once per text shard
//          (bertPrep.py: <dataset>_training_<i>.txt -> <dataset>_training_<i>.hdf5)
//
// Input file F gives <output-prefix><stem of F>.hdf5 (--output-prefix hdf5/ writes hdf5/books_training_0.hdf5), each
// equal to a single-process run on F alone (the generator restarts from the seed for every file, as NVIDIA's does).
// A file whose output exists is done, so a rerun after a crash redoes only the missing ones.
//  - Static (--rank/--world-size, Slurm, mpirun, Kubernetes indexed jobs): rank r takes files r, r+N, r+2N, ...
//  - --claim: no ranks; each process claims a file through a lease in <output-prefix>.claims/ (data/lease.h:
//    exclusive create, heartbeats every quarter of --claim-lease, takeover of a silent claim judged by the file
//    server's clock), writes its output under a temporary name and publishes it without replacing one already
//    there. The first process records the output-defining flags in <output-prefix>.claims/plan.txt; a process
//    started with other flags refuses to join. Every process exits 0 with "nothing left to claim" once all exist.
#pragma once
#include <iosfwd>
#include <optional>

#include "dist/launcher.h"
#include "prep/distributed.h"
#include "prep/prep.h"

namespace lmforge::prep {

std::optional<PrepSummary> run_nvidia_hdf5_sharded(const PrepOptions& options, const DistributedOptions& distributed,
                                                   const dist::RankInfo& rank, std::ostream& out);

}  // namespace lmforge::prep
