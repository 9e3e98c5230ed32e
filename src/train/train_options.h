// defines: lmforge::train::TrainOptions (everything `lmforge train gpt` takes, under Megatron's flag names),
//          validate_train_options(), data_prefixes()
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "optim/factory.h"
#include "optim/lr_schedule.h"
#include "text/tokenizer_factory.h"
#include "train/mixed_precision.h"

namespace lmforge::train {

// Field names follow Megatron's pretrain_gpt.py arguments (--num-layers → num_layers); defaults are Megatron's
// unless a comment says otherwise. validate_train_options() (trainer.h) checks them all before any work.
struct TrainOptions {
  // ---- model ----
  std::string model_type = "gpt";   // the subcommand: a family of families/registry.h (gpt, bert, t5)
  int num_layers = 0;               // --num-layers (required)
  int hidden_size = 0;              // --hidden-size (required)
  int num_attention_heads = 0;      // --num-attention-heads (required; must divide hidden_size)
  int seq_length = 0;               // --seq-length (required; tokens per sample)
  int max_position_embeddings = 0;  // --max-position-embeddings (0: seq_length; must be >= seq_length)
  int make_vocab_size_divisible_by = 128;  // --make-vocab-size-divisible-by (padded vocabulary; padded logits
                                           // take part in the softmax, as Megatron)
  double init_method_std = 0.02;    // --init-method-std
  double hidden_dropout = 0.1;      // --hidden-dropout: after the embedding and on each residual branch (Megatron)
  double attention_dropout = 0.1;   // --attention-dropout: on the attention probabilities (Megatron)
  int ffn_hidden_size = 0;          // --ffn-hidden-size (0: 4 x hidden_size; BERT and T5)

  // ---- BERT and T5 (`train bert`, `train t5`): Megatron's BertDataset / T5Dataset over sentence-level data ----
  bool bert_binary_head = true;     // off: --bert-no-binary-head (no token types, pooler or sentence-order loss)
  double mask_prob = 0.15;          // --mask-prob: share of tokens to predict
  double short_seq_prob = 0.1;      // --short-seq-prob: share of samples with a random shorter target length
  bool bert_post_layernorm = false; // --bert-post-layernorm: the original BERT (Google/NVIDIA/HF BertForPreTraining)
  std::string bert_config_file;     // --bert-config-file: a Google/NVIDIA bert_config.json (original BERT)
  bool no_bias_gelu_fusion = false; // --no-bias-gelu-fusion: exact erf GELU in the MLP too (Megatron's default fused
                                    // bias-GELU is the tanh form; BERT's LM head always uses erf)
  bool openai_gelu = false;         // --openai-gelu: the tanh GELU everywhere (MLP and LM head)
  double layernorm_epsilon = 0.0;   // --layernorm-epsilon / --norm-epsilon (0: 1e-5, the original BERT 1e-12)
  int decoder_num_layers = 0;       // --decoder-num-layers (T5; 0: the encoder's --num-layers)
  int decoder_seq_length = 0;       // --decoder-seq-length (T5; required)

  // ---- ELECTRA (`train electra`; families/electra/electra_family.cpp applies the preset and says each default) ----
  std::string electra_size = "small";    // --electra-size small|base|large: the sizes, lr and batch not given
  double generator_hidden_size = 0.0;    // --generator-hidden-size: fraction (<= 1) of --hidden-size or a width
                                         // (0: the preset's, 0.25; base 1/3)
  double generator_layers = 1.0;         // --generator-layers: fraction (<= 1) of --num-layers or a count
  int embedding_size = 0;                // --embedding-size (0: the preset's; no preset: --hidden-size)
  double disc_weight = 50.0;             // --disc-weight: loss = mlm + disc_weight x disc
  double sampling_temperature = 1.0;     // --sampling-temperature of the generator's Gumbel sampling
  int max_predictions_per_seq = 0;       // --max-predictions-per-seq (0: int((mask-prob + 0.005) x seq-length))
  double electra_mask_prob = 0.0;        // --mask-prob of train electra (0: the preset's, 0.15; large 0.25)

  // ---- tokenizer (decides the model's vocabulary) ----
  text::TokenizerOptions tokenizer;  // --tokenizer-type, --vocab-file, --merge-file

  // ---- data ----
  std::vector<std::string> data_path;  // --data-path: one prefix, or "weight prefix weight prefix ..." (a blend)
  std::string split = "969, 30, 1";    // --split: train, validation, test weights
  std::string data_cache_path;         // --data-cache-path (empty: <data dir>/cache/GPTDataset_indices)

  // ---- batches, schedule, optimizer ----
  int micro_batch_size = 0;            // --micro-batch-size (required)
  int64_t global_batch_size = 0;       // --global-batch-size (0: micro_batch_size; multiple of it)
  optim::LrScheduleArgs schedule;      // --lr, --min-lr, --lr-decay-style, --train-iters/--train-samples,
                                       // --lr-decay-iters/-samples, --lr-warmup-fraction/-iters/-samples,
                                       // --lr-warmup-init, --weight-decay, --start/end-weight-decay,
                                       // --weight-decay-incr-style (global_batch_size is filled in)
  double clip_grad = 1.0;              // --clip-grad (global L2 norm; 0 disables)
  optim::OptimizerConfig optimizer;    // --optimizer adam|lamb|sgd (adam), --adam-beta1 (0.9), --adam-beta2 (0.999),
                                       // --adam-eps (1e-8; also LAMB's), --sgd-momentum (0.9), --lamb-all-tensors
  uint32_t seed = 1234;                // --seed: initial weights and the data order

  // ---- logging and evaluation ----
  int log_interval = 100;              // --log-interval (iterations per log line; losses averaged over them)
  int eval_interval = 1000;            // --eval-interval (iterations between validation runs)
  int eval_iters = 100;                // --eval-iters (global batches per validation/test run; 0: none)
  std::string tensorboard_dir;         // --tensorboard-dir (empty: no event file)

  // ---- checkpoints ----
  std::string save;                    // --save: checkpoint directory (empty: never save)
  int save_interval = 0;               // --save-interval (0: only at the end)
  std::string load;                    // --load: resume from the latest checkpoint in this directory
  bool finetune = false;               // --finetune: weights only from --load (a save dir, an iteration dir, a
                                       // Hugging Face model dir or a .safetensors file); iteration, optimizer
                                       // and schedule start afresh
  bool override_opt_param_scheduler = false;        // --override-opt_param-scheduler: on --load keep this run's
                                                    // learning-rate/weight-decay schedule values
  bool use_checkpoint_opt_param_scheduler = false;  // --use-checkpoint-opt_param-scheduler: take the checkpoint's
  bool no_load_optim = false;                       // --no-load-optim: weights, iteration and data position from
                                                    // --load; optimizer state and schedule start afresh (Megatron)
  bool no_load_rng = false;                         // --no-load-rng: accepted with a notice (the random state is a
                                                    // function of --seed, nothing else is saved)
  int exit_interval = 0;               // --exit-interval: stop (after saving) when iteration % N == 0
  double exit_duration_in_mins = 0.0;  // --exit-duration-in-mins: stop (after saving) once training has run this
                                       // long (0: no limit)
  int threads = 0;                     // --threads: compute threads (0: OpenMP's default); not a Megatron flag
  kernels::Device device = kernels::Device::CPU;  // --device: where the model computes (kernels::backend_for)
  int64_t print_samples = 0;           // --print-samples N: write the first N samples of each split as JSON lines
                                       // (Megatron's field names) and exit without training
  bool skip_train = false;             // --skip-train: no training; evaluate (a --load'ed model) only (Megatron)

  // ---- activation recomputation (Megatron; model::GPTConfig says what each keeps) ----
  bool recompute_activations = false;  // --recompute-activations: = --recompute-granularity selective
  std::string recompute_granularity;   // --recompute-granularity full|selective (empty: none)
  std::string recompute_method;        // --recompute-method uniform|block (full only; required with it)
  int recompute_num_layers = 1;        // --recompute-num-layers: layers per chunk (uniform) or recomputed (block)

  // ---- mixed precision ----
  MixedPrecisionOptions precision;     // --fp16, --bf16, --loss-scale, --initial-loss-scale, --min-loss-scale,
                                       // --loss-scale-window, --hysteresis (train/mixed_precision.h)

  // ---- parallelism (ranks come from the launcher: mpirun / srun) ----
  bool use_distributed_optimizer = false;  // --use-distributed-optimizer: optimizer state and update sharded across
                                           // data-parallel ranks (ZeRO-1), parameters all-gathered after the step
  int zero_stage = 0;                      // --zero-stage / DeepSpeed zero_optimization.stage: 1 = the distributed
                                           // optimizer (ZeRO-1); 0 = as --use-distributed-optimizer says
  int64_t ddp_bucket_size = 0;             // --ddp-bucket-size: gradient elements per data-parallel bucket (0:
                                           // 4,194,304); smaller buckets start reducing earlier in the backward
  int tensor_model_parallel_size = 1;      // --tensor-model-parallel-size T: attention heads, MLP columns and the
                                           // vocabulary split over T ranks (Megatron); world size = T x data-parallel
  int pipeline_model_parallel_size = 1;    // --pipeline-model-parallel-size P (or DeepSpeed's --pipe-parallel-size,
                                           // 0 = 1): consecutive layers in P stages run by Megatron's 1F1B schedule;
                                           // world size = T x P x data-parallel
  int decoder_first_pipeline_num_layers = -1;  // --decoder-first-pipeline-num-layers (-1: an even share)
  int decoder_last_pipeline_num_layers = -1;   // --decoder-last-pipeline-num-layers (-1: an even share)
  int pipeline_model_parallel_split_rank = -1;  // --pipeline-model-parallel-split-rank S (T5: stages [0, S) hold
                                                // the encoder, [S, P) the decoder; -1: P / 2)

  // ---- unequal machines and fairseq's checkpoint retention (issue 15; cli/flags/fairseq_flags.h) ----
  bool balance_data_parallel = false;  // --balance-data-parallel: micro-batches per data-parallel rank in proportion
                                       // to measured speed (parallel/balanced_schedule.h)
  int64_t balance_interval = 10;       // --balance-interval: training steps between re-measurements
  int keep_interval_checkpoints = 0;   // fairseq's --keep-interval-updates N: after each save only the newest N
                                       // iteration checkpoints in --save stay (0: all stay)
};

// Checks the flags alone (no file is opened): required flags, heads dividing hidden size, seq-length within
// max-position-embeddings, global batch a multiple of the micro batch, exactly one of --train-iters and
// --train-samples, schedule flags (as Megatron resolves them), intervals, --save-interval without --save, ...
// Throws lmforge::Error naming the flag. Fills the defaults that depend on other flags into `options`.
void validate_train_options(TrainOptions& options);

// The dataset prefixes of --data-path: one prefix, or the prefixes of "weight prefix weight prefix ..." (a blend).
// Error for an odd-length blend.
std::vector<std::string> data_prefixes(const std::vector<std::string>& data_path);

}  // namespace lmforge::train
