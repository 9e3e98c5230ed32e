// defines: add_fairseq_flags, apply_fairseq_flags, fairseq_init_method, add_balance_flags (see the header)
#include "cli/fairseq_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "datasets/hdf5_bert_shards.h"
#include "optim/lr_schedule.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

const char* kFairseqGroup = "fairseq spellings";

std::string num(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

bool given(const CLI::Option* opt) { return opt != nullptr && opt->count() > 0; }

// One setting under two spellings: both given with different values is an Error naming both.
template <typename T>
void agree(bool megatron_given, const T& megatron, const T& fairseq, const std::string& megatron_flag,
           const std::string& fairseq_flag, const auto& show) {
  if (megatron_given && megatron != fairseq)
    throw Error(fairseq_flag + " " + show(fairseq) + " and " + megatron_flag + " " + show(megatron) +
                " disagree (two spellings of one setting; give one)");
}
auto show_int = [](int64_t v) { return std::to_string(v); };
auto show_double = [](double v) { return num(v); };
auto show_text = [](const std::string& v) { return v; };

// fairseq's --adam-betas string, e.g. "(0.9, 0.999)" or "[0.9,0.98]" (fairseq evaluates it as a Python literal).
std::pair<double, double> parse_betas(const std::string& text) {
  std::string inner = text;
  for (char& c : inner)
    if (c == '(' || c == ')' || c == '[' || c == ']' || c == ',') c = ' ';
  std::istringstream in(inner);
  double b1 = 0, b2 = 0;
  std::string rest;
  if (!(in >> b1 >> b2) || (in >> rest))
    throw Error("--adam-betas '" + text + "': expected two numbers as fairseq writes them, e.g. '(0.9, 0.999)'");
  if (!(b1 >= 0.0 && b1 < 1.0 && b2 >= 0.0 && b2 < 1.0))
    throw Error("--adam-betas '" + text + "': each beta must lie in [0, 1)");
  return {b1, b2};
}

struct ShardRows {
  int64_t train = 0, valid = 0, seq_length = 0;
};
// Rows (samples per epoch) of the training and validation shards and their sequence length, from metadata only.
ShardRows count_rows(const std::string& spec) {
  ShardRows rows;
  for (const std::string& f : datasets::list_hdf5_bert_shards(spec, datasets::Hdf5Split::kTrain)) {
    const datasets::Hdf5ShardInfo info = datasets::probe_hdf5_bert_shard(f);
    rows.train += info.rows;
    rows.seq_length = info.seq_length;
  }
  for (const std::string& f : datasets::list_hdf5_bert_shards(spec, datasets::Hdf5Split::kValid))
    rows.valid += datasets::probe_hdf5_bert_shard(f).rows;
  return rows;
}

void notice(const std::string& text) { std::cerr << "lmforge train bert: notice: " << text << "\n"; }

// The batch: --max-sentences, --update-freq, --data, --dict, --task and the sequence length.
void apply_data_flags(const FairseqFlags& f, train::TrainOptions& o, int ranks, const ShardRows* rows) {
  const int64_t batch_size = given(f.batch_size_opt) ? f.batch_size_opt->as<int64_t>() : -1;
  if (f.max_sentences > 0 && batch_size > 0 && batch_size != f.max_sentences)
    throw Error("--max-sentences " + std::to_string(f.max_sentences) + " and --batch-size " +
                std::to_string(batch_size) + " disagree (two spellings of one setting)");
  if (f.max_sentences > 0 || batch_size > 0) {
    const int64_t sentences = f.max_sentences > 0 ? f.max_sentences : batch_size;
    agree<int64_t>(given(f.micro_batch_opt), o.micro_batch_size, sentences, "--micro-batch-size",
                   "--max-sentences", show_int);
    o.micro_batch_size = (int)sentences;
  } else if (!given(f.micro_batch_opt)) {
    throw Error("give --micro-batch-size (or fairseq's --max-sentences): sequences per rank per forward pass");
  }
  if (f.update_freq > 0) {
    const int64_t global = (int64_t)o.micro_batch_size * f.update_freq * ranks;
    agree<int64_t>(given(f.global_batch_opt), o.global_batch_size, global, "--global-batch-size",
                   "--update-freq " + std::to_string(f.update_freq) + " (x --max-sentences x " +
                       std::to_string(ranks) + " data-parallel ranks =",
                   [](int64_t v) { return std::to_string(v) + ")"; });
    o.global_batch_size = global;
  }
  if (rows != nullptr && !given(f.seq_length_opt)) o.seq_length = (int)rows->seq_length;
  if (o.seq_length <= 0)
    throw Error("give --seq-length (with HDF5 shards in --data / --data-path it is read from the shards)");
}

// The fairseq learning-rate schedule and the flags only it reads.
void apply_schedule_flags(const FairseqFlags& f, train::TrainOptions& o) {
  optim::LrScheduleArgs& s = o.schedule;
  const bool poly = !f.lr_scheduler.empty();
  if (!poly) {
    const std::pair<const char*, bool> only_poly[] = {{"--warmup-updates", f.warmup_updates >= 0},
                                                      {"--total-num-update", f.total_num_update >= 0},
                                                      {"--end-learning-rate", given(f.end_lr_opt)},
                                                      {"--power", given(f.power_opt)}};
    for (const auto& [flag, set] : only_poly)
      if (set) throw Error(std::string(flag) + " belongs to fairseq's --lr-scheduler polynomial_decay; give that too");
    return;
  }
  const std::pair<const char*, const CLI::Option*> megatron_schedule[] = {
      {"--lr-decay-style", f.decay_style_opt},
      {"--lr-warmup-fraction", f.warmup_fraction_opt},
      {"--lr-warmup-iters", f.warmup_iters_opt},
      {"--lr-decay-iters", f.decay_iters_opt}};
  for (const auto& [flag, opt] : megatron_schedule)
    if (given(opt))
      throw Error(std::string(flag) + " is Megatron's schedule; with fairseq's --lr-scheduler polynomial_decay give "
                  "--warmup-updates, --total-num-update, --end-learning-rate and --power instead");
  if (!s.train_iters)
    throw Error("--lr-scheduler polynomial_decay counts updates: give --max-update (or --train-iters / --max-epoch)");
  s.lr_decay_style = "fairseq-polynomial-decay";
  s.lr_warmup_iters = std::max<int64_t>(f.warmup_updates, 0);
  s.lr_decay_iters = f.total_num_update >= 0 ? f.total_num_update : *s.train_iters;  // fairseq: max_update
  s.lr_decay_power = f.power;
  // --min-lr: fairseq's meaning under its scheduler is "stop training once the learning rate has fallen to this"
  // (its --stop-min-lr); the floor of the decay is --end-learning-rate.
  const double stop_lr = s.min_lr;
  s.min_lr = f.end_learning_rate;
  if (given(f.min_lr_opt)) {
    optim::LrScheduleArgs probe = s;
    probe.global_batch_size = o.global_batch_size > 0 ? o.global_batch_size : o.micro_batch_size;
    const optim::OptimizerParamScheduler sched(probe);
    for (int64_t u = s.lr_warmup_iters; u < *s.train_iters; u++)  // update u + 1 runs with lr(u)
      if (sched.lr_at(u * probe.global_batch_size) <= stop_lr) {
        if (u == 0) throw Error("--min-lr " + num(stop_lr) + ": the first update's learning rate is already at or "
                                "below it (fairseq would not train)");
        notice("--min-lr " + num(stop_lr) + " (fairseq: stop when the learning rate falls to it) ends training after "
               "update " + std::to_string(u) + ", where the next update's rate " +
               num(sched.lr_at(u * probe.global_batch_size)) + " would be at or below it");
        s.train_iters = u;
        break;
      }
  }
}

// Checkpoints: --save-dir, --restore-file, --save-interval-updates, --keep-interval-updates, --no-epoch-checkpoints.
void apply_checkpoint_flags(const FairseqFlags& f, train::TrainOptions& o) {
  if (!f.save_dir.empty()) {
    agree<std::string>(given(f.save_opt), o.save, f.save_dir, "--save", "--save-dir", show_text);
    o.save = f.save_dir;
    if (!f.no_epoch_checkpoints)
      notice("fairseq writes a checkpoint at the end of every epoch unless --no-epoch-checkpoints; lmforge writes "
             "them every --save-interval-updates and at the end only (as with --no-epoch-checkpoints)");
  }
  // fairseq resumes from <save-dir>/checkpoint_last.pt (its --restore-file default) when it exists; lmforge's
  // --load DIR resumes from the latest checkpoint in DIR, or starts afresh when there is none.
  std::string restore;
  if (!f.restore_file.empty() && f.restore_file != "checkpoint_last.pt") restore = f.restore_file;
  else if (!f.save_dir.empty()) restore = f.save_dir;
  if (!restore.empty()) {
    agree<std::string>(given(f.load_opt), o.load, restore, "--load", "--restore-file / --save-dir", show_text);
    o.load = restore;
  }
  if (f.save_interval_updates >= 0) {
    agree<int64_t>(given(f.save_interval_opt), o.save_interval, f.save_interval_updates, "--save-interval",
                   "--save-interval-updates", show_int);
    o.save_interval = f.save_interval_updates;
  }
  if (f.keep_interval_updates > 0) {
    if (o.save.empty()) throw Error("--keep-interval-updates needs --save-dir (or --save)");
    o.keep_interval_checkpoints = f.keep_interval_updates;
  }
}

// Epoch-based flags: --max-epoch, --valid-subset, --validate-interval (epochs of the HDF5 training shards).
void apply_epoch_flags(const FairseqFlags& f, train::TrainOptions& o, const ShardRows* rows) {
  const bool epochs = f.max_epoch > 0 || f.validate_interval > 0 || !f.valid_subset.empty();
  if (!epochs) return;
  if (rows == nullptr)
    throw Error("--max-epoch, --validate-interval and --valid-subset count epochs of NVIDIA HDF5 shards: give the "
                "shard directory with --data (or --data-path)");
  const int64_t batch = o.global_batch_size > 0 ? o.global_batch_size : o.micro_batch_size;
  optim::LrScheduleArgs& s = o.schedule;
  if (f.max_epoch > 0) {
    // lmforge's global batches are all full and run across epoch boundaries, so N epochs are the whole global
    // batches within N × rows samples (fairseq's smaller last batch of each epoch is not formed).
    const int64_t by_epochs = f.max_epoch * rows->train / batch;
    if (by_epochs <= 0)
      throw Error("--max-epoch " + std::to_string(f.max_epoch) + ": " + std::to_string(rows->train) +
                  " training samples per epoch do not fill one global batch of " + std::to_string(batch));
    s.train_iters = s.train_iters ? std::min(*s.train_iters, by_epochs) : by_epochs;  // whichever ends first
  }
  if (f.validate_interval > 0 || !f.valid_subset.empty()) {
    if (rows->valid == 0)
      throw Error("--valid-subset / --validate-interval: the shards hold no validation files (names with test, "
                  "valid or eval)");
    if (f.validate_interval > 0) {
      agree<int64_t>(given(f.eval_interval_opt), o.eval_interval,
                     std::max<int64_t>(1, f.validate_interval * rows->train / batch), "--eval-interval",
                     "--validate-interval (epochs, in updates:", [](int64_t v) { return std::to_string(v) + ")"; });
      o.eval_interval = (int)std::max<int64_t>(1, f.validate_interval * rows->train / batch);
    }
    // fairseq validates on the whole subset: its rows in whole global batches.
    if (!given(f.eval_iters_opt)) o.eval_iters = (int)std::max<int64_t>(1, rows->valid / batch);
  }
}

}  // namespace

void add_fairseq_flags(CLI::App* cmd, FairseqFlags& f) {
  f.micro_batch_opt = cmd->get_option("--micro-batch-size");
  f.batch_size_opt = cmd->get_option_no_throw("--batch-size");
  f.micro_batch_opt->required(false);
  f.seq_length_opt = cmd->get_option("--seq-length");
  f.seq_length_opt->required(false);
  f.global_batch_opt = cmd->get_option("--global-batch-size");
  f.tokenizer_type_opt = cmd->get_option("--tokenizer-type");
  f.vocab_file_opt = cmd->get_option("--vocab-file");
  f.data_path_opt = cmd->get_option("--data-path");
  f.clip_grad_opt = cmd->get_option("--clip-grad");
  f.beta1_opt = cmd->get_option("--adam-beta1");
  f.beta2_opt = cmd->get_option("--adam-beta2");
  f.min_lr_opt = cmd->get_option("--min-lr");
  f.decay_style_opt = cmd->get_option("--lr-decay-style");
  f.warmup_iters_opt = cmd->get_option("--lr-warmup-iters");
  f.warmup_fraction_opt = cmd->get_option("--lr-warmup-fraction");
  f.decay_iters_opt = cmd->get_option("--lr-decay-iters");
  f.save_opt = cmd->get_option("--save");
  f.load_opt = cmd->get_option("--load");
  f.save_interval_opt = cmd->get_option("--save-interval");
  f.eval_interval_opt = cmd->get_option("--eval-interval");
  f.eval_iters_opt = cmd->get_option("--eval-iters");

  cmd->add_option("--task", f.task,
                  "fairseq's task: only 'bert' (this command). fairseq-train's flags below translate into this "
                  "command's; a setting given under both spellings must agree. Shared with Megatron under the same "
                  "name and meaning: --lr (the peak), --optimizer adam|lamb (fairseq's adam is AdamW, decoupled decay), "
                  "--adam-eps, --weight-decay (NOTE: lmforge keeps Megatron's rule of no decay for biases and "
                  "LayerNorms; fairseq's adam decays every parameter), --seed, --log-interval, --config_file (= "
                  "--bert-config-file), --distributed-world-size, --distributed-rank, --distributed-init-method. "
                  "Defaults stay lmforge's (e.g. --clip-grad 1.0) unless the fairseq flag is given")
      ->check(CLI::IsMember({"bert"}))
      ->group(kFairseqGroup);
  cmd->add_option("--data", f.data,
                  "A directory (or glob, or file) of NVIDIA's pre-masked HDF5 shards (= --data-path); the sequence "
                  "length is then read from the shards when --seq-length is not given")
      ->group(kFairseqGroup);
  cmd->add_option("--dict", f.dict,
                  "vocab.txt (= --vocab-file, with --tokenizer-type BertWordPieceLowerCase unless another is given: "
                  "the shards hold token ids already, so casing does not matter; the vocabulary sets the id range and "
                  "the embedding rows)")
      ->group(kFairseqGroup);
  cmd->add_option("--max-sentences", f.max_sentences,
                  "Sequences per rank per forward pass (= --micro-batch-size; fairseq's --batch-size, listed under the "
                  "older spellings, means the same)")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--update-freq", f.update_freq,
                  "Forward passes accumulated per update (gradient accumulation): --global-batch-size = "
                  "--max-sentences x this x data-parallel ranks")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--max-update", f.max_update, "Updates to train (= --train-iters)")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--max-epoch", f.max_epoch,
                  "Passes over the training shards: training ends after the last whole global batch within N x "
                  "(training rows) samples (global batches run across epoch boundaries; fairseq's smaller last batch "
                  "of an epoch is not formed), or at --max-update if that comes first")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--clip-norm", f.clip_norm, "Clip the global gradient norm to this, 0: off (= --clip-grad)")
      ->check(CLI::NonNegativeNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--adam-betas", f.adam_betas,
                  "fairseq's '(beta1, beta2)' string, e.g. '(0.9, 0.999)' (= --adam-beta1, --adam-beta2)")
      ->group(kFairseqGroup);
  cmd->add_option("--lr-scheduler,--lr_scheduler", f.lr_scheduler,
                  "polynomial_decay: fairseq's PolynomialDecayLRSchedule (the only one taken): update u+1 runs with "
                  "lr(u) = lr*u/W during the W = --warmup-updates updates (the first update has lr 0), then "
                  "(lr - end)*(1 - (u-W)/(T-W))^power + end until T = --total-num-update (default --max-update), "
                  "then end = --end-learning-rate. A smooth decay, unlike NVIDIA's nvidia-poly-warmup. With it, "
                  "--min-lr takes fairseq's meaning: training stops before the first update after the warm-up whose "
                  "rate is at or below it (checked per update; fairseq checks at epoch ends)")
      ->check(CLI::IsMember({"polynomial_decay"}))
      ->group(kFairseqGroup);
  cmd->add_option("--warmup-updates", f.warmup_updates, "Linear warm-up updates of polynomial_decay")
      ->check(CLI::NonNegativeNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--total-num-update", f.total_num_update,
                  "Updates over which polynomial_decay decays (default: --max-update, as fairseq)")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  f.end_lr_opt = cmd->add_option("--end-learning-rate", f.end_learning_rate,
                                 "Learning rate at the end of polynomial_decay (default 0)")
                     ->check(CLI::NonNegativeNumber)
                     ->group(kFairseqGroup);
  f.power_opt = cmd->add_option("--power", f.power, "Exponent of polynomial_decay (default 1: linear)")
                    ->check(CLI::PositiveNumber)
                    ->group(kFairseqGroup);
  cmd->add_option("--save-dir", f.save_dir,
                  "Checkpoint directory (= --save), also resumed from when it holds a checkpoint (fairseq resumes "
                  "from its checkpoint_last.pt; here: = --load DIR)")
      ->group(kFairseqGroup);
  cmd->add_option("--restore-file", f.restore_file,
                  "Checkpoint to resume from (= --load): an lmforge save or iteration directory; fairseq's default "
                  "'checkpoint_last.pt' means the latest in --save-dir")
      ->group(kFairseqGroup);
  cmd->add_option("--save-interval-updates", f.save_interval_updates,
                  "Updates between checkpoints (= --save-interval)")
      ->check(CLI::NonNegativeNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--keep-interval-updates", f.keep_interval_updates,
                  "After each save keep only the newest N iteration checkpoints in --save-dir (the final one counts)")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_flag("--no-epoch-checkpoints", f.no_epoch_checkpoints,
                "No checkpoint at the end of each epoch: what lmforge does anyway (without the flag a notice says so)")
      ->group(kFairseqGroup);
  cmd->add_option("--valid-subset", f.valid_subset,
                  "valid: the validation shards (file names with test, valid or eval); validation then covers the "
                  "whole subset: --eval-iters = its rows / global batch unless given")
      ->check(CLI::IsMember({"valid"}))
      ->group(kFairseqGroup);
  cmd->add_option("--validate-interval", f.validate_interval,
                  "Validate every N epochs of the training shards (= --eval-interval N x rows / global batch "
                  "updates), over the whole validation subset as --valid-subset")
      ->check(CLI::PositiveNumber)
      ->group(kFairseqGroup);
  cmd->add_option("--num-workers", f.num_workers,
                  "fairseq's data-loading worker processes: accepted, but lmforge starts no workers: each "
                  "micro-batch's rows are read on the training thread from the shard held in memory (a shard is "
                  "decompressed when the stream enters it, once per epoch); a notice says so for N > 0")
      ->check(CLI::NonNegativeNumber)
      ->group(kFairseqGroup);
  cmd->add_flag("--fast-stat-sync", f.fast_stat_sync,
                "Accepted: lmforge all-reduces its per-step statistics (one sum per loss) every step either way; "
                "results do not depend on it")
      ->group(kFairseqGroup);
  cmd->add_option("--distributed-port", f.distributed_port,
                  "fairseq: without --distributed-init-method, rank 0 listens at tcp://HOST:PORT with HOST = "
                  "MASTER_ADDR, or the Slurm job's first host (scontrol show hostnames, as fairseq); ignored with a "
                  "notice when --distributed-init-method is given")
      ->check(CLI::Range(1, 65535))
      ->group(kFairseqGroup);
}

std::string fairseq_init_method(int port, const std::string& init_method) {
  if (port < 0) return "";
  if (!init_method.empty()) {
    notice("--distributed-port " + std::to_string(port) + " is not used: --distributed-init-method " + init_method +
           " names the rendezvous (fairseq's rule)");
    return "";
  }
  std::string host;
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    host = addr;
  } else if (const char* nodes = std::getenv("SLURM_STEP_NODELIST") ? std::getenv("SLURM_STEP_NODELIST")
                                                                    : std::getenv("SLURM_JOB_NODELIST")) {
    const std::string cmd = "scontrol show hostnames '" + std::string(nodes) + "' 2>/dev/null";
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char line[256] = {0};
      if (std::fgets(line, sizeof line, p) != nullptr) host = line;
      ::pclose(p);
    }
    while (!host.empty() && (host.back() == '\n' || host.back() == ' ')) host.pop_back();
    if (host.empty()) throw Error("--distributed-port: `scontrol show hostnames " + std::string(nodes) + "` gave no host");
  } else {
    throw Error("--distributed-port " + std::to_string(port) + " needs the rendezvous host: set MASTER_ADDR, run "
                "under Slurm, or give --distributed-init-method tcp://HOST:PORT");
  }
  return "tcp://" + host + ":" + std::to_string(port);
}

void apply_fairseq_flags(const FairseqFlags& f, train::TrainOptions& o, std::string& init_method, int ranks) {
  if (const std::string url = fairseq_init_method(f.distributed_port, init_method); !url.empty()) init_method = url;
  if (!f.data.empty()) {
    if (given(f.data_path_opt) && (o.data_path.size() != 1 || o.data_path[0] != f.data))
      throw Error("--data " + f.data + " and --data-path disagree (two spellings of one setting; give one)");
    o.data_path = {f.data};
    // fairseq's --data is a directory (of HDF5 shards here): a missing one is named now, before any other check
    // (otherwise the first complaint would be the sequence length the shards were to give).
    std::error_code ec;
    if (!std::filesystem::exists(f.data, ec) && f.data.find_first_of("*?[") == std::string::npos)
      throw Error("--data " + f.data + ": no such file or directory");
  }
  if (!f.dict.empty()) {
    agree<std::string>(given(f.vocab_file_opt), o.tokenizer.vocab_file, f.dict, "--vocab-file", "--dict", show_text);
    o.tokenizer.vocab_file = f.dict;
    if (!given(f.tokenizer_type_opt)) o.tokenizer.type = "BertWordPieceLowerCase";
  }
  ShardRows rows;
  const bool hdf5 = o.data_path.size() == 1 && datasets::is_hdf5_bert_data_path(o.data_path[0]);
  if (hdf5) rows = count_rows(o.data_path[0]);
  apply_data_flags(f, o, ranks, hdf5 ? &rows : nullptr);
  if (f.max_update > 0) {
    agree<int64_t>(o.schedule.train_iters.has_value(), o.schedule.train_iters.value_or(0), f.max_update,
                   "--train-iters", "--max-update", show_int);
    o.schedule.train_iters = f.max_update;
  }
  if (f.clip_norm >= 0.0) {
    agree<double>(given(f.clip_grad_opt), o.clip_grad, f.clip_norm, "--clip-grad", "--clip-norm", show_double);
    o.clip_grad = f.clip_norm;
  }
  if (!f.adam_betas.empty()) {
    const auto [b1, b2] = parse_betas(f.adam_betas);
    agree<double>(given(f.beta1_opt), o.optimizer.beta1, b1, "--adam-beta1", "--adam-betas", show_double);
    agree<double>(given(f.beta2_opt), o.optimizer.beta2, b2, "--adam-beta2", "--adam-betas", show_double);
    o.optimizer.beta1 = b1;
    o.optimizer.beta2 = b2;
  }
  apply_epoch_flags(f, o, hdf5 ? &rows : nullptr);  // before the schedule: --max-epoch may set the updates
  apply_schedule_flags(f, o);
  apply_checkpoint_flags(f, o);
  if (f.num_workers > 0)
    notice("--num-workers " + std::to_string(f.num_workers) + ": lmforge reads samples on the training thread (no "
           "worker threads are started)");
}

void add_balance_flags(CLI::App* cmd, train::TrainOptions& o) {
  cmd->add_flag("--balance-data-parallel", o.balance_data_parallel,
                "Data parallelism over machines of unequal speed: each rank runs a contiguous run of WHOLE "
                "micro-batches of the global batch, as many as its measured speed earns (every rank at least one), "
                "instead of an equal share; the samples, their order, the dropout masks and the update (the mean "
                "over the global batch) stay those of plain data parallelism, so the losses equal the plain run's "
                "up to fp32 summation order. Speeds are re-measured every --balance-interval steps (one small "
                "all-reduce) and every change of the shares is logged. Needs --tensor-model-parallel-size 1 and no "
                "pipeline; the global batch must hold a multiple of (data-parallel ranks) micro-batches");
  cmd->add_option("--balance-interval", o.balance_interval,
                  "Training steps between speed measurements for --balance-data-parallel")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace lmforge::cli
