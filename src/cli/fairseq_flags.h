// defines: FairseqFlags, add_fairseq_flags() and apply_fairseq_flags() — fairseq's spellings for `lmforge train bert`
//          (the university-cluster BERT workflow started with fairseq-train's flags), and add_balance_flags()
//          (--balance-data-parallel, for data parallelism over machines of unequal speed; GPT, BERT and T5)
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "train/train_options.h"

namespace lmforge::cli {

// fairseq's flags as given (-1 / empty: not given), and the Megatron options they may collide with, so that a
// setting given under both spellings is checked to agree.
struct FairseqFlags {
  std::string task, data, dict, adam_betas, lr_scheduler, save_dir, restore_file, valid_subset;
  int max_sentences = -1, update_freq = -1, save_interval_updates = -1, keep_interval_updates = -1;
  int validate_interval = -1, num_workers = -1, distributed_port = -1;
  int64_t max_update = -1, max_epoch = -1, warmup_updates = -1, total_num_update = -1;
  double clip_norm = -1.0, end_learning_rate = 0.0, power = 1.0;
  bool no_epoch_checkpoints = false, fast_stat_sync = false;
  CLI::Option *end_lr_opt = nullptr, *power_opt = nullptr;
  // The Megatron options of the same settings (counted to detect a setting given twice).
  // --batch-size is Megatron v1's spelling (cli/older_spellings.h) and fairseq's alias of --max-sentences: one
  // meaning, sequences per rank per forward pass.
  CLI::Option* batch_size_opt = nullptr;
  CLI::Option *micro_batch_opt = nullptr, *global_batch_opt = nullptr, *seq_length_opt = nullptr,
              *tokenizer_type_opt = nullptr, *vocab_file_opt = nullptr, *data_path_opt = nullptr,
              *clip_grad_opt = nullptr, *beta1_opt = nullptr, *beta2_opt = nullptr, *min_lr_opt = nullptr,
              *decay_style_opt = nullptr, *warmup_iters_opt = nullptr, *warmup_fraction_opt = nullptr,
              *decay_iters_opt = nullptr, *save_opt = nullptr, *load_opt = nullptr, *save_interval_opt = nullptr,
              *eval_interval_opt = nullptr, *eval_iters_opt = nullptr;
};

// Adds the "fairseq spellings" group to `bert` (after the common train flags, whose --micro-batch-size and
// --seq-length it makes optional: --max-sentences and the shards' length may give them).
void add_fairseq_flags(CLI::App* bert, FairseqFlags& flags);

// After parsing and after Megatron's unset flags are moved into `o`: translates the fairseq flags given into `o`
// (and --distributed-port into `init_method` when none is given). `data_parallel_ranks`: world size / (tensor ×
// pipeline), for --update-freq's global batch. Throws Error naming both spellings when they disagree, and for
// fairseq values lmforge does not implement. Prints notices (stderr) where fairseq's behaviour is not reproduced.
void apply_fairseq_flags(const FairseqFlags& flags, train::TrainOptions& o, std::string& init_method,
                         int data_parallel_ranks);

// --distributed-port without --distributed-init-method: fairseq's tcp://HOST:PORT with HOST = MASTER_ADDR, else the
// first host of the Slurm job (`scontrol show hostnames`, as fairseq's infer_init_method). "" when port < 0.
std::string fairseq_init_method(int port, const std::string& init_method);

// --balance-data-parallel and --balance-interval (every model).
void add_balance_flags(CLI::App* cmd, train::TrainOptions& o);

}  // namespace lmforge::cli
