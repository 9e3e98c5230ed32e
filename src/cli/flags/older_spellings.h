// defines: OlderSpellings, add_older_spellings(), apply_older_spellings(), apply_deepspeed_flags(): the flags of
//          Megatron v1 and Megatron-DeepSpeed (DeepSpeedExamples' Megatron-LM v1.1.5 scripts) that are settings of
//          their own or accepted with a notice, and --deepspeed --deepspeed_config FILE, on `lmforge train <model>`
//          (their spellings of lmforge's settings, --batch-size and the like, are rows of flags/aliases.h)
#pragma once
#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/flags/aliases.h"
#include "train/train_options.h"

namespace lmforge::cli {

// What the older flags were given as; apply_older_spellings() moves them into the options.
struct OlderSpellings {
  std::string data_impl;           // --data-impl mmap|infer|lazy|cached
  std::string distributed_backend; // --distributed-backend nccl|gloo|mpi|ccl
  int64_t zero_allgather_bucket_size = -1;
  bool deepspeed = false;          // --deepspeed
  std::string deepspeed_config;    // --deepspeed_config / --deepspeed-config FILE
  // Accepted GPU-memory flags: each one prints what lmforge does instead.
  bool partition_activations = false, contigious_checkpointing = false, checkpoint_in_cpu = false,
       synchronize_each_layer = false, zero_reduce_scatter = false, zero_contigious_gradients = false,
       deepspeed_activation_checkpointing = false, cpu_optimizer = false;
};

// Adds the flags to `cmd` in the "older spellings" group of --help, with the table's Megatron v1 and
// Megatron-DeepSpeed rows (--zero-stage is lmforge's `o.zero_stage`).
void add_older_spellings(CLI::App* cmd, OlderSpellings& s, train::TrainOptions& o);

// Checks the older flags (refused values, --zero-stage against --use-distributed-optimizer, --deepspeed with its
// config) and prints one notice per accepted flag whose meaning lmforge honours differently.
void apply_older_spellings(const OlderSpellings& s, const GivenFlags& given, train::TrainOptions& o,
                           std::ostream& notices);

// --deepspeed_config FILE on `world_size` ranks (flags/deepspeed_config.h), then the settings required of the
// flags or the config (--micro-batch-size, --lr).
void apply_deepspeed_flags(const OlderSpellings& s, GivenFlags& given, train::TrainOptions& o, int world_size,
                           std::ostream& notices);

}  // namespace lmforge::cli
