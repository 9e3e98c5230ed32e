// defines: DeepSpeedConfig, read_deepspeed_config(), apply_deepspeed_config(): a DeepSpeed JSON config (--deepspeed
//          --deepspeed_config FILE), one more source of flag spellings (flags/aliases.h: its keys are table rows)
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags/aliases.h"
#include "optim/deepspeed_lr.h"
#include "train/train_options.h"

namespace lmforge::cli {

// The keys of DeepSpeed's config that lmforge honours (names as in DeepSpeed's docs). Absent keys stay unset.
struct DeepSpeedConfig {
  std::string path;
  std::optional<int64_t> train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps;
  std::optional<double> gradient_clipping;
  std::optional<int64_t> steps_per_print;
  // fp16 / bf16 blocks
  std::optional<bool> fp16_enabled, bf16_enabled;
  std::string bf16_key = "bf16";  // the block's name as written: "bf16" or DeepSpeed's older "bfloat16"
  std::optional<double> loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale;
  // zero_optimization
  std::optional<int64_t> zero_stage, reduce_bucket_size, allgather_bucket_size;
  // optimizer (type Adam or AdamW; "params")
  std::optional<std::string> optimizer_type;
  std::optional<double> lr, beta1, beta2, eps, weight_decay;
  // scheduler
  std::optional<optim::DeepSpeedLr> scheduler;
  std::vector<std::string> unknown_keys;  // dotted paths lmforge does not know (one warning lists them)
  std::vector<std::string> notices;       // keys accepted whose effect differs on this machine (one line each)
};

// Parses FILE; Error naming the file and the key for malformed JSON, a number beyond 64-bit integers or doubles (with
// the range), wrong value types, zero_optimization stage 3,
// an optimizer other than Adam/AdamW (DeepSpeed's Lamb is refused: see the message), Adam with adam_w_mode false,
// an unknown scheduler type.
DeepSpeedConfig read_deepspeed_config(const std::string& path);

// Sets `o` from the config, as DeepSpeed would on `world_size` ranks (data-parallel size D = world / (tensor x
// pipeline)). Batch keys follow DeepSpeed's _set_batch_related_parameters: given all three, train_batch_size must
// equal micro x accumulation x D; given two, the third follows; micro alone means accumulation 1. `given` holds
// the settings the command line gave (under any spelling): a key setting one of them differently is an error
// naming both (GivenFlags::check), except zero_optimization.stage, which wins over --zero-stage with a notice (as
// DeepSpeed's engine reads the JSON); fp16 and bf16 both enabled is an Error naming the two blocks. Writes the
// unknown-keys warning and the notices to `notices`.
void apply_deepspeed_config(const DeepSpeedConfig& c, train::TrainOptions& o, int world_size, GivenFlags& given,
                            std::ostream& notices);

}  // namespace lmforge::cli
