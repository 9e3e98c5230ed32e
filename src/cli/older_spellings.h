// defines: OlderSpellings, add_older_spellings(), apply_older_spellings(), given_on_command_line(): Megatron v1's
//          and Megatron-DeepSpeed's flag names (DeepSpeedExamples' Megatron-LM v1.1.5 scripts), and --deepspeed
//          --deepspeed_config FILE, on `lmforge train <model>`
#pragma once
#include <functional>
#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "train/train_options.h"

namespace lmforge::cli {

// What the older flags were given as; apply_older_spellings() moves them into the options.
struct OlderSpellings {
  int batch_size = 0;              // --batch-size (v1: per-rank batch = today's micro batch)
  double warmup = -1.0;            // --warmup (v1: = --lr-warmup-fraction)
  int model_parallel_size = 0;     // --model-parallel-size (v1: = --tensor-model-parallel-size)
  std::string data_impl;           // --data-impl mmap|infer|lazy|cached
  std::string distributed_backend; // --distributed-backend nccl|gloo|mpi|ccl
  int zero_stage = -1;             // --zero-stage (Megatron-DeepSpeed)
  int64_t zero_reduce_bucket_size = -1, zero_allgather_bucket_size = -1;
  bool deepspeed = false;          // --deepspeed
  std::string deepspeed_config;    // --deepspeed_config / --deepspeed-config FILE
  // Accepted GPU-memory flags: each one prints what lmforge does instead.
  bool partition_activations = false, contigious_checkpointing = false, checkpoint_in_cpu = false,
       synchronize_each_layer = false, zero_reduce_scatter = false, zero_contigious_gradients = false,
       deepspeed_activation_checkpointing = false, cpu_optimizer = false;
  CLI::App* cmd = nullptr;
};

// Adds the flags to `cmd` in the "older spellings" group of --help.
void add_older_spellings(CLI::App* cmd, OlderSpellings& s);

// True when `flag` (or an older spelling of it) was on the command line.
bool given_on_command_line(const OlderSpellings& s, const std::string& flag);

// Moves the older flags into `o` (errors for a flag and its older spelling set differently, refused values), and
// prints one notice per accepted flag whose meaning lmforge honours differently.
void apply_older_spellings(const OlderSpellings& s, train::TrainOptions& o, std::ostream& notices);

// --deepspeed_config FILE on `world_size` ranks (train/deepspeed_config.h); nothing without the flag.
void apply_deepspeed_flags(const OlderSpellings& s, train::TrainOptions& o, int world_size, std::ostream& notices);

}  // namespace lmforge::cli
