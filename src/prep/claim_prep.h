// defines: run_claim_prep() (`lmforge prep --claim`: processes that know nothing of each other claim shards from
//          a shared directory), ClaimerStatus and the status files, print_claim_status() (`lmforge inspect
//          <prefix>.shards`)
//
// Files under <prefix>.shards/claims/ (besides the shard layout of prep/shard_plan.h):
//   plan.<g>                    lease of the process writing plan.json (the first one to come; the others wait)
//   shard-000012.<g>            lease on shard 12 (prep/lease.h: generation g+1 is a takeover of generation g)
//   assemble.<g>                lease of the process assembling the final datasets
//   claimer-<host>-<pid>-<token>.json   each process's status (rewritten at every heartbeat: its mtime is the
//                               heartbeat): shards and bytes done, busy time, the shard in hand
//   probe-<host>-<pid>-<token>  each process's clock probe (data/lease.h ServerClock)
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "prep/prep.h"

namespace lmforge::prep {

constexpr double kDefaultClaimLeaseSeconds = 300;

// One claimer's status file (claims/claimer-<host>-<pid>-<token>.json).
struct ClaimerStatus {
  std::string host, token;
  long pid = 0;
  double lease_seconds = kDefaultClaimLeaseSeconds;
  uint64_t shards_done = 0, bytes_done = 0;  // shards this process committed, and their input bytes
  double busy_seconds = 0;                   // time spent preparing them
  int64_t shard = -1;                        // the shard in hand (-1: none)
  uint64_t shard_bytes_done = 0;             // input bytes of it read so far
};
std::string claimer_status_json(const ClaimerStatus& s);
std::string claimer_status_name(const ClaimerStatus& s);  // "claimer-<host>-<pid>-<token>.json"

// Runs this process as one claimer. It takes the plan (writing it if it comes first; otherwise waiting for it and
// refusing a plan made from other output-defining flags), then claims free shards (or shards whose claim lease
// expired) one at a time, prepares each in its temporary directory and commits it without replacing anything
// already committed. When no shard is left to claim it waits for the shards others hold (taking over any whose
// heartbeat stops), then exactly one process assembles the final datasets; every process returns once they
// exist, printing a "nothing left to claim" line. A FUSE file system under the shard directory is refused.
// Before a shard is cut and again before it is committed, its input is checked against the plan (InputGuard): an
// input rewritten or replaced during the run is an Error naming the file, and the shard is not committed. A run
// finding assembled.json checks the datasets themselves and assembles them again from the shards when they were
// deleted, moved or changed since.
// Returns the summary on the process that assembled; std::nullopt on the others.
std::optional<PrepSummary> run_claim_prep(const PrepOptions& options, uint64_t shard_bytes, double lease_seconds,
                                          std::ostream& out);

// Prints the state of a claim-mode (or any sharded) run from its shard directory: shards done/claimed/free (each
// manifest and shard .bin/.idx validated as `merge --shards` does; damaged ones listed with the reason), the
// claimers with their heartbeat age, throughput and an ETA, and whether the datasets are assembled (checked against
// the sizes assembled.json records, not the marker alone). Works read-only: with write access it judges ages by the
// file server's clock through a probe file, without it by this machine's clock, and it says which.
void print_claim_status(const std::string& shards_dir, std::ostream& out);

}  // namespace lmforge::prep
