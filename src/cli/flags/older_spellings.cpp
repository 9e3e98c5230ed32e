// defines: add_older_spellings(), apply_older_spellings(), apply_deepspeed_flags() (Megatron v1 and
//          Megatron-DeepSpeed flags on `lmforge train`)
#include "cli/flags/older_spellings.h"

#include <ostream>

#include "cli/flags/deepspeed_config.h"
#include "cli/flags/value_range.h"
#include "families/registry.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

void notice(std::ostream& out, const std::string& flag, const std::string& what) {
  out << "lmforge train: notice: " << flag << ": " << what << "\n";
}

}  // namespace

void add_older_spellings(CLI::App* cmd, OlderSpellings& s, train::TrainOptions& o) {
  auto add = [&](const std::string& name, auto& value, const std::string& help) {
    return cmd->add_option(name, value, help)->group(help_group(Source::kMegatronV1));
  };
  auto flag = [&](const std::string& name, bool& value, const std::string& help) {
    return cmd->add_flag(name, value, help)->group(help_group(Source::kMegatronV1));
  };
  add_alias_flags(cmd, {Source::kMegatronV1, Source::kDeepSpeedFlag});
  add("--data-impl", s.data_impl,
      "Megatron v1's dataset format: mmap (what lmforge prep writes and train reads) and infer are accepted; lazy "
      "and cached (older formats) are refused")
      ->check(CLI::IsMember({"mmap", "infer", "lazy", "cached"}));
  add("--distributed-backend", s.distributed_backend,
      "Megatron v1: nccl, gloo, mpi or ccl; accepted with a notice: lmforge trains on the CPU, its collectives run "
      "over MPI under mpirun/srun and over Gloo's TCP transport otherwise (--distributed-init-method, torchrun)")
      ->check(CLI::IsMember({"nccl", "gloo", "mpi", "ccl"}));
  add("--zero-stage", o.zero_stage,
      "Megatron-DeepSpeed's ZeRO stage: 0 (replicated optimizer), 1 (= --use-distributed-optimizer: optimizer "
      "state and update sharded), 2 (gradients sharded too: each micro-batch's buckets reduce-scattered as the "
      "backward finishes them and only this rank's piece kept; same results as 1); 3 is refused (parameters "
      "sharded too)")
      ->check(in_range(0, 3));
  add("--zero-allgather-bucket-size", s.zero_allgather_bucket_size,
      "Megatron-DeepSpeed: accepted with a notice: parameters are all-gathered per gradient bucket "
      "(--ddp-bucket-size)")
      ->check(at_least(1));
  flag("--zero-reduce-scatter", s.zero_reduce_scatter,
       "Megatron-DeepSpeed: accepted with a notice: ZeRO gradients are always reduce-scattered (rank-ordered sums)");
  flag("--zero-contigious-gradients", s.zero_contigious_gradients,
       "Megatron-DeepSpeed: accepted with a notice: the gradients always live in one flat buffer");
  flag("--partition-activations", s.partition_activations,
       "DeepSpeed activation checkpointing: accepted with a notice: the kept layer inputs are not split across "
       "tensor-parallel ranks (each keeps the whole [s, b, h] input); recomputation follows --checkpoint-activations");
  flag("--contigious-checkpointing", s.contigious_checkpointing,
       "DeepSpeed activation checkpointing: accepted with a notice: a GPU-fragmentation measure (kept inputs copied "
       "into one buffer) with nothing to do on the CPU");
  flag("--checkpoint-in-cpu", s.checkpoint_in_cpu,
       "DeepSpeed activation checkpointing: accepted with a notice: kept activations are in CPU memory already");
  flag("--synchronize-each-layer", s.synchronize_each_layer,
       "DeepSpeed activation checkpointing: accepted with a notice: no device streams; layers run in order");
  flag("--deepspeed-activation-checkpointing", s.deepspeed_activation_checkpointing,
       "Megatron-DeepSpeed: accepted with a notice: recomputation follows --checkpoint-activations / "
       "--recompute-granularity (lmforge's own, same results as without it)");
  flag("--cpu-optimizer", s.cpu_optimizer,
       "Megatron-DeepSpeed ZeRO-Offload: accepted with a notice: the optimizer runs on the CPU already");
  flag("--deepspeed", s.deepspeed, "Megatron-DeepSpeed: train with the --deepspeed_config JSON's settings");
  add(flag_names("--deepspeed_config", {Source::kArgparse}), s.deepspeed_config,
      "A DeepSpeed JSON config (with --deepspeed): train_batch_size, train_micro_batch_size_per_gpu, "
      "gradient_accumulation_steps (checked as DeepSpeed checks them: train = micro x accumulation x data-parallel "
      "size), gradient_clipping (absent: no clipping, as DeepSpeed), fp16 (enabled, loss_scale, "
      "initial_scale_power [default 16], loss_scale_window, hysteresis, min_loss_scale) and bf16 blocks, "
      "zero_optimization (stage 0, 1 or 2, reduce_bucket_size = --ddp-bucket-size), optimizer (Adam or AdamW: "
      "lmforge's AdamW; params lr, betas, eps, weight_decay; DeepSpeed's Lamb is refused), scheduler (WarmupLR, "
      "WarmupDecayLR, WarmupCosineLR with DeepSpeed's formulas), steps_per_print. A key and a flag setting one "
      "value differently are an error (except zero_optimization.stage, which wins over --zero-stage with a notice, "
      "as in DeepSpeed); unknown keys are listed in one warning");
}

void apply_older_spellings(const OlderSpellings& s, const GivenFlags& given, train::TrainOptions& o,
                           std::ostream& out) {
  if (given.given("--zero-stage")) {
    if (o.zero_stage == 3)
      throw Error("--zero-stage 3 (parameters sharded across ranks) is not implemented; stages 0, 1 and 2 are");
    if (o.zero_stage == 0 && o.use_distributed_optimizer)
      throw Error("--zero-stage 0 and --use-distributed-optimizer disagree (the latter is ZeRO stage 1)");
  }
  if (s.data_impl == "lazy" || s.data_impl == "cached")
    throw Error("--data-impl " + s.data_impl + ": lmforge reads Megatron's mmap indexed format (.bin/.idx as "
                "`lmforge prep` and Megatron's preprocess_data.py write it); the older lazy/cached formats are not "
                "implemented (give --data-impl mmap)");
  if (s.data_impl == "infer") notice(out, "--data-impl infer", "the dataset is read as mmap (the one format lmforge reads)");
  if (!s.distributed_backend.empty())
    notice(out, "--distributed-backend " + s.distributed_backend,
           "lmforge trains on the CPU: collectives run over MPI under mpirun/srun, over Gloo (TCP) otherwise");
  if (s.zero_allgather_bucket_size > 0)
    notice(out, "--zero-allgather-bucket-size", "parameters are all-gathered per gradient bucket (--ddp-bucket-size)");
  const std::pair<bool, const char*> accepted[] = {
      {s.zero_reduce_scatter, "--zero-reduce-scatter: ZeRO gradients are always reduce-scattered"},
      {s.zero_contigious_gradients, "--zero-contigious-gradients: the gradients always live in one flat buffer"},
      {s.partition_activations, "--partition-activations: kept layer inputs are not split across tensor-parallel "
                                "ranks (each keeps the whole input); recomputation as --checkpoint-activations says"},
      {s.contigious_checkpointing, "--contigious-checkpointing: a GPU-fragmentation measure, nothing to do on the CPU"},
      {s.checkpoint_in_cpu, "--checkpoint-in-cpu: kept activations are in CPU memory already"},
      {s.synchronize_each_layer, "--synchronize-each-layer: no device streams; layers run in order"},
      {s.deepspeed_activation_checkpointing, "--deepspeed-activation-checkpointing: recomputation follows "
                                             "--checkpoint-activations / --recompute-granularity"},
      {s.cpu_optimizer, "--cpu-optimizer: the optimizer runs on the CPU already"}};
  for (const auto& [set, line] : accepted)
    if (set) out << "lmforge train: notice: " << line << "\n";
  if (!s.deepspeed_config.empty() && !s.deepspeed)
    throw Error("--deepspeed_config " + s.deepspeed_config + " needs --deepspeed (as in Megatron-DeepSpeed)");
  if (s.deepspeed && s.deepspeed_config.empty())
    throw Error("--deepspeed needs --deepspeed_config FILE (lmforge has no other DeepSpeed settings)");
}

void apply_deepspeed_flags(const OlderSpellings& s, GivenFlags& given, train::TrainOptions& o, int world_size,
                           std::ostream& out) {
  if (s.deepspeed) apply_deepspeed_config(read_deepspeed_config(s.deepspeed_config), o, world_size, given, out);
  if (o.micro_batch_size <= 0)
    throw Error("--micro-batch-size is required (Megatron v1: --batch-size; or a DeepSpeed config's "
                "train_micro_batch_size_per_gpu / train_batch_size)");
  // (train electra: the --electra-size preset gives the learning rate when the flag does not.)
  const bool preset_lr = families::model_family(o.model_type).takes(families::FlagGroup::ELECTRA);
  if (!given.given("--lr") && !(s.deepspeed && o.schedule.lr > 0.0) && !preset_lr)
    throw Error("--lr is required (or a DeepSpeed config's optimizer.params.lr)");
}

}  // namespace lmforge::cli
