// defines: add_fairseq_flags, apply_fairseq_flags, fairseq_init_method, add_balance_flags (see the header)
#include "cli/flags/fairseq_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/flags/value_range.h"
#include "datasets/hdf5_bert_shards.h"
#include "optim/lr_schedule.h"
#include "util/error.h"

namespace lmforge::cli {
namespace {

void notice(const std::string& text) { std::cerr << "lmforge train bert: notice: " << text << "\n"; }

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

// The batch: --update-freq and the sequence length (--max-sentences / --batch-size are --micro-batch-size already).
void apply_data_flags(const FairseqFlags& f, GivenFlags& given, train::TrainOptions& o, int ranks,
                      const ShardRows* rows) {
  if (!given.given("--micro-batch-size"))
    throw Error("give --micro-batch-size (or fairseq's --max-sentences): sequences per rank per forward pass");
  if (f.update_freq > 0) {
    const int64_t global = (int64_t)o.micro_batch_size * f.update_freq * ranks;
    given.set("--global-batch-size", "--update-freq",
              std::to_string(f.update_freq) + " (x --max-sentences x " + std::to_string(ranks) +
                  " data-parallel ranks = " + std::to_string(global) + ")",
              global, o.global_batch_size);
  }
  if (rows != nullptr && !given.given("--seq-length")) o.seq_length = (int)rows->seq_length;
  if (o.seq_length <= 0)
    throw Error("give --seq-length (with HDF5 shards in --data / --data-path it is read from the shards)");
}

// Megatron's learning-rate schedule flags (which fairseq's scheduler replaces).
constexpr const char* kMegatronScheduleFlags[] = {"--lr-decay-style", "--lr-warmup-fraction", "--lr-warmup-iters",
                                                  "--lr-decay-iters", "--lr-warmup-samples", "--lr-decay-samples"};

// Whether the command line is written in fairseq's spellings: one of fairseq's own flags or of its spellings of
// lmforge's settings (the table's fairseq rows) was given.
bool fairseq_line(const FairseqFlags& f, const GivenFlags& given) {
  if (!f.task.empty() || !f.restore_file.empty() || !f.valid_subset.empty() || !f.lr_scheduler.empty() ||
      f.update_freq > 0 || f.keep_interval_updates > 0 || f.validate_interval > 0 || f.num_workers >= 0 ||
      f.distributed_port >= 0 || f.max_epoch > 0 || f.warmup_updates >= 0 || f.total_num_update >= 0 ||
      f.no_epoch_checkpoints || f.fast_stat_sync || given.given("--end-learning-rate") || given.given("--power"))
    return true;
  for (const Alias& a : alias_table())
    if (a.source == Source::kFairseq && given.gave(std::string(a.canonical), std::string(a.spelling))) return true;
  return false;
}

// The fairseq learning-rate schedule and the flags only it reads. fairseq's --lr-scheduler defaults to
// polynomial_decay in the seed program (its README says so; its command lines pass --warmup-updates and
// --total-num-update alone): a fairseq command line without Megatron's schedule flags takes it.
void apply_schedule_flags(const FairseqFlags& f, const GivenFlags& given, train::TrainOptions& o) {
  optim::LrScheduleArgs& s = o.schedule;
  bool megatron_schedule = false;
  for (const char* flag : kMegatronScheduleFlags) megatron_schedule = megatron_schedule || given.given(flag);
  const bool by_default = f.lr_scheduler.empty() && !megatron_schedule && fairseq_line(f, given);
  if (by_default)
    notice("--lr-scheduler not given: polynomial_decay, the default of the fairseq program whose flags this command "
           "line uses (Megatron's --lr-decay-style flags select Megatron's schedule instead)");
  const bool poly = !f.lr_scheduler.empty() || by_default;
  if (!poly) {
    const std::pair<const char*, bool> only_poly[] = {{"--warmup-updates", f.warmup_updates >= 0},
                                                      {"--total-num-update", f.total_num_update >= 0},
                                                      {"--end-learning-rate", given.given("--end-learning-rate")},
                                                      {"--power", given.given("--power")}};
    for (const auto& [flag, set] : only_poly)
      if (set) throw Error(std::string(flag) + " belongs to fairseq's --lr-scheduler polynomial_decay; give that too");
    return;
  }
  for (const char* flag : kMegatronScheduleFlags)
    if (given.given(flag))
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
  if (given.given("--min-lr")) {
    optim::LrScheduleArgs probe = s;
    probe.global_batch_size = o.global_batch_size > 0 ? o.global_batch_size : o.micro_batch_size;
    const optim::OptimizerParamScheduler sched(probe);
    for (int64_t u = s.lr_warmup_iters; u < *s.train_iters; u++)  // update u + 1 runs with lr(u)
      if (sched.lr_at(u * probe.global_batch_size) <= stop_lr) {
        if (u == 0)
          throw Error("--min-lr " + show_number(stop_lr) + ": the first update's learning rate is already at or "
                      "below it (fairseq would not train)");
        notice("--min-lr " + show_number(stop_lr) + " (fairseq: stop when the learning rate falls to it) ends training "
               "after update " + std::to_string(u) + ", where the next update's rate " +
               show_number(sched.lr_at(u * probe.global_batch_size)) + " would be at or below it");
        s.train_iters = u;
        break;
      }
  }
}

// Checkpoints: --save-dir (= --save already), --restore-file, --keep-interval-updates, --no-epoch-checkpoints.
void apply_checkpoint_flags(const FairseqFlags& f, GivenFlags& given, train::TrainOptions& o) {
  const bool save_dir = given.gave("--save", "--save-dir");
  if (save_dir && !f.no_epoch_checkpoints)
    notice("fairseq writes a checkpoint at the end of every epoch unless --no-epoch-checkpoints; lmforge writes "
           "them every --save-interval-updates and at the end only (as with --no-epoch-checkpoints)");
  // fairseq resumes from <save-dir>/checkpoint_last.pt (its --restore-file default) when it exists; lmforge's
  // --load DIR resumes from the latest checkpoint in DIR, or starts afresh when there is none.
  std::string restore;
  if (!f.restore_file.empty() && f.restore_file != "checkpoint_last.pt") restore = f.restore_file;
  else if (save_dir) restore = o.save;
  if (!restore.empty()) given.set("--load", "--restore-file / --save-dir", restore, restore, o.load);
  if (f.keep_interval_updates > 0) {
    if (o.save.empty()) throw Error("--keep-interval-updates needs --save-dir (or --save)");
    o.keep_interval_checkpoints = f.keep_interval_updates;
  }
}

// --valid-subset test: NVIDIA's test shards (<name>_test_<i>.hdf5) are the validation subset. lmforge validates on
// every validation shard of --data (names with test, valid or eval), so these must all be test shards.
void check_test_subset(const std::string& spec) {
  const std::vector<std::string> valid = datasets::list_hdf5_bert_shards(spec, datasets::Hdf5Split::kValid);
  bool any_test = false;
  for (const std::string& file : valid) {
    const std::string name = std::filesystem::path(file).filename().string();
    if (name.find("test") != std::string::npos) {
      any_test = true;
      continue;
    }
    throw Error("--valid-subset test: " + file + " is a validation shard but not a test shard (no 'test' in its "
                "name); lmforge validates on every validation shard of --data " + spec + ", so keep only the test "
                "shards beside the training shards (or give --valid-subset valid to use them all)");
  }
  if (!any_test)
    throw Error("--valid-subset test: --data " + spec + " holds no test shards (NVIDIA's <name>_test_<i>.hdf5)");
}

// Epoch-based flags: --max-epoch, --valid-subset, --validate-interval (epochs of the HDF5 training shards).
void apply_epoch_flags(const FairseqFlags& f, GivenFlags& given, train::TrainOptions& o, const ShardRows* rows) {
  const std::string spec = o.data_path.empty() ? "" : o.data_path[0];
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
  if (f.valid_subset == "test") check_test_subset(spec);
  if (f.validate_interval > 0 || !f.valid_subset.empty()) {
    if (rows->valid == 0)
      throw Error("--valid-subset / --validate-interval: the shards hold no validation files (names with test, "
                  "valid or eval)");
    if (f.validate_interval > 0) {
      const int updates = (int)std::max<int64_t>(1, f.validate_interval * rows->train / batch);
      given.set("--eval-interval", "--validate-interval",
                std::to_string(f.validate_interval) + " (epochs, in updates: " + std::to_string(updates) + ")",
                updates, o.eval_interval);
    }
    // fairseq validates on the whole subset: its rows in whole global batches.
    if (!given.given("--eval-iters")) o.eval_iters = (int)std::max<int64_t>(1, rows->valid / batch);
  }
}

}  // namespace

void add_fairseq_flags(CLI::App* cmd, FairseqFlags& f) {
  cmd->get_option("--micro-batch-size")->required(false);
  cmd->get_option("--seq-length")->required(false);
  const char* group = help_group(Source::kFairseq);
  cmd->add_option("--task", f.task,
                  "fairseq's task: only 'bert' (this command). fairseq-train's flags below translate into this "
                  "command's; a setting given under both spellings must agree. Shared with Megatron under the same "
                  "name and meaning: --lr (the peak), --optimizer adam|lamb (fairseq's adam is AdamW, decoupled decay), "
                  "--adam-eps, --weight-decay (NOTE: lmforge keeps Megatron's rule of no decay for biases and "
                  "LayerNorms; fairseq's adam decays every parameter), --seed, --log-interval, --config_file (= "
                  "--bert-config-file), --distributed-world-size, --distributed-rank, --distributed-init-method. "
                  "Defaults stay lmforge's (e.g. --clip-grad 1.0) unless the fairseq flag is given")
      ->check(CLI::IsMember({"bert"}))
      ->group(group);
  add_alias_flags(cmd, {Source::kFairseq});
  cmd->add_option("--update-freq", f.update_freq,
                  "Forward passes accumulated per update (gradient accumulation): --global-batch-size = "
                  "--max-sentences x this x data-parallel ranks")
      ->check(at_least(1))
      ->group(group);
  cmd->add_option("--max-epoch", f.max_epoch,
                  "Passes over the training shards: training ends after the last whole global batch within N x "
                  "(training rows) samples (global batches run across epoch boundaries; fairseq's smaller last batch "
                  "of an epoch is not formed), or at --max-update if that comes first")
      ->check(at_least(1))
      ->group(group);
  cmd->add_option(flag_names("--lr-scheduler", {Source::kArgparse}), f.lr_scheduler,
                  "polynomial_decay: fairseq's PolynomialDecayLRSchedule (the only one taken, and the default "
                  "when the command line uses fairseq's flags and none of Megatron's --lr-decay-style, "
                  "--lr-warmup-*, --lr-decay-*): update u+1 runs with "
                  "lr(u) = lr*u/W during the W = --warmup-updates updates (the first update has lr 0), then "
                  "(lr - end)*(1 - (u-W)/(T-W))^power + end until T = --total-num-update (default --max-update), "
                  "then end = --end-learning-rate. A smooth decay, unlike NVIDIA's nvidia-poly-warmup. With it, "
                  "--min-lr takes fairseq's meaning: training stops before the first update after the warm-up whose "
                  "rate is at or below it (checked per update; fairseq checks at epoch ends)")
      ->check(CLI::IsMember({"polynomial_decay"}))
      ->group(group);
  cmd->add_option("--warmup-updates", f.warmup_updates, "Linear warm-up updates of polynomial_decay")
      ->check(at_least(0))
      ->group(group);
  cmd->add_option("--total-num-update", f.total_num_update,
                  "Updates over which polynomial_decay decays (default: --max-update, as fairseq)")
      ->check(at_least(1))
      ->group(group);
  cmd->add_option("--end-learning-rate", f.end_learning_rate,
                  "Learning rate at the end of polynomial_decay (default 0)")
      ->check(at_least(0))
      ->group(group);
  cmd->add_option("--power", f.power, "Exponent of polynomial_decay (default 1: linear)")
      ->check(greater_than(0))
      ->group(group);
  cmd->add_option("--restore-file", f.restore_file,
                  "Checkpoint to resume from (= --load): an lmforge save or iteration directory; fairseq's default "
                  "'checkpoint_last.pt' means the latest in --save-dir")
      ->group(group);
  cmd->add_option("--keep-interval-updates", f.keep_interval_updates,
                  "After each save keep only the newest N iteration checkpoints in --save-dir (the final one counts)")
      ->check(at_least(1))
      ->group(group);
  cmd->add_flag("--no-epoch-checkpoints", f.no_epoch_checkpoints,
                "No checkpoint at the end of each epoch: what lmforge does anyway (without the flag a notice says so)")
      ->group(group);
  cmd->add_option("--valid-subset", f.valid_subset,
                  "valid: the validation shards (file names with test, valid or eval); test: NVIDIA's test shards "
                  "(<name>_test_<i>.hdf5; then every validation shard must be one). Validation then covers the "
                  "whole subset: --eval-iters = its rows / global batch unless given")
      ->check(CLI::IsMember({"valid", "test"}))
      ->group(group);
  cmd->add_option("--validate-interval", f.validate_interval,
                  "Validate every N epochs of the training shards (= --eval-interval N x rows / global batch "
                  "updates), over the whole validation subset as --valid-subset")
      ->check(at_least(1))
      ->group(group);
  cmd->add_option("--num-workers", f.num_workers,
                  "fairseq's data-loading worker processes: accepted, but lmforge starts no workers: each "
                  "micro-batch's rows are read on the training thread from the shard held in memory (a shard is "
                  "decompressed when the stream enters it, once per epoch); a notice says so for N > 0")
      ->check(at_least(0))
      ->group(group);
  cmd->add_flag("--fast-stat-sync", f.fast_stat_sync,
                "Accepted: lmforge all-reduces its per-step statistics (one sum per loss) every step either way; "
                "results do not depend on it")
      ->group(group);
  cmd->add_option("--distributed-port", f.distributed_port,
                  "fairseq: without --distributed-init-method, rank 0 listens at tcp://HOST:PORT with HOST = "
                  "MASTER_ADDR, or the Slurm job's first host (scontrol show hostnames, as fairseq); ignored with a "
                  "notice when --distributed-init-method is given")
      ->check(in_range(1, 65535))
      ->group(group);
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

void apply_fairseq_flags(const FairseqFlags& f, GivenFlags& given, train::TrainOptions& o, std::string& init_method,
                         int ranks) {
  if (const std::string url = fairseq_init_method(f.distributed_port, init_method); !url.empty()) init_method = url;
  if (given.gave("--data-path", "--data")) {
    // fairseq's --data is a directory (of HDF5 shards here): a missing one is named now, before any other check
    // (otherwise the first complaint would be the sequence length the shards were to give).
    datasets::check_fairseq_data(o.data_path[0]);
  }
  if (given.gave("--vocab-file", "--dict") && !given.given("--tokenizer-type"))
    o.tokenizer.type = "BertWordPieceLowerCase";
  ShardRows rows;
  const bool hdf5 = o.data_path.size() == 1 && datasets::is_hdf5_bert_data_path(o.data_path[0]);
  if (hdf5) rows = count_rows(o.data_path[0]);
  apply_data_flags(f, given, o, ranks, hdf5 ? &rows : nullptr);
  apply_epoch_flags(f, given, o, hdf5 ? &rows : nullptr);  // before the schedule: --max-epoch may set the updates
  apply_schedule_flags(f, given, o);
  apply_checkpoint_flags(f, given, o);
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
      ->check(at_least(1))
      ->capture_default_str();
}

}  // namespace lmforge::cli
