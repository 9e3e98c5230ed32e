// defines: run_electra_tfrecord_prep() (`lmforge prep --output-format electra-tfrecord`),
//          run_electra_tfrecord_sharded(), check_electra_options(), electra_output_path(): ELECTRA's pretraining
//          TFRecords, example for example what google-research/electra's build_pretraining_dataset.py writes for
//          the same files, vocabulary, flags and seed of Python's `random`.
//
// Outputs: <output-prefix>.tfrecord-<i>-of-<n>, i < n = --num-output-files (the script: output_dir/pretrain_data
// and n = 1000). The script's --num-processes J splits the work into J jobs (electra_examples.h): job j reads the
// input files at positions = j (mod J), shuffled by random.shuffle from the seed, and writes its k-th example to
// the k mod W'th of its W files i = j (mod J), round robin. J = 1 (the default) is one job over all files.
// Work on cores: a job's lines are tokenized on every core in blocks and reach the builder in order (its random
// stream is sequential and cheap); its files are serialized and written in parallel. Files are written under
// temporary names and renamed only when all of a job's files are complete.
// Sharded modes (the same flags give the same files): statically (--rank/--world-size, Slurm, mpirun's ranks,
// Kubernetes indexed jobs) rank r runs jobs r, r + N, ...; with --claim any number of processes claim jobs through
// leases in <output-prefix>.claims/ (data/lease.h) after agreeing on a plan (<output-prefix>.claims/plan.txt). A job
// whose files all exist is done, so a rerun redoes only the missing ones.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>

#include "dist/launcher.h"
#include "prep/distributed.h"
#include "prep/prep.h"

namespace lmforge::prep {

PrepSummary run_electra_tfrecord_prep(const PrepOptions& options);

std::optional<PrepSummary> run_electra_tfrecord_sharded(const PrepOptions& options,
                                                        const DistributedOptions& distributed,
                                                        const dist::RankInfo& rank, std::ostream& out);

// Errors naming the flag, before anything is read.
void check_electra_options(const PrepOptions& options);

// <prefix>.tfrecord-<i>-of-<n>
std::string electra_output_path(const std::string& prefix, int i, int n);

}  // namespace lmforge::prep
