// defines: add_train_command(): `lmforge train <family>` for each family of the registry (families/registry.h),
//          Megatron's pretrain_*.py flags on lmforge's trainer
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flags/aliases.h"
#include "cli/flags/distributed_gpus.h"
#include "cli/flags/electra_flags.h"
#include "cli/flags/fairseq_flags.h"
#include "cli/flags/older_spellings.h"
#include "cli/flags/value_range.h"
#include "cli/tokenizer_flags.h"
#include "dist/communicator.h"
#include "dist/launcher.h"
#include "dist/mpi_session.h"
#include "families/registry.h"
#include "train/trainer.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

// Megatron's mixed-precision flags (train/mixed_precision.h).
void add_mixed_precision_flags(CLI::App* cmd, train::MixedPrecisionOptions& p) {
  cmd->add_flag("--bf16", p.bf16,
                "bf16 mixed precision (Megatron --bf16): fp32 master weights, gradients and optimizer state; a bf16 "
                "working copy of the weights and bf16 activations; matrix products on bf16 inputs with fp32 "
                "accumulation (oneDNN's bf16 matmul on CPUs with AVX512-BF16 or AMX, cuBLASLt on GPUs); LayerNorm "
                "statistics, softmax and cross-entropy in fp32. On a CPU without AVX512-BF16/AMX the products are "
                "fp32 GEMMs of the exactly widened bf16 operands (the log says which path runs): the same numbers, "
                "at about fp32's speed there, lighter only on activation memory");
  cmd->add_flag("--fp16", p.fp16,
                "fp16 mixed precision with loss scaling (Megatron --fp16): fp32 master weights and optimizer state; "
                "the working weights, activations and gradients before unscaling are STORED in fp16 (so overflow "
                "and underflow are real), while the arithmetic runs in fp32 on the fp16-stored operands (matrix "
                "products accumulate in fp32, as fp16 GEMMs on GPUs); an iteration whose gradients overflow is skipped");
  cmd->add_option("--loss-scale", p.loss_scale,
                  "Static loss scale (a power of 2 helps; 0: dynamic with --fp16, none with --bf16): --fp16, and "
                  "--bf16 as Megatron's ConstantGradScaler (loss multiplied, gradients divided, overflowing "
                  "iterations skipped). A run stops with an error after " +
                      std::to_string(optim::LossScaler::kMaxConsecutiveSkips) +
                      " consecutive skipped iterations at a static scale, and one whose every iteration was skipped "
                      "ends with an error")
      ->capture_default_str();
  cmd->add_option("--initial-loss-scale", p.initial_loss_scale, "Initial dynamic loss scale (--fp16)")
      ->capture_default_str();
  cmd->add_option("--min-loss-scale", p.min_loss_scale,
                  "Smallest dynamic loss scale (--fp16); an overflow that would lower the scale when it is at this "
                  "minimum already stops the run with an error (as DeepSpeed), since training has diverged")
      ->capture_default_str();
  cmd->add_option("--loss-scale-window", p.loss_scale_window,
                  "Iterations without overflow before the dynamic loss scale doubles (--fp16)")
      ->capture_default_str();
  cmd->add_option("--hysteresis", p.hysteresis,
                  "Overflowing iterations before the dynamic loss scale halves (--fp16; refilled when it grows)")
      ->capture_default_str();
}

}  // namespace
namespace {

// How the ranks of a job find each other when no MPI launcher started them (fairseq's and Megatron's flags).
struct DistributedFlags {
  std::string init_method;
  int world_size = -1, rank = -1;
  int gpus = -1, device_id = -1;  // accepted for scripts written for GPUs; lmforge trains on the CPU
  double timeout_minutes = 10.0;  // Megatron's default
};

// `finish` completes the options once the world size is known (a DeepSpeed config's batch sizes depend on it); it
// writes its notices to the stream it is given (rank 0's stderr, nothing on the other ranks).
using FinishOptions = std::function<void(train::TrainOptions&, int world_size, std::ostream& notices)>;

// Trains on `comm`'s ranks; any error on this rank ends the job with this rank's reason (comm.abort).
void train_on(dist::Communicator& comm, train::TrainOptions options, const FinishOptions& finish) {
  try {
    std::ostream quiet(nullptr);  // only one rank logs (rank 0; under pipelines the last rank)
    finish(options, comm.size(), comm.rank() == 0 ? std::cerr : quiet);
    const int tensor_parallel = options.tensor_model_parallel_size * options.pipeline_model_parallel_size;
    const int log_rank = train::logging_rank(options, comm.size());
    train::Trainer trainer(std::move(options), comm.rank() == log_rank ? std::cout : quiet, comm);
    trainer.run();
    // What each step put on the wire, against a bandwidth-optimal all-reduce of the fp32 gradients
    // (reduce-scatter + all-gather, 2·(N−1)/N·4·P bytes per rank; the distributed optimizer moves the same
    // volume: gradients reduce-scattered, parameters all-gathered).
    const size_t steps = trainer.history().size();
    if (comm.rank() == 0 && steps > 0 && tensor_parallel == 1) {  // (with T·P > 1 the traffic is in sub-groups)
      const dist::CommStats& s = comm.stats();
      const double n = comm.size(), params = (double)trainer.model().table().local_numel();
      const double per_step = double(s.reduce_scatter_bytes + s.all_gather_bytes) / (double)steps;
      const double theory = 2.0 * (n - 1.0) / n * 4.0 * params;
      std::printf("communication per iteration on rank 0: %.0f bytes (reduce-scatter %.0f, all-gather %.0f; "
                  "theory 2(N-1)/N x 4 x %.0f parameters = %.0f, ratio %.4f); small all-reduces %llu bytes in "
                  "all, broadcasts %llu\n",
                  per_step, (double)s.reduce_scatter_bytes / (double)steps, (double)s.all_gather_bytes / (double)steps,
                  params, theory, per_step / theory, (unsigned long long)s.all_reduce_bytes,
                  (unsigned long long)s.broadcast_bytes);
    }
    std::cout.flush();
    comm.barrier();
  } catch (const std::exception& e) {
    comm.abort("lmforge train", e.what(), 1);
  }
}

// One process; every rank of an MPI job (mpirun, or srun with Open MPI's PMI support); or ranks started by hand
// (--distributed-init-method tcp://) or by torchrun (its environment), which meet at rank 0's TCP store and run
// their collectives over Gloo. Under MPI any error on any rank ends the whole job at once with that rank's reason
// (MPI_Abort); under Gloo the failing rank exits and the others see its connections close and end too, and every
// wait is bounded by --distributed-timeout-minutes, so no rank waits forever for one that is gone or stopped.
void run_training(train::TrainOptions options, const DistributedFlags& flags, const FinishOptions& finish) {
  if (flags.gpus > 1) {  // fairseq: this command starts G ranks (cli/flags/distributed_gpus.h)
    const DistributedGpusPlan plan = plan_distributed_gpus(flags.gpus, flags.rank, flags.world_size, flags.init_method);
    if (const int status = run_distributed_gpus(plan, own_arguments()); status != 0)
      throw Error("a rank started by --distributed-gpus " + std::to_string(flags.gpus) + " failed (exit status " +
                  std::to_string(status) + "); the others were ended");
    return;
  }
  dist::RankRequest request;
  request.rank = flags.rank;
  request.world_size = flags.world_size;
  request.init_method = flags.init_method;
  request.rank_flag = "--distributed-rank";
  request.size_flag = "--distributed-world-size";
  const dist::RankInfo info = dist::discover_rank(request);
  if (!info.notice.empty()) std::fprintf(stderr, "lmforge train: notice: %s\n", info.notice.c_str());
  const bool gpu = options.device == kernels::Device::CUDA;  // each rank takes its local rank's GPU (kernels/cuda)
  if (flags.device_id >= 0)
    std::fprintf(stderr, "lmforge train: note: rank %d of %d trains on the %s; --device-id ignored (%s)\n", info.rank,
                 info.world_size, gpu ? "GPU of its rank on the node" : "CPU",
                 gpu ? "the ranks' GPUs follow LOCAL_RANK / the launcher's local rank" : "no GPUs are used");
  if (!info.use_mpi && info.world_size == 1) {
    finish(options, 1, std::cerr);
    train::Trainer trainer(std::move(options), std::cout);
    trainer.run();
    return;
  }
  if (info.use_gloo) {
    const auto timeout = std::chrono::milliseconds((long long)(flags.timeout_minutes * 60000.0));
    std::unique_ptr<dist::Communicator> comm;
    try {
      comm = dist::make_gloo_communicator(
          {info.rendezvous, info.rank, info.world_size, timeout, info.store, info.store_prefix});
    } catch (const std::exception& e) {
      throw Error("rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size) + " (" +
                  info.origin + "): " + e.what());
    }
    train_on(*comm, std::move(options), finish);
    return;
  }
  if (!info.use_mpi && info.source != dist::RankSource::SlurmTasks && info.source != dist::RankSource::PmiEnv)
    throw Error("this process is rank " + std::to_string(info.rank) + " of " + std::to_string(info.world_size) +
                " (" + info.origin + "), but distributed training needs collectives: launch it with mpirun -np N "
                "or srun, or give every rank --distributed-init-method tcp://HOST:PORT");
  dist::MpiSession mpi;
  std::unique_ptr<dist::Communicator> comm =
      dist::make_mpi_communicator(std::chrono::milliseconds((long long)(flags.timeout_minutes * 60000.0)));
  if (!info.use_mpi && comm->size() != info.world_size)
    comm->abort("lmforge train",
                "the launcher reports " + std::to_string(info.world_size) + " ranks (" + info.origin +
                    ") but MPI sees " + std::to_string(comm->size()) +
                    " (an Open MPI without this launcher's PMI support?)",
                1);
  train_on(*comm, std::move(options), finish);
}

void add_distributed_flags(CLI::App* cmd, DistributedFlags& f) {
  cmd->add_option("--distributed-init-method", f.init_method,
                  "Start ranks without mpirun (fairseq): tcp://HOST:PORT of rank 0, which listens there while every "
                  "rank connects to meet; the collectives then run over Gloo's TCP transport, each rank on the "
                  "interface that reaches HOST (or on the interface named by GLOO_SOCKET_IFNAME). Rank and world size "
                  "come from --distributed-rank and --distributed-world-size or the environment (torchrun's RANK and "
                  "WORLD_SIZE, Slurm). Without this flag, torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                  "start the same way (rendezvous at tcp://MASTER_ADDR:MASTER_PORT; under torch.distributed.launch "
                  "or a static torchrun, which hold that port themselves, with TORCHELASTIC_USE_AGENT_STORE=True, "
                  "every rank joins the launcher's own c10d TCPStore there instead). The launcher's --local_rank=N "
                  "(or --local-rank N) is accepted anywhere on the line and must agree with LOCAL_RANK");
  cmd->add_option("--distributed-world-size", f.world_size,
                  "Ranks of a --distributed-init-method job (default: WORLD_SIZE or the launcher's)")
      ->check(at_least(1));
  cmd->add_option("--distributed-rank", f.rank,
                  "This process's rank in a --distributed-init-method job, 0 to world size - 1 (default: RANK or the "
                  "launcher's); rank 0 listens at the init method's address")
      ->check(at_least(0));
  cmd->add_option("--distributed-timeout-minutes", f.timeout_minutes,
                  "How long the rendezvous (Gloo) and every wait of a collective or transfer for a peer may take "
                  "before the job ends with the wait named and, where it is known, the silent rank (fractions "
                  "allowed, e.g. 0.5); over Gloo and under mpirun alike. A peer whose process died ends the job at "
                  "once")
      ->check(greater_than(0))
      ->capture_default_str();
  cmd->add_option("--distributed-gpus", f.gpus,
                  "fairseq's GPUs per node: this command starts G ranks, --distributed-rank .. +G-1 (default rank 0), "
                  "as fairseq spawns one process per GPU (on the CPU a \"GPU\" is one process; with --device cuda each "
                  "rank takes the GPU of its rank on the node). G must divide --distributed-world-size (default G); a "
                  "world of several commands needs --distributed-init-method, one command alone meets at a free local "
                  "port. A failing rank ends the others. 1: this process alone")
      ->check(at_least(0));
  cmd->add_option("--device-id", f.device_id,
                  "fairseq's GPU of this process: accepted and ignored with a notice (with --device cuda the GPU "
                  "is the process's rank on its node modulo the visible GPUs)")
      ->check(at_least(0));
}

// The flags every `lmforge train <model>` takes (Megatron's common arguments), into the command's own options.
struct CommandState {
  CLI::App* cmd = nullptr;
  std::shared_ptr<train::TrainOptions> options = std::make_shared<train::TrainOptions>();
  std::shared_ptr<DistributedFlags> dist = std::make_shared<DistributedFlags>();
  std::shared_ptr<OlderSpellings> older = std::make_shared<OlderSpellings>();  // Megatron v1 / DeepSpeed flags
  std::shared_ptr<int> kv_channels = std::make_shared<int>(0);                // --kv-channels (0: not given)
};

// Megatron's --kv-channels: the width of each attention head's query/key/value projection, by default
// hidden / heads. lmforge's attention projects to exactly hidden / heads channels per head (the weights are
// [hidden, hidden]), so another value is refused; the equal one (what Megatron's T5 scripts pass) is accepted.
// BERT's sizes may come from --bert-config-file: they are read as the trainer will read them.
void check_kv_channels(int kv_channels, const train::TrainOptions& options) {
  train::TrainOptions sizes = options;
  families::model_family(sizes.model_type).apply_config_file(sizes);
  const int hidden = sizes.hidden_size, heads = sizes.num_attention_heads;
  if (hidden <= 0 || heads <= 0 || hidden % heads != 0) return;  // the trainer names the size flag at fault
  if (kv_channels != hidden / heads)
    throw Error("--kv-channels " + std::to_string(kv_channels) + ": lmforge's attention heads are --hidden-size / "
                "--num-attention-heads = " + std::to_string(hidden) + " / " + std::to_string(heads) + " = " +
                std::to_string(hidden / heads) + " channels wide (Megatron's default for --kv-channels); a "
                "projection of another width is not implemented");
}

void add_common_train_flags(CLI::App* cmd, CommandState& state, const families::ModelFamily& family) {
  state.cmd = cmd;
  train::TrainOptions* o = state.options.get();
  const bool encoder_decoder = family.takes(families::FlagGroup::ENCODER_DECODER);
  // BERT's sizes may come from --bert-config-file, ELECTRA's from --electra-size; the trainer says which flag is
  // missing.
  const bool sizes_from_file = family.takes(families::FlagGroup::BERT) || family.takes(families::FlagGroup::ELECTRA);
  if (encoder_decoder) {
    cmd->add_option(flag_names("--num-layers", {Source::kMegatron}), o->num_layers,
                    "Encoder layers (Megatron accepts either name)")
        ->required();
    cmd->add_option("--decoder-num-layers", o->decoder_num_layers,
                    "Decoder layers (default: the encoder's; Megatron's own T5 script omits it and then fails)")
        ->check(at_least(1));
  } else {
    CLI::Option* opt = cmd->add_option("--num-layers", o->num_layers, "Transformer layers");
    if (!sizes_from_file) opt->required();
  }
  CLI::Option* hidden_opt = cmd->add_option("--hidden-size", o->hidden_size, "Model width");
  CLI::Option* heads_opt =
      cmd->add_option("--num-attention-heads", o->num_attention_heads, "Attention heads (must divide --hidden-size)");
  if (!sizes_from_file) {
    hidden_opt->required();
    heads_opt->required();
  }
  if (encoder_decoder) {
    cmd->add_option(flag_names("--seq-length", {Source::kMegatron}), o->seq_length,
                    "Encoder tokens per sample (give one of the two names, as Megatron)")
        ->required();
    cmd->add_option("--decoder-seq-length", o->decoder_seq_length,
                    "Decoder tokens per sample: sentinels and the masked spans, [BOS] first (labels end in [EOS])")
        ->required()
        ->check(at_least(1));
  } else {
    cmd->add_option("--seq-length", o->seq_length, "Tokens per sample")->required();
  }
  if (family.takes(families::FlagGroup::MASKED_LM)) {
    cmd->add_option("--ffn-hidden-size", o->ffn_hidden_size, "Inner width of the MLP (default: 4 x --hidden-size)")
        ->check(at_least(1));
    cmd->add_option("--mask-prob", o->mask_prob,
                    "Share of each sample's tokens to predict (Megatron's budget: min(mask-prob x target length, "
                    "max(1, round(mask-prob x tokens))); whole words, n-grams of up to " +
                        family.masking_help() + ")")
        ->check(in_range(0, 1))
        ->capture_default_str();
    cmd->add_option("--short-seq-prob", o->short_seq_prob,
                    "Share of samples given a random target length in [2, max] instead of the maximum (Megatron)")
        ->check(in_range(0, 1))
        ->capture_default_str();
    cmd->add_flag("--no-bias-gelu-fusion", o->no_bias_gelu_fusion,
                  "Exact erf GELU in the MLP (Megatron's default fused bias-GELU computes the tanh form)");
    cmd->add_flag("--openai-gelu", o->openai_gelu, "The tanh GELU everywhere, also in BERT's LM head (Megatron)");
    cmd->add_option(flag_names("--layernorm-epsilon", {Source::kMegatron}), o->layernorm_epsilon,
                    "Epsilon of every LayerNorm (default: 1e-5 as Megatron; 1e-12 for the original BERT)")
        ->check(greater_than(0));
  }
  add_device_flag(cmd, o->device);
  cmd->add_option("--max-position-embeddings", o->max_position_embeddings,
                  "Rows of the position table (default: --seq-length)");
  cmd->add_option("--make-vocab-size-divisible-by", o->make_vocab_size_divisible_by,
                  "Pad the vocabulary to a multiple of this")
      ->capture_default_str();
  cmd->add_option("--init-method-std", o->init_method_std, "Std of the normal initialisation")->capture_default_str();
  cmd->add_option("--hidden-dropout", o->hidden_dropout,
                  "Dropout probability after the embeddings and on every residual branch (attention and MLP "
                  "outputs); masks come from a counter-based generator keyed by seed, iteration, micro-batch, "
                  "layer and element, so they do not depend on threads, parallel layout or resume point")
      ->check(in_range(0, 0.999))
      ->capture_default_str();
  cmd->add_option("--attention-dropout", o->attention_dropout, "Dropout probability on the attention probabilities")
      ->check(in_range(0, 0.999))
      ->capture_default_str();
  o->tokenizer.type = family.default_tokenizer_type();
  // Training reads token ids from the dataset: the tokenizer only sizes the vocabulary and names the EOD id.
  o->tokenizer.size_and_eod_only = true;
  add_tokenizer_flags(cmd, o->tokenizer);
  CLI::Option* tokenizer_type = cmd->get_option("--tokenizer-type");
  tokenizer_type->description(tokenizer_type->get_description() + ". Default for train " + family.name() + ": " +
                              o->tokenizer.type + ", as Megatron's pretrain_" + family.name() +
                              ".py sets it");
  cmd->add_option("--kv-channels", *state.kv_channels,
                  "Megatron's query/key/value channels per attention head: accepted when it equals --hidden-size / "
                  "--num-attention-heads (Megatron's default, which lmforge's attention always uses); another value "
                  "is refused")
      ->check(at_least(1));

  cmd->add_option("--data-path", o->data_path,
                  "Dataset prefix (<prefix>.bin/.idx), or weight/prefix pairs for a blend: 0.7 a 0.3 b");
  cmd->add_option("--split", o->split, "Train, validation, test proportions of the documents")->capture_default_str();
  cmd->add_option("--data-cache-path", o->data_cache_path,
                  "Where the sample indices (.npy) are cached (default: <data dir>/cache/GPTDataset_indices)");

  // (Required, unless --batch-size or a DeepSpeed config gives it: checked once the options are complete.)
  cmd->add_option("--micro-batch-size", o->micro_batch_size, "Samples per forward/backward (required)");
  cmd->add_option("--global-batch-size", o->global_batch_size,
                  "Samples per optimizer step (a multiple of --micro-batch-size x data-parallel size; default: "
                  "micro batch x data-parallel size, as Megatron)");
  optim::LrScheduleArgs& s = o->schedule;
  // (The settings Megatron leaves None are std::optional: unset unless given.)
  cmd->add_option("--train-iters", s.train_iters, "Optimizer steps to train (or --train-samples)");
  cmd->add_option("--train-samples", s.train_samples, "Samples to train on (or --train-iters)");
  cmd->add_option("--lr", s.lr, "Peak learning rate (required, unless a DeepSpeed config gives it)");
  cmd->add_option("--min-lr", s.min_lr, "Learning rate at the end of the decay")->capture_default_str();
  cmd->add_option("--lr-decay-style", s.lr_decay_style,
                  "Decay after warm-up (Megatron's styles). nvidia-poly-warmup: NVIDIA DLE BERT's PolyWarmUpScheduler "
                  "for the LAMB recipe: with x = k/T (k the number of the step about to be taken, from 1; T the decay "
                  "iterations), lr = lr*x/w while x < w (w = --lr-warmup-fraction, or the warm-up iterations over "
                  "T), then lr*(1-x)^0.5 — a step down at the end of warm-up (15% for w = 0.2843), 0 at the last "
                  "step; --min-lr and --lr-warmup-init must stay 0")
      ->check(CLI::IsMember({"constant", "linear", "cosine", "inverse-square-root", "nvidia-poly-warmup"}))
      ->capture_default_str();
  cmd->add_option("--lr-decay-iters", s.lr_decay_iters, "Iterations of decay (default: --train-iters)");
  cmd->add_option("--lr-decay-samples", s.lr_decay_samples, "Samples of decay (default: --train-samples)");
  cmd->add_option("--lr-warmup-fraction", s.lr_warmup_fraction, "Warm-up as a fraction of the decay steps");
  cmd->add_option("--lr-warmup-iters", s.lr_warmup_iters, "Warm-up iterations")->capture_default_str();
  cmd->add_option("--lr-warmup-samples", s.lr_warmup_samples, "Warm-up samples")->capture_default_str();
  cmd->add_option("--lr-warmup-init", s.lr_warmup_init, "Learning rate at the start of warm-up")->capture_default_str();
  cmd->add_option("--weight-decay", s.weight_decay,
                  "Weight decay of matrices: decoupled for adam and lamb (inside the update), L2 added to the "
                  "gradient for sgd (torch.optim.SGD's weight_decay, as Megatron passes it)")
      ->capture_default_str();
  cmd->add_option("--start-weight-decay", s.start_weight_decay, "Weight decay at the start (incr. style)");
  cmd->add_option("--end-weight-decay", s.end_weight_decay, "Weight decay at the end (incr. style)");
  cmd->add_option("--weight-decay-incr-style", s.weight_decay_incr_style, "constant, linear or cosine")
      ->check(CLI::IsMember({"constant", "linear", "cosine"}))
      ->capture_default_str();
  cmd->add_option("--clip-grad", o->clip_grad, "Clip the global gradient norm to this (0: off)")->capture_default_str();
  optim::OptimizerConfig& opt = o->optimizer;
  cmd->add_option("--optimizer", opt.kind,
                  "adam: torch.optim.AdamW (Megatron's default). lamb: LAMB with NVIDIA apex FusedLAMB's arithmetic "
                  "(after the --clip-grad global-norm clip: bias-corrected moments m, v with --adam-beta1/2; update "
                  "u = m^/(sqrt(v^) + eps) + wd*p with decoupled decay; each tensor steps by lr*|p|/|u|*u, the "
                  "trust ratio |p|/|u| taken over the whole tensor also when --use-distributed-optimizer or "
                  "--tensor-model-parallel-size cut it, and 1 when either norm is 0; tensors without weight decay "
                  "take plain Adam steps unless --lamb-all-tensors). sgd: torch.optim.SGD with --sgd-momentum, as "
                  "Megatron")
      ->check(CLI::IsMember({"adam", "lamb", "sgd"}))
      ->capture_default_str();
  cmd->add_option("--adam-beta1", opt.beta1, "beta1 of adam and lamb (first-moment decay)")->capture_default_str();
  cmd->add_option("--adam-beta2", opt.beta2, "beta2 of adam and lamb (second-moment decay)")->capture_default_str();
  cmd->add_option("--adam-eps", opt.eps,
                  "epsilon of adam and lamb, added to sqrt(v^) (apex FusedLAMB's own default is 1e-6)")
      ->capture_default_str();
  cmd->add_option("--sgd-momentum", opt.sgd_momentum,
                  "Momentum of --optimizer sgd: buffer b = g at the first step, then momentum*b + g; p -= lr*b (0: "
                  "plain SGD, no state); with adam or lamb it has no effect, as in Megatron, and a notice says so")
      ->capture_default_str();
  cmd->add_flag("--lamb-all-tensors", opt.lamb_all_tensors,
                "With --optimizer lamb: apply the trust ratio to every tensor, also biases and LayerNorms that have "
                "no weight decay (apex use_nvlamb=True, the LAMB paper's NVLAMB); without it they take plain Adam "
                "steps (apex's default)");
  cmd->add_option("--seed", o->seed, "Seed of the initial weights and of the data order")->capture_default_str();

  cmd->add_option("--log-interval", o->log_interval, "Iterations per log line (losses averaged over them)")
      ->capture_default_str();
  cmd->add_option("--eval-interval", o->eval_interval, "Iterations between validation runs")->capture_default_str();
  cmd->add_option("--eval-iters", o->eval_iters,
                  "Global batches per validation run and per final test run (0: no evaluation)")
      ->capture_default_str();
  cmd->add_option("--tensorboard-dir", o->tensorboard_dir,
                  "Write TensorBoard scalars here (lm loss, learning-rate, grad-norm, throughput, validation/test "
                  "loss and ppl)");
  cmd->add_option("--save", o->save, "Checkpoint directory to write");
  cmd->add_option("--save-interval", o->save_interval, "Iterations between checkpoints (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--load", o->load, "Resume from the latest checkpoint in this directory (see --finetune)");
  cmd->add_flag("--finetune", o->finetune,
                "Load weights only from --load (also a Hugging Face GPT-2 .safetensors or model dir); iteration, "
                "optimizer and schedule start from zero");
  cmd->add_flag("--override-opt_param-scheduler", o->override_opt_param_scheduler,
                "With --load: continue with this run's learning-rate and weight-decay schedule flags where they "
                "differ from the checkpoint's (e.g. a larger --train-iters extends the decay)");
  cmd->add_flag("--use-checkpoint-opt_param-scheduler", o->use_checkpoint_opt_param_scheduler,
                "With --load: continue with the checkpoint's schedule values, whatever this run's flags say");
  cmd->add_flag("--no-load-optim", o->no_load_optim,
                "With --load: take weights, iteration and data position, but start the optimizer state and the "
                "learning-rate schedule afresh (as Megatron)");
  cmd->add_flag("--no-load-rng", o->no_load_rng,
                "Accepted for Megatron scripts: lmforge saves no generator state (data order and dropout masks are "
                "functions of --seed, the iteration and the sample counters), so there is nothing to skip; a "
                "notice says so");
  cmd->add_option("--exit-interval", o->exit_interval,
                  "Stop when the iteration is a multiple of this, after saving (a later --load continues)")
      ->capture_default_str();
  cmd->add_option("--exit-duration-in-mins", o->exit_duration_in_mins,
                  "Stop after training this many minutes, after saving (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Compute threads (0: OpenMP's default; not a Megatron flag)")
      ->capture_default_str();
  cmd->add_option("--tensor-model-parallel-size", o->tensor_model_parallel_size,
                  "Tensor-parallel ranks per model (Megatron: column/row-parallel attention and MLP, "
                  "vocabulary-parallel embedding and cross-entropy); world size = this x data-parallel size; "
                  "checkpoints stay whole Hugging Face models, so any layout loads any other")
      ->capture_default_str();
  cmd->add_option("--pipeline-model-parallel-size", o->pipeline_model_parallel_size,
                  "Pipeline stages per model (Megatron): consecutive transformer layers in P stages, the embedding "
                  "on the first and the final LayerNorm, tied LM head and loss on the last, run by Megatron's 1F1B "
                  "schedule (activations sent point to point; stages recompute a micro-batch's forward before "
                  "its backward, so each holds one micro-batch of activations). World size = tensor x pipeline x "
                  "data-parallel size, ranks laid out as Megatron's (tensor innermost, then data, then pipeline); "
                  "the last rank logs. train gpt and train bert split their layers evenly; train t5 puts the "
                  "encoder before --pipeline-model-parallel-split-rank and the decoder from it")
      ->capture_default_str();
  cmd->add_option("--decoder-first-pipeline-num-layers", o->decoder_first_pipeline_num_layers,
                  "Transformer layers on the first pipeline stage (it also holds the embedding); the other stages "
                  "split the rest evenly (default: an even share)");
  cmd->add_option("--decoder-last-pipeline-num-layers", o->decoder_last_pipeline_num_layers,
                  "Transformer layers on the last pipeline stage (it also holds the LM head and the loss); the other "
                  "stages split the rest evenly (default: an even share)");
  cmd->add_option("--pipeline-model-parallel-split-rank", o->pipeline_model_parallel_split_rank,
                  "train t5: the pipeline stage where the decoder starts (Megatron's rank where encoder and decoder "
                  "are split): stages 0..S-1 hold the encoder's layers (the embedding on stage 0, the encoder's "
                  "final LayerNorm on stage S-1), stages S..P-1 the decoder's (a copy of the embedding on stage S, "
                  "the head and loss on the last), each stack split evenly; the encoder's output travels with the "
                  "decoder's activations to every decoder stage. Default: P/2 (Megatron requires the flag)");
  cmd->add_option("--ddp-bucket-size", o->ddp_bucket_size,
                  "Gradient elements per data-parallel bucket (0: 4194304); each bucket's reduction starts in the "
                  "backward pass as soon as its gradients are final")
      ->capture_default_str();
  cmd->add_flag("--use-distributed-optimizer", o->use_distributed_optimizer,
                "Shard the optimizer state and update across data-parallel ranks (ZeRO-1): gradients "
                "reduce-scattered, parameters all-gathered; same results as the replicated optimizer (LAMB's "
                "per-tensor norms are all-reduced, so a shard may cut a tensor). Ranks: mpirun -np N lmforge train gpt "
                "... (each rank runs global-batch / (micro-batch x N) micro-batches)");

  add_mixed_precision_flags(cmd, o->precision);
  cmd->add_flag("--recompute-activations", o->recompute_activations,
                "Selective activation recomputation (= --recompute-granularity selective): the attention core's "
                "[B,H,T,T] probabilities are recomputed in the backward instead of kept");
  cmd->add_option("--recompute-granularity", o->recompute_granularity,
                  "full: whole transformer layers are recomputed in the backward, only chunk boundaries kept; "
                  "selective: the attention core only (losses bit for bit those without recomputation)");
  cmd->add_option("--recompute-method", o->recompute_method,
                  "With full: uniform (layers in chunks of --recompute-num-layers, each chunk's input kept) or "
                  "block (the first --recompute-num-layers layers recomputed, the rest kept)");
  cmd->add_option("--recompute-num-layers", o->recompute_num_layers,
                  "Layers per recomputed chunk (uniform) or layers recomputed (block)")
      ->capture_default_str();
  cmd->add_option("--print-samples", o->print_samples,
                  "Build the datasets exactly as training would with these flags, write the first N samples of each "
                  "split to stdout as JSON lines {\"split\": \"train\"|\"valid\"|\"test\", \"index\": i, <fields "
                  "under the names Megatron's dataset returns>} and exit without building the model or training")
      ->check(at_least(0));
  cmd->add_flag("--skip-train", o->skip_train,
                "Do not train: evaluate the validation and test splits (of a --load'ed checkpoint) and exit (Megatron)");
  add_distributed_flags(cmd, *state.dist);
  add_balance_flags(cmd, *o);
  add_older_spellings(cmd, *state.older, *o);
}

// Resolves the other spellings into lmforge's settings (flags/aliases.h), gives the notices, lets `adjust`
// (fairseq's own flags) translate into them, and trains.
using AdjustOptions = std::function<void(train::TrainOptions&, DistributedFlags&, GivenFlags&)>;
void run_command(const CommandState& state, const AdjustOptions& adjust = nullptr) {
  GivenFlags given;
  resolve_aliases(state.cmd, given);
  train::TrainOptions options = *state.options;
  if (*state.kv_channels > 0) check_kv_channels(*state.kv_channels, options);
  if (given.given("--sgd-momentum") && options.optimizer.kind != "sgd")
    std::cerr << "lmforge train: notice: --sgd-momentum has no effect with --optimizer " << options.optimizer.kind
              << " (it applies to sgd only)\n";
  DistributedFlags dist = *state.dist;
  if (adjust) adjust(options, dist, given);
  run_training(std::move(options), dist,
               [older = state.older, given](train::TrainOptions& o, int world_size, std::ostream& notices) mutable {
                 apply_older_spellings(*older, given, o, notices);
                 apply_deepspeed_flags(*older, given, o, world_size, notices);
               });
}

}  // namespace

namespace {
// fairseq's own flags (cli/flags/fairseq_flags.h), with the data-parallel size the job will have (--update-freq).
AdjustOptions fairseq_adjuster(std::shared_ptr<FairseqFlags> fairseq) {
  return [fairseq](train::TrainOptions& o, DistributedFlags& d, GivenFlags& given) {
    std::string init = d.init_method;
    if (const std::string url = fairseq_init_method(fairseq->distributed_port, init); !url.empty()) init = url;
    dist::RankRequest request;
    request.rank = d.rank;
    request.world_size = d.world_size;
    request.init_method = init;
    if (d.gpus > 1) {  // this command only starts the ranks (run_training), each of which adjusts for itself
      d.init_method = init;
      return;
    }
    request.rank_flag = "--distributed-rank";
    request.size_flag = "--distributed-world-size";
    const dist::RankInfo info = dist::discover_rank(request);
    int world = info.world_size;
    if (info.use_mpi) world = std::max(1, std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE")));
    const int model_parallel = std::max(1, o.tensor_model_parallel_size * o.pipeline_model_parallel_size);
    FairseqFlags flags = *fairseq;
    flags.distributed_port = -1;  // resolved above
    apply_fairseq_flags(flags, given, o, init, std::max(1, world / model_parallel));
    d.init_method = init;
  };
}
}  // namespace

namespace {

// BERT's own flags (families::FlagGroup::BERT).
void add_bert_flags(CLI::App* cmd, train::TrainOptions& o) {
  cmd->add_flag("--bert-no-binary-head", [o = &o](int64_t) { o->bert_binary_head = false; },
                "No token types, pooler or sentence-order head: every sample is one segment of its document's "
                "sentences and the loss is the lm loss alone (Megatron)");
  cmd->add_flag("--bert-post-layernorm", o.bert_post_layernorm,
                "The original BERT: LayerNorm on the embeddings and after each residual add, no final LayerNorm, "
                "eps 1e-12, erf GELU (Google/NVIDIA/Hugging Face BertForPreTraining) instead of Megatron's pre-LN");
  cmd->add_option(flag_names("--bert-config-file", {Source::kArgparse}), o.bert_config_file,
                  "A Google/NVIDIA bert_config.json describing an original (post-LN) BERT: its sizes, hidden_act, "
                  "dropouts, max_position_embeddings, type_vocab_size and initializer_range replace the "
                  "corresponding flags (which may then be omitted); vocab_size gives the word rows, padded to a "
                  "multiple of 8 as NVIDIA's run_pretraining.py (--make-vocab-size-divisible-by does not apply), and "
                  "must hold the tokenizer's ids");
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* train = app.add_subcommand("train", "Pretrain a language model (Megatron-LM's pretrain_*.py)");
  train->require_subcommand(1);
  // One subcommand per model family (families/registry.h), its flags the common ones and the groups it takes.
  for (const families::ModelFamily* family : families::model_families()) {
    CommandState state;
    state.options->model_type = family->name();
    CLI::App* cmd = train->add_subcommand(family->name(), family->help());
    add_common_train_flags(cmd, state, *family);
    if (family->takes(families::FlagGroup::ELECTRA)) add_electra_flags(cmd, *state.options);
    if (family->takes(families::FlagGroup::BERT)) {
      add_bert_flags(cmd, *state.options);
      auto fairseq = std::make_shared<FairseqFlags>();
      add_fairseq_flags(cmd, *fairseq);
      cmd->callback([state, fairseq] { run_command(state, fairseq_adjuster(fairseq)); });
    } else {
      cmd->callback([state] { run_command(state); });
    }
  }
}

}  // namespace lmforge::cli
