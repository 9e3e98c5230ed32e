// defines: FairseqFlags, add_fairseq_flags() and apply_fairseq_flags() — fairseq's flags for `lmforge train bert`
//          (the university-cluster BERT workflow started with fairseq-train's flags; its spellings of lmforge's
//          settings, --max-sentences and the like, are rows of flags/aliases.h), and add_balance_flags()
//          (--balance-data-parallel, for data parallelism over machines of unequal speed; GPT, BERT and T5)
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cli/flags/aliases.h"
#include "train/train_options.h"

namespace lmforge::cli {

// fairseq's own flags as given (-1 / empty: not given); those that are spellings of lmforge's settings are applied
// by resolve_aliases() (flags/aliases.h) before these.
struct FairseqFlags {
  std::string task, restore_file, valid_subset;
  int update_freq = -1, keep_interval_updates = -1, validate_interval = -1, num_workers = -1, distributed_port = -1;
  int64_t max_epoch = -1, warmup_updates = -1, total_num_update = -1;
  double end_learning_rate = 0.0, power = 1.0;
  std::string lr_scheduler;
  bool no_epoch_checkpoints = false, fast_stat_sync = false;
};

// Adds the "fairseq spellings" group to `bert` (after the common train flags, whose --micro-batch-size and
// --seq-length it makes optional: --max-sentences and the shards' length may give them).
void add_fairseq_flags(CLI::App* bert, FairseqFlags& flags);

// After parsing and resolve_aliases(): translates the fairseq flags given into `o` (and --distributed-port into
// `init_method` when none is given). `data_parallel_ranks`: world size / (tensor × pipeline), for --update-freq's
// global batch. Throws Error naming both spellings when a derived value disagrees with a setting `given` holds
// (GivenFlags::check), and for fairseq values lmforge does not implement. Prints notices (stderr) where fairseq's
// behaviour is not reproduced.
void apply_fairseq_flags(const FairseqFlags& flags, GivenFlags& given, train::TrainOptions& o,
                         std::string& init_method, int data_parallel_ranks);

// --distributed-port without --distributed-init-method: fairseq's tcp://HOST:PORT with HOST = MASTER_ADDR, else the
// first host of the Slurm job (`scontrol show hostnames`, as fairseq's infer_init_method). "" when port < 0.
std::string fairseq_init_method(int port, const std::string& init_method);

// --balance-data-parallel and --balance-interval (every model).
void add_balance_flags(CLI::App* cmd, train::TrainOptions& o);

}  // namespace lmforge::cli
