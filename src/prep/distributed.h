// defines: DistributedOptions, sharded_mode(), run_sharded_prep(): `lmforge prep` split into shards across
//          processes (MPI with dynamic hand-out, or static rank/world size from flags or a launcher), resumable
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>

#include "dist/launcher.h"
#include "prep/prep.h"

namespace lmforge::prep {

struct DistributedOptions {
  uint64_t shard_bytes = 0;    // --shard-size; 0: not given (kDefaultShardBytes once sharding)
  dist::RankRequest rank;      // --rank, --world-size, --no-mpi
  bool claim = false;          // --claim: claim shards from the shared directory (prep/claim_prep.h)
  double claim_lease_seconds = 300;  // --claim-lease
};

// The rank and world size when `prep` runs sharded: under mpirun, with --rank/--world-size, with a launcher
// environment giving a world size above 1, with --shard-size or with --claim given. std::nullopt: the plain single-process
// run_prep() (no shard directory), exactly as before.
std::optional<dist::RankInfo> sharded_mode(const DistributedOptions& options);

// This process's part of a sharded run. Every process derives (or, under MPI, receives from rank 0) the same
// plan, skips shards already complete and prepares the rest into <prefix>.shards/. Under MPI rank 0 hands out
// shards on request (a slow process takes fewer), prints aggregated progress and, once every rank is done,
// assembles <prefix>_<key>_<level>.bin/.idx (level document, or sentence) and a per-rank report; any error on
// any rank is printed with the rank and aborts the whole job (non-zero exit). Statically, rank r prepares shards
// r, r+N, r+2N, …; a world of one assembles at the end, a larger one prints the `lmforge merge --shards` command
// to run afterwards.
// Returns the summary on the process that assembled; std::nullopt on the others.
std::optional<PrepSummary> run_sharded_prep(const PrepOptions& options, const DistributedOptions& distributed,
                                            const dist::RankInfo& rank, std::ostream& out);

}  // namespace lmforge::prep
