// defines: validate_train_options(), data_prefixes() (the flag rules of `lmforge train`, checked before any work)
#include "train/train_options.h"

#include <cmath>
#include <string>

#include "optim/factory.h"
#include "optim/lr_schedule.h"
#include "text/tokenizer_factory.h"
#include "families/registry.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::train {

// The dataset prefixes of --data-path: one prefix, or weight/prefix pairs (a blend).
std::vector<std::string> data_prefixes(const std::vector<std::string>& data_path) {
  if (data_path.size() == 1) return data_path;
  if (data_path.size() % 2 != 0)
    throw Error("--data-path: expected one dataset prefix or \"weight prefix\" pairs, got " +
                int_text((int64_t)data_path.size()) + " values");
  std::vector<std::string> prefixes;
  for (size_t i = 1; i < data_path.size(); i += 2) prefixes.push_back(data_path[i]);
  return prefixes;
}

void validate_train_options(TrainOptions& o) {
  auto need_positive = [](int64_t v, const char* flag) {
    if (v < 1) throw Error(std::string(flag) + " must be a positive integer (got " + int_text(v) + ")");
  };
  // Model sizes may come from --bert-config-file instead of flags, so the command line does not require them.
  for (const auto& [value, flag] : {std::pair{o.num_layers, "--num-layers"}, std::pair{o.hidden_size, "--hidden-size"},
                                    std::pair{o.num_attention_heads, "--num-attention-heads"},
                                    std::pair{o.seq_length, "--seq-length"}})
    if (value == 0) throw Error(std::string(flag) + " is required");
  need_positive(o.num_layers, "--num-layers");
  need_positive(o.hidden_size, "--hidden-size");
  need_positive(o.num_attention_heads, "--num-attention-heads");
  if (o.hidden_size % o.num_attention_heads != 0)
    throw Error("--num-attention-heads " + int_text(o.num_attention_heads) + " does not divide --hidden-size " +
                int_text(o.hidden_size) + " (each head takes hidden-size / heads channels)");
  need_positive(o.seq_length, "--seq-length");
  if (o.max_position_embeddings == 0) o.max_position_embeddings = o.seq_length;
  need_positive(o.max_position_embeddings, "--max-position-embeddings");
  if (o.seq_length > o.max_position_embeddings)
    throw Error("--seq-length " + int_text(o.seq_length) + " exceeds --max-position-embeddings " +
                int_text(o.max_position_embeddings) + " (the model has no position embedding beyond it)");
  need_positive(o.make_vocab_size_divisible_by, "--make-vocab-size-divisible-by");
  if (!(o.init_method_std > 0.0) || !std::isfinite(o.init_method_std))
    throw Error("--init-method-std must be a positive number");

  if (o.data_path.empty()) throw Error("--data-path is required (a dataset prefix made by `lmforge prep`)");
  data_prefixes(o.data_path);
  // The tokenizer decides the model's vocabulary size: its flags are checked before any work (its files when it is
  // made, after the layout checks).
  text::check_tokenizer_options(o.tokenizer);

  validate_mixed_precision(o.precision);
  // Megatron's rules (arguments.py): --recompute-activations is selective; a method only goes with full. (Megatron
  // v1's --checkpoint-activations is a spelling of full uniform recomputation: cli/flags/aliases.cpp.)
  if (o.recompute_activations) {
    if (!o.recompute_granularity.empty() && o.recompute_granularity != "selective")
      throw Error("--recompute-activations means --recompute-granularity selective, not " + o.recompute_granularity);
    o.recompute_granularity = "selective";
  }
  if (!o.recompute_granularity.empty() && o.recompute_granularity != "full" && o.recompute_granularity != "selective")
    throw Error("--recompute-granularity must be full or selective (got " + o.recompute_granularity + ")");
  if (o.recompute_granularity == "selective" && !o.recompute_method.empty())
    throw Error("--recompute-method is not supported with --recompute-granularity selective (Megatron: selective "
                "recomputes the attention core of every layer)");
  if (o.recompute_granularity == "full" && o.recompute_method.empty())
    throw Error("--recompute-granularity full needs --recompute-method uniform or block");
  if (!o.recompute_method.empty() && o.recompute_method != "uniform" && o.recompute_method != "block")
    throw Error("--recompute-method must be uniform or block (got " + o.recompute_method + ")");
  if (o.recompute_granularity.empty() && !o.recompute_method.empty())
    throw Error("--recompute-method needs --recompute-granularity full");
  if (o.recompute_num_layers < 1 || o.recompute_num_layers > o.num_layers)
    throw Error("--recompute-num-layers must be in [1, --num-layers " + int_text(o.num_layers) + "] (got " +
                int_text(o.recompute_num_layers) + ")");

  need_positive(o.micro_batch_size, "--micro-batch-size");
  if (o.global_batch_size == 0) o.global_batch_size = o.micro_batch_size;
  need_positive(o.global_batch_size, "--global-batch-size");
  if (o.global_batch_size % o.micro_batch_size != 0)
    throw Error("--global-batch-size " + int_text(o.global_batch_size) + " is not divisible by --micro-batch-size " +
                int_text(o.micro_batch_size) + " (the global batch is a whole number of micro-batches)");
  o.schedule.global_batch_size = o.global_batch_size;
  if (o.schedule.train_iters.has_value() == o.schedule.train_samples.has_value())
    throw Error("give exactly one of --train-iters and --train-samples");
  if (o.schedule.train_iters) need_positive(*o.schedule.train_iters, "--train-iters");
  if (o.schedule.train_samples) {
    need_positive(*o.schedule.train_samples, "--train-samples");
    if (*o.schedule.train_samples < o.global_batch_size)
      throw Error("--train-samples " + int_text(*o.schedule.train_samples) + " is less than one global batch (" +
                  int_text(o.global_batch_size) + ")");
  }
  if (!(o.schedule.lr >= 0.0) || !std::isfinite(o.schedule.lr)) throw Error("--lr must be >= 0");
  optim::OptimizerParamScheduler check(o.schedule);  // Megatron's schedule flag rules (throws naming the flag)

  if (!(o.clip_grad >= 0.0)) throw Error("--clip-grad must be >= 0 (0 disables clipping)");
  optim::validate_optimizer_config(o.optimizer);

  need_positive(o.log_interval, "--log-interval");
  need_positive(o.eval_interval, "--eval-interval");
  if (o.eval_iters < 0) throw Error("--eval-iters must be >= 0 (0: no evaluation)");
  if (o.save_interval < 0) throw Error("--save-interval must be >= 0");
  if (o.save_interval > 0 && o.save.empty()) throw Error("--save-interval needs --save DIR");
  if (o.exit_interval < 0) throw Error("--exit-interval must be >= 0");
  if (!(o.exit_duration_in_mins >= 0.0)) throw Error("--exit-duration-in-mins must be >= 0");
  if (o.finetune && o.load.empty()) throw Error("--finetune needs --load (the weights to start from)");
  if (o.override_opt_param_scheduler && o.use_checkpoint_opt_param_scheduler)
    throw Error("give only one of --override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler");
  for (const auto& [set, flag] : {std::pair{o.override_opt_param_scheduler, "--override-opt_param-scheduler"},
                                  std::pair{o.use_checkpoint_opt_param_scheduler, "--use-checkpoint-opt_param-scheduler"},
                                  std::pair{o.no_load_optim, "--no-load-optim"}, std::pair{o.no_load_rng, "--no-load-rng"}})
    if (set && o.load.empty()) throw Error(std::string(flag) + " needs --load (it says how to resume)");
  if (o.threads < 0) throw Error("--threads must be >= 0");
  if (o.print_samples < 0) throw Error("--print-samples must be >= 0");
  if (o.layernorm_epsilon < 0.0) throw Error("--layernorm-epsilon must be positive");
  need_positive(o.tensor_model_parallel_size, "--tensor-model-parallel-size");
  need_positive(o.pipeline_model_parallel_size, "--pipeline-model-parallel-size");
  if (o.pipeline_model_parallel_size == 1 &&
      (o.decoder_first_pipeline_num_layers >= 0 || o.decoder_last_pipeline_num_layers >= 0))
    throw Error("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers need "
                "--pipeline-model-parallel-size > 1");
  // The family's own rules (masked-LM data, encoder-decoder lengths, how its layers split over the stages).
  families::model_family(o.model_type).validate(o);
  if (o.zero_stage < 0 || o.zero_stage > 2)
    throw Error("--zero-stage " + int_text(o.zero_stage) + ": stages 0, 1 (optimizer state sharded) and 2 (gradients "
                "too) are implemented; stage 3 (parameters sharded too) is not");
  if (o.zero_stage == 2 && o.pipeline_model_parallel_size > 1)
    throw Error("--zero-stage 2 with --pipeline-model-parallel-size " + int_text(o.pipeline_model_parallel_size) +
                ": gradient sharding runs without pipeline stages (DeepSpeed does not combine them either); use "
                "stage 1 (--use-distributed-optimizer)");
  if (o.zero_stage >= 1) o.use_distributed_optimizer = true;
  if (o.ddp_bucket_size < 0) throw Error("--ddp-bucket-size must be >= 0 (0: 4194304 elements)");
  if (o.num_attention_heads % o.tensor_model_parallel_size != 0)
    throw Error("--tensor-model-parallel-size " + int_text(o.tensor_model_parallel_size) + " does not divide " +
                "--num-attention-heads " + int_text(o.num_attention_heads) + " (each rank takes whole heads)");
  if (o.make_vocab_size_divisible_by % o.tensor_model_parallel_size != 0)
    throw Error("--tensor-model-parallel-size " + int_text(o.tensor_model_parallel_size) + " does not divide " +
                "--make-vocab-size-divisible-by " + int_text(o.make_vocab_size_divisible_by) +
                " (each rank takes an equal slice of the padded vocabulary)");
}

}  // namespace lmforge::train
