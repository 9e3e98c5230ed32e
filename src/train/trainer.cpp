// defines: Trainer
#include "train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/model_io.h"
#include "data/indexed_dataset.h"
#include "data/token_scan.h"
#include "families/gpt/gpt_model.h"
#include "families/registry.h"
#include "optim/factory.h"
#include "optim/lr_schedule.h"
#include "parallel/balanced_schedule.h"
#include "parallel/distributed_optimizer.h"
#include "parallel/grad_buckets.h"
#include "parallel/grad_norm.h"
#include "parallel/microbatch_schedule.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_groups.h"
#include "datasets/gpt_dataset.h"
#include "kernels/ops.h"
#include "train/mixed_precision.h"
#include "train/model_passes.h"
#include "train/model_shape.h"
#include "train/settings_agreement.h"
#include "train/tensorboard_writer.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::train {
namespace {


std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// The optimizer's view of each parameter: its ranges of the model's flat device buffers (and of its bf16 working
// copy, when it has one, for an optimizer that writes it in its own pass).
std::vector<optim::ParamSpan> param_spans(const param::ParamTable& table, const kernels::Tensor& params,
                                          const kernels::Tensor& grads, const kernels::Tensor& working) {
  std::vector<optim::ParamSpan> out;
  for (const param::Parameter& t : table) {
    out.emplace_back(t.name, params.slice0((int64_t)t.offset, (int64_t)t.numel),
                     grads.slice0((int64_t)t.offset, (int64_t)t.numel), t.numel, t.weight_decay);
    if (working.present()) out.back().working = working.slice0((int64_t)t.offset, (int64_t)t.numel);
  }
  return out;
}

}  // namespace

// ---- trainer -----------------------------------------------------------------------------------------------------

namespace {
dist::Communicator& single_process() {
  static const std::unique_ptr<dist::Communicator> local = dist::make_local_communicator();
  return *local;
}
}  // namespace

struct Trainer::Impl {
  TrainOptions o;
  std::ostream& log;
  optim::LossScaler scaler{loss_scale_options(o.precision)};  // --fp16's loss scale (inactive otherwise)
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<Model> model;  // the model being trained (this rank's tensor-parallel pieces)
  model::GPT* gpt = nullptr;     // the same model when it is a GPT (Trainer::gpt())
  kernels::Backend* backend = nullptr;  // the device of options.device (--device), chosen once
  std::unique_ptr<Task> task;    // batches and loss names
  std::unique_ptr<ModelPasses> passes;  // the model and the task as the micro-batch schedule drives them
  std::unique_ptr<parallel::MicroBatchSchedule> microbatch_schedule;  // the order of a step's micro-batches
  parallel::PipelineSchedule* pipeline = nullptr;  // the same when --pipeline-model-parallel-size > 1
  std::vector<optim::ParamSpan> spans;
  dist::Communicator* comm = nullptr;  // the data-parallel group (one process: a local communicator)
  std::unique_ptr<parallel::GradBuckets> buckets;  // the gradients' data-parallel reduction (parallel/grad_buckets.h)
  std::unique_ptr<parallel::GradNorm> grad_norm;   // the global norm over data × tensor × pipeline, and clipping
  std::unique_ptr<parallel::DistributedOptimizer> optimizer;  // AdamW, LAMB or SGD: whole, or sharded (ZeRO-1)
  dist::Communicator* world = nullptr;  // every rank of the job (rank 0 logs and writes)
  // T·P > 1: the groups of Megatron's layout (process_groups.h); `model` then holds this rank's pieces (of its
  // pipeline stage) only.
  parallel::ProcessGroups groups;
  // Where each tensor of the whole model lives (its stage; the identity map without a pipeline): the checkpoint
  // adapters (checkpoint/model_io.h) and, under pipelines, the gradient norm read it.
  checkpoint::StageTensors stage_map;
  int log_rank = 0;        // the rank that logs and writes TensorBoard (Megatron: the last rank under pipelines)

  dist::Communicator* tp_group() const { return groups.tensor.get(); }
  dist::Communicator* pp_group() const { return groups.pipeline.get(); }
  std::unique_ptr<optim::OptimizerParamScheduler> lr_scheduler;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::unique_ptr<data::WriterLock> save_lock;  // rank 0's lock on --save for the whole run
  int64_t train_iters = 0;
  int64_t iteration = 0;
  int64_t consumed_train = 0;
  int64_t consumed_valid = 0;
  int64_t last_saved = -1;
  std::vector<IterationRecord> history;
  std::vector<EvalRecord> evals;

  Impl(TrainOptions options, std::ostream& out) : o(std::move(options)), log(out) {}

  int64_t micro_batches() const { return o.global_batch_size / o.micro_batch_size; }

  // The plan of one step's (or one evaluation batch's) micro-batches. Dropout masks are keyed by the seed, the
  // iteration and the GLOBAL micro-batch index, so any data- or tensor-parallel layout and any resume point drop
  // the same elements.
  parallel::StepPlan plan(SplitKind split, int64_t first_sample, bool training) {
    passes->begin_step(split, first_sample, iteration, training);
    parallel::StepPlan p;
    p.iteration = iteration;
    p.global_micro_batches = micro_batches();
    p.training = training;
    return p;
  }

  // Σ over the data-parallel ranks, identical everywhere (losses).
  double data_parallel_sum(double local) const {
    comm->all_reduce_sum(&local, 1);
    return local;
  }

  checkpoint::JsonObject args_json() const {
    checkpoint::JsonObject a;
    a["num_layers"] = (int64_t)o.num_layers;
    a["hidden_size"] = (int64_t)o.hidden_size;
    a["num_attention_heads"] = (int64_t)o.num_attention_heads;
    a["seq_length"] = (int64_t)o.seq_length;
    a["max_position_embeddings"] = (int64_t)o.max_position_embeddings;
    a["micro_batch_size"] = (int64_t)o.micro_batch_size;
    a["global_batch_size"] = o.global_batch_size;
    a["lr"] = o.schedule.lr;
    a["min_lr"] = o.schedule.min_lr;
    a["lr_decay_style"] = o.schedule.lr_decay_style;
    a["split"] = o.split;
    a["seed"] = (int64_t)o.seed;
    a["optimizer"] = o.optimizer.kind;
    a["hidden_dropout"] = o.hidden_dropout;
    a["attention_dropout"] = o.attention_dropout;
    a["tensor_model_parallel_size"] = (int64_t)o.tensor_model_parallel_size;
    a["pipeline_model_parallel_size"] = (int64_t)o.pipeline_model_parallel_size;
    a["tokenizer_type"] = o.tokenizer.type;
    std::string data;
    for (const std::string& p : o.data_path) data += (data.empty() ? "" : " ") + p;
    a["data_path"] = data;
    return a;
  }

  // Checkpoints hold whole tensors, gathered and loaded tensor by tensor (checkpoint/model_io.h): the ranks of
  // data-parallel replica 0 assemble each tensor on world rank 0, which writes; under pipelines every stage lists
  // the whole model and each tensor comes from the stage owning it.
  void save() {
    const optim::Optimizer& local = optimizer->gathered();  // collective: every rank takes part, rank 0 writes
    const param::ParamTable whole = model->whole_table();
    const param::ParamTable& table = model->table();
    const std::vector<checkpoint::NamedTensor> tensors =
        checkpoint::gathering_tensors(table, whole, stage_map, model->params(), tp_group(), pp_group());
    const checkpoint::OptimizerCheckpoint state =
        checkpoint::gathering_optimizer(local, table, whole, stage_map, tp_group(), pp_group());
    checkpoint::SaveRequest request;
    request.model = tensors;
    request.config_json = model->config_json();
    request.optimizer_state = &state;
    request.writer = world->rank() == 0;
    request.lock = save_lock.get();
    request.state.iteration = iteration;
    request.state.consumed_train_samples = consumed_train;
    request.state.consumed_valid_samples = consumed_valid;
    request.state.scheduler = lr_scheduler->state();
    // The data order and the dropout masks are functions of the seed, the iteration and the consumed-sample
    // counters, so the seed is the whole RNG state.
    request.state.rng["seed"] = std::to_string(o.seed);
    // Megatron saves its grad scaler with the optimizer; it is text beside the seed here, so a resumed fp16 run
    // continues with the same scale and trackers.
    if (scaler.active()) request.state.rng["grad_scaler"] = scaler.save();
    request.state.args = args_json();
    const auto t0 = std::chrono::steady_clock::now();
    std::string dir = o.save + "/" + checkpoint::iteration_dir_name(iteration);
    if (comm->rank() == 0) dir = checkpoint::save_checkpoint(o.save, request);  // the other replicas hold copies
    if (world->rank() == 0) model->write_hugging_face(dir);
    optimizer->release_gathered();
    world->barrier();  // no rank runs ahead (or exits) before the checkpoint is in place
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    log << format("saved checkpoint at iteration %7lld to %s (%.1f ms)\n", (long long)iteration, dir.c_str(), ms);
    if (o.keep_interval_checkpoints > 0 && world->rank() == 0)
      for (const std::string& removed : checkpoint::keep_newest_iterations(o.save, o.keep_interval_checkpoints))
        log << "removed checkpoint " << removed << " (--keep-interval-updates " << o.keep_interval_checkpoints << ")\n";
    log.flush();
    last_saved = iteration;
  }

  // A checkpoint's config.json whose model_type belongs to another family (a BERT checkpoint given to train gpt) is
  // named with the command that reads it, before its fields are read as this family's ("missing n_layer"). A config
  // without model_type (a Hugging Face GPT-2's may lack it) is left to the family's own checks.
  void check_checkpoint_family(const std::string& config_path) const {
    std::error_code ec;
    if (config_path.empty() || !std::filesystem::is_regular_file(config_path, ec)) return;
    std::ifstream in(config_path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const checkpoint::JsonObject config = checkpoint::parse_json_object(text.str(), config_path);
    const auto it = config.find("model_type");
    const std::string* type = it == config.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (type == nullptr || type->empty()) return;
    const families::ModelFamily& family = families::checkpoint_family(*type, config_path);
    if (family.name() == o.model_type) return;
    throw Error(config_path + ": a " + family.name() + " checkpoint (model_type \"" + *type + "\"); lmforge train " +
                o.model_type + " cannot " + (o.finetune ? "take its weights" : "resume it") + ": it is read by " +
                "lmforge train " + family.name() + " --load " + o.load + (o.finetune ? " --finetune" : "") +
                (family.generation() != families::Generation::NONE ? " (and lmforge generate --load " + o.load + ")"
                                                                     : ""));
  }

  // The config.json beside the weights --finetune reads (checkpoint::load_weights' rules): in the directory given,
  // in its latest checkpoint, or beside a .safetensors file; "" when there is none to read.
  static std::string weights_config_path(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      if (fs::exists(fs::path(path) / "model.safetensors", ec)) return (fs::path(path) / "config.json").string();
      if (fs::exists(fs::path(path) / "latest_checkpointed_iteration.txt", ec))
        return (fs::path(checkpoint::find_latest_checkpoint(path).value_or(path)) / "config.json").string();
      return "";
    }
    const fs::path parent = fs::path(path).parent_path();
    return ((parent.empty() ? fs::path(".") : parent) / "config.json").string();
  }

  // Every rank reads the (shared) files tensor by tensor and keeps its pieces: whole tensors and whole optimizer
  // state, so any tensor- and data-parallel layout loads any other.
  void load() {
    const param::ParamTable whole = model->whole_table();
    const param::ParamTable& table = model->table();
    const std::vector<checkpoint::NamedTensor> tensors =
        checkpoint::slicing_tensors(table, whole, stage_map, model->params());
    if (o.finetune) {
      check_checkpoint_family(weights_config_path(o.load));
      checkpoint::WeightsOptions wo;
      for (const std::string& name : model->vocabulary_tensors()) wo.row_padded.insert(name);  // HF: 50257 rows
      const std::string file = checkpoint::load_weights(o.load, tensors, wo);
      log << "loaded weights for finetuning from " << file << " (iteration, optimizer and schedule start afresh)\n";
      return;
    }
    const checkpoint::ResumeTarget resume = checkpoint::find_resume_checkpoint(o.load);
    if (!resume.note.empty()) log << resume.note << "\n";
    if (!resume.dir) return;
    const std::optional<std::string>& dir = resume.dir;
    // The model's settings first: another family's checkpoint, then a shape-defining flag that differs, are named
    // before any tensor is compared.
    {
      const std::string config_path = *dir + "/config.json";
      std::ifstream config_file(config_path, std::ios::binary);
      if (config_file) {
        std::stringstream text;
        text << config_file.rdbuf();
        check_checkpoint_family(config_path);
        model->check_checkpoint_config(text.str(), config_path);
      }
    }
    optim::Optimizer& target = optimizer->to_load();
    checkpoint::OptimizerCheckpoint state = checkpoint::slicing_optimizer(target, table, whole, stage_map);
    // --no-load-optim: as Megatron, neither the optimizer state nor the schedule's position is read.
    checkpoint::LoadedCheckpoint loaded =
        checkpoint::load_checkpoint_tensors(*dir, tensors, o.no_load_optim ? nullptr : &state);
    if (!o.no_load_optim) target.set_steps(state.step);
    optimizer->scatter_loaded();
    const checkpoint::TrainerState& s = loaded.state;
    if (auto it = s.rng.find("grad_scaler"); it != s.rng.end() && scaler.active() && !o.no_load_optim)
      scaler.load(it->second);
    if (auto it = s.rng.find("seed"); it != s.rng.end() && it->second != std::to_string(o.seed))
      throw Error(*dir + ": the checkpoint was trained with --seed " + it->second + ", not " + std::to_string(o.seed) +
                  " (the data order depends on it); use the same seed, or --finetune to start a new run");
    model->check_checkpoint_config(loaded.config_json, *dir + "/config.json");
    if (o.no_load_optim) {
      log << "--no-load-optim: optimizer state and learning-rate schedule start afresh (as Megatron); iteration "
             "and data position continue\n";
    } else {
      const auto mode = o.override_opt_param_scheduler       ? optim::OptimizerParamScheduler::LoadMode::kOverride
                        : o.use_checkpoint_opt_param_scheduler ? optim::OptimizerParamScheduler::LoadMode::kUseCheckpoint
                                                               : optim::OptimizerParamScheduler::LoadMode::kCheck;
      try {
        lr_scheduler->load_state(s.scheduler, mode);
      } catch (const Error& e) {
        throw Error(*dir + ": " + e.what() + " (the learning-rate flags differ from the checkpoint's)");
      }
    }
    if (o.no_load_rng)
      log << "--no-load-rng: nothing to skip: lmforge's random state (data order, dropout masks) is a function of "
             "--seed, the iteration and the sample counters\n";
    iteration = s.iteration;
    consumed_train = s.consumed_train_samples;
    consumed_valid = s.consumed_valid_samples;
    last_saved = iteration;
    log << "loaded checkpoint " << *dir << " at iteration " << iteration << " (consumed samples: train "
        << consumed_train << ", validation " << consumed_valid << ")\n";
  }

  // Each stage's share of the steps run (its pipeline's figures, gathered to every stage): busy and idle time
  // against the 1F1B bubble (P−1)/(m+P−1), forwards per step (one per micro-batch), bytes sent to the neighbours
  // per step, the most micro-batches in flight (activation sets held) and the process's peak resident memory.
  void log_pipeline_timing() {
    const int P = pp_group()->size(), s = pp_group()->rank();
    constexpr size_t kFields = 8;
    std::vector<double> v((size_t)P * kFields, 0.0);
    const parallel::PipelineTiming& t = pipeline->timing();
    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    const double fields[kFields] = {(double)t.steps, t.wall_ms, t.busy_ms, (double)t.forwards, (double)t.sent_bytes,
                                    (double)t.peak_in_flight, (double)usage.ru_maxrss * 1024.0,
                                    (double)model->table().local_numel() * 4.0};
    std::copy(fields, fields + kFields, v.begin() + (ptrdiff_t)((size_t)s * kFields));
    pp_group()->all_reduce_sum(v.data(), v.size());
    const double m_local = (double)parallel::local_micro_batches(micro_batches(), *buckets);
    log << format("pipeline bubble: theory (P-1)/(m+P-1) = %.3f for P = %d stages and m = %.0f micro-batches\n",
                  (P - 1) / (m_local + P - 1), P, m_local);
    for (int q = 0; q < P; q++) {
      const double* f = v.data() + (size_t)q * kFields;
      const double steps = std::max(1.0, f[0]);
      log << format("pipeline stage %d: per step busy %.1f ms in %.0f forwards, idle %.1f ms (%.3f of %.1f ms); "
                    "sent %.0f bytes; micro-batches in flight at most %.0f; parameters %.3f MB; peak resident memory "
                    "%.1f MB\n",
                    q, f[2] / steps, f[3] / steps, (f[1] - f[2]) / steps, f[1] > 0 ? (f[1] - f[2]) / f[1] : 0.0,
                    f[1] / steps, f[4] / steps, f[5], f[7] / 1e6, f[6] / 1e6);
    }
    log.flush();
  }

  // Megatron's evaluation block: "<name> value: X | <name> PPL: Y | " for every loss of the task.
  void print_eval(const std::string& where, const std::vector<double>& losses) {
    std::string line = " validation loss at " + where + " | ";
    const std::vector<std::string> names = task->loss_names();
    for (size_t i = 0; i < losses.size(); i++)
      line += format("%s value: %.6E | %s PPL: %.6E | ", names[i].c_str(), losses[i], names[i].c_str(),
                     std::exp(std::min(20.0, losses[i])));
    const std::string rule(line.size() + 1, '-');
    log << rule << "\n" << line << "\n" << rule << "\n";
    log.flush();
  }
};

int logging_rank(const TrainOptions& options, int world_size) {
  return options.pipeline_model_parallel_size > 1 ? world_size - 1 : 0;
}

Trainer::Trainer(TrainOptions options, std::ostream& log) : Trainer(std::move(options), log, single_process()) {}

Trainer::Trainer(TrainOptions options, std::ostream& log, dist::Communicator& comm)
    : impl_(std::make_unique<Impl>(std::move(options), log)) {
  Impl& m = *impl_;
  TrainOptions& o = m.o;
  m.world = m.comm = &comm;
  // 1. Flags alone, then the files they name, then the work: every user error surfaces before indices are built.
  // The run's model family (families/registry.h) and device: every family-specific step below asks the family.
  const families::ModelFamily& family = families::model_family(o.model_type);
  m.backend = &kernels::backend_for(o.device);
  const std::string config_note = family.apply_config_file(o);
  if (!config_note.empty()) log << config_note;
  // Megatron's default global batch: one micro-batch on every data-parallel rank (micro x world / (T x P)).
  const int model_parallel = std::max(1, o.tensor_model_parallel_size * o.pipeline_model_parallel_size);
  if (o.global_batch_size == 0 && comm.size() % model_parallel == 0)
    o.global_batch_size = (int64_t)o.micro_batch_size * (comm.size() / model_parallel);
  validate_train_options(o);
  const int TP = o.tensor_model_parallel_size, PP = o.pipeline_model_parallel_size;
  parallel::check_parallel_layout(comm.size(), TP, o.global_batch_size, o.micro_batch_size, PP);
  // Every rank trains with the same settings, checked before the first collective whose shape depends on them.
  check_settings_agree(comm, o);
  // Megatron's rank order: the T ranks of a tensor-parallel group are adjacent, then data-parallel replicas, then
  // pipeline stages (process_groups.h).
  m.groups = parallel::make_process_groups(comm, TP, PP);
  if (m.groups.data) m.comm = m.groups.data.get();
  m.log_rank = logging_rank(o, comm.size());
  m.tokenizer = text::make_tokenizer(o.tokenizer);
  const int64_t vocab = (int64_t)m.tokenizer->vocab_size();
  for (const std::string& prefix : data_prefixes(o.data_path)) {
    // NVIDIA's HDF5 shards (train bert) have no .bin: their task checks each sample's ids, naming shard and row.
    if (!family.checks_token_ids(prefix)) continue;
    const int64_t max_id = data::max_token_id(prefix);
    if (max_id >= vocab)
      throw Error(prefix + ".bin: holds token id " + int_text(max_id) + ", outside the vocabulary of " + int_text(vocab) +
                  " tokens (" + m.tokenizer->type_name() +
                  (o.tokenizer.type == "NullTokenizer"   ? " of --vocab-size " + int_text(o.tokenizer.vocab_size)
                   : !o.tokenizer.model_file.empty()     ? " from " + o.tokenizer.model_file
                   : !o.tokenizer.name_or_path.empty()   ? " from " + o.tokenizer.name_or_path
                                                         : " from " + o.tokenizer.vocab_file) +
                  "); was the dataset made with another tokenizer?");
  }
  if (o.threads > 0) m.backend->set_num_threads(o.threads);
  check_memory(family.shape(o, vocab), o);
  m.lr_scheduler = std::make_unique<optim::OptimizerParamScheduler>(o.schedule);
  m.train_iters = o.schedule.train_iters ? *o.schedule.train_iters : *o.schedule.train_samples / o.global_batch_size;

  // 2. Data: Megatron's sample counts per split (the sample order depends on them).
  const int64_t train_samples =
      o.schedule.train_samples ? *o.schedule.train_samples : m.train_iters * o.global_batch_size;
  std::array<int64_t, 3> wanted = datasets::samples_per_split(m.train_iters, o.global_batch_size, o.eval_iters,
                                                              o.eval_interval);
  wanted[0] = train_samples;
  // Rank 0 builds the index cache first; the others then find it (no two processes write the same .npy).
  if (comm.rank() != 0) comm.barrier();
  m.task = family.make_task(o, *m.tokenizer, wanted);
  if (comm.rank() == 0) comm.barrier();
  if (o.print_samples > 0) return;  // run() prints them; no model is built
  if (!o.skip_train && m.task->split_size(SplitKind::TRAIN) == 0) {
    std::string paths;
    for (const std::string& p : o.data_path) paths += (paths.empty() ? "" : " ") + p;
    throw Error("--data-path " + paths + ": the train split has no samples (with --split " + o.split +
                "); is the dataset empty, or too small for its share of the split?");
  }

  // 3. Model, optimizer, checkpoint.
  // Every rank builds only its tensor-parallel pieces; the initialisation streams the whole model's generator and
  // keeps them, so every layout starts from the single-process weights.
  const parallel::ParallelLayout& layout = m.groups.layout;
  m.model = family.make_model(o, vocab, *m.backend, m.tp_group(), layout.pp_rank);
  if (auto* gpt = dynamic_cast<GPTModel*>(m.model.get())) m.gpt = &gpt->gpt();
  // Before init: init fills the working copy too.
  if (!m.model->set_compute_dtype(compute_dtype(o.precision)))
    throw Error(std::string(o.precision.bf16 ? "--bf16" : "--fp16") + ": lmforge train " + o.model_type +
                " runs in fp32 only for now (mixed precision is implemented for train gpt)");
  m.model->init_weights(o.seed);
  m.spans = param_spans(m.model->table(), m.model->params(), m.model->grads(), m.model->working_params());
  // The trainer's parallel pieces (parallel/): the gradients' data-parallel buckets, their global norm, the
  // optimizer (whole or sharded over the data-parallel group) and the micro-batch schedule.
  m.buckets = std::make_unique<parallel::GradBuckets>(*m.comm, m.spans, m.model->grads(), o.use_distributed_optimizer,
                                                      (size_t)o.ddp_bucket_size);
  m.optimizer = std::make_unique<parallel::DistributedOptimizer>(*m.buckets, m.spans, m.model->params(), o.optimizer);
  m.grad_norm = std::make_unique<parallel::GradNorm>(m.spans);
  if (o.zero_stage == 2) m.buckets->shard_gradients();
  // --fp16: gradients are held in fp16 storage before the reduction (rounded bucket by bucket as each reduction
  // starts, never while one is in flight).
  m.buckets->set_f16_gradient_storage(o.precision.fp16);
  if (TP > 1) {
    std::vector<bool> counted;  // replicated tensors count once in the global norm
    for (const param::Parameter& t : m.model->table()) counted.push_back(!t.replicated() || m.tp_group()->rank() == 0);
    m.grad_norm->set_tensor_parallel(m.tp_group(), counted);
    m.optimizer->set_tensor_parallel(m.tp_group(), counted);
  }
  m.stage_map = checkpoint::map_stage_tensors(m.model->table(), m.model->whole_table(), m.pp_group());
  if (o.balance_data_parallel && PP > 1)
    throw Error("--balance-data-parallel needs --pipeline-model-parallel-size 1 (pure data parallelism)");
  auto* stage_model = dynamic_cast<PipelineStage*>(m.model.get());
  m.passes = std::make_unique<ModelPasses>(*m.model, stage_model, *m.task, o.micro_batch_size, o.seed);
  if (PP > 1) {
    if (stage_model == nullptr) throw Error("--pipeline-model-parallel-size: this model cannot be cut into stages");
    auto schedule = std::make_unique<parallel::PipelineSchedule>(*m.pp_group(), *m.passes);
    m.pipeline = schedule.get();
    m.microbatch_schedule = std::move(schedule);
    // A tensor another stage owns (the tied embedding's copy on the last stage) is not counted in the norm.
    std::vector<bool> copy;
    const param::ParamTable whole = m.model->whole_table();
    for (const param::Parameter& t : m.model->table())
      copy.push_back(m.stage_map.owner[whole.index_of(t.name)] != layout.pp_rank);
    m.grad_norm->set_pipeline(m.pp_group(), copy);
  } else if (o.balance_data_parallel) {
    if (TP > 1) throw Error("--balance-data-parallel needs --tensor-model-parallel-size 1 (pure data parallelism)");
    m.microbatch_schedule =
        std::make_unique<parallel::BalancedSchedule>(*m.comm, m.micro_batches(), o.balance_interval, m.log);
  } else {
    m.microbatch_schedule = std::make_unique<parallel::SequentialSchedule>();
  }
  if (m.comm->size() > 1)
    m.model->set_gradients_ready_hook([b = m.buckets.get()](size_t from) { b->gradients_ready(from); });
  if (!o.load.empty()) m.load();
  m.model->params_updated();  // the working copy of loaded weights (nothing in fp32)

  if (!o.save.empty() && comm.rank() == 0) {  // an unusable --save fails now, not after training
    const uint64_t state_arrays = o.optimizer.kind == "sgd" ? (o.optimizer.sgd_momentum != 0.0 ? 1 : 0) : 2;
    const std::string warning =
        checkpoint::check_save_dir(o.save, (uint64_t)m.model->table().whole_numel() * 4 * (1 + state_arrays));
    if (!warning.empty()) log << "warning: --save " << warning << "\n";
    m.save_lock = checkpoint::lock_save_dir(o.save);  // and so does a second run saving into it
  }
  if (!o.tensorboard_dir.empty() && comm.rank() == m.log_rank) m.tensorboard = std::make_unique<TensorBoardWriter>(o.tensorboard_dir);

  const size_t whole_params = m.model->table().whole_numel(), local_params = m.model->table().local_numel();
  log << m.model->describe();
  log << "backend: " << m.backend->info() << "\n" << m.task->summary();
  log << precision_summary(o.precision, bf16_gemm_description(o.device));
  if (o.recompute_granularity == "selective")
    log << "activation recomputation: selective (the attention core of every layer)\n";
  else if (o.recompute_granularity == "full")
    log << format("activation recomputation: full, %s, %d layer%s %s\n", o.recompute_method.c_str(),
                  o.recompute_num_layers, o.recompute_num_layers == 1 ? "" : "s",
                  o.recompute_method == "uniform" ? "per chunk" : "recomputed (the first ones)");
  log << format("training: %lld iterations of %lld samples (%lld micro-batches of %d)\n", (long long)m.train_iters,
                (long long)o.global_batch_size, (long long)m.micro_batches(), o.micro_batch_size);
  if (TP > 1)
    log << format("tensor parallel: %d ranks per group (%zu of %zu parameters on each), %d data-parallel groups\n", TP,
                  local_params, whole_params, comm.size() / TP);
  if (PP > 1) {
    const std::string split = family.pipeline_stage_layers(o);
    log << format("pipeline parallel: %d stages (layers per stage: %s), 1F1B schedule, %d data-parallel replicas\n",
                  PP, split.c_str(), layout.data)
        << layout.describe();
  }
  // What this rank holds (every tensor-parallel rank holds the same amount).
  log << format("memory on rank %d: parameters %.1f MB, gradients %.1f MB, optimizer state %.1f MB (%s)\n",
                comm.rank(), local_params * 4.0 / 1e6, (double)m.buckets->held_gradient_bytes() / 1e6,
                (double)m.optimizer->state_bytes() / 1e6, o.optimizer.kind.c_str());
  if (comm.size() > 1 || o.use_distributed_optimizer)
    log << format("data parallel: %d ranks (%s), %zu gradient buckets; %s %s optimizer: state %.3f MB on this rank; "
                  "gradients %s: %.3f MB held after the backward\n",
                  m.comm->size(), m.comm->name().c_str(), m.buckets->buckets().size(),
                  m.optimizer->sharded() ? "distributed" : "replicated", o.optimizer.kind.c_str(),
                  (double)m.optimizer->state_bytes() / 1e6,
                  m.buckets->gradients_sharded() ? "sharded (ZeRO-2)" : "whole",
                  (double)m.buckets->held_gradient_bytes() / 1e6);
  log.flush();
}

Trainer::~Trainer() = default;

Model& Trainer::model() { return *impl_->model; }
model::GPT& Trainer::gpt() {
  if (impl_->gpt == nullptr) throw Error("Trainer::gpt(): the model is a " + impl_->o.model_type + ", not a GPT");
  return *impl_->gpt;
}
int64_t Trainer::iteration() const { return impl_->iteration; }
const std::vector<IterationRecord>& Trainer::history() const { return impl_->history; }
const std::vector<EvalRecord>& Trainer::evaluations() const { return impl_->evals; }

void Trainer::print_samples(std::ostream& out) {
  Impl& m = *impl_;
  for (SplitKind split : {SplitKind::TRAIN, SplitKind::VALID, SplitKind::TEST}) {
    if (!m.task->has_split(split)) continue;
    const int64_t n = std::min<int64_t>(m.o.print_samples, m.task->split_size(split));
    for (int64_t i = 0; i < n; i++) out << m.task->sample_json(split, i) << "\n";
  }
  out.flush();
}

double Trainer::evaluate(int split_number, int64_t first) { return evaluate_losses(split_number, first)[0]; }

std::vector<double> Trainer::evaluate_losses(int split_number, int64_t first) {
  Impl& m = *impl_;
  const auto split = static_cast<SplitKind>(split_number);
  std::vector<double> sums;
  for (int it = 0; it < m.o.eval_iters; it++) {
    const std::vector<double> batch =
        m.microbatch_schedule->run(m.plan(split, first + it * m.o.global_batch_size, false), *m.passes, *m.buckets);
    if (sums.empty()) sums.assign(batch.size(), 0.0);
    for (size_t i = 0; i < batch.size(); i++) sums[i] += batch[i];
  }
  for (double& v : sums) v = m.data_parallel_sum(v) / double(m.o.eval_iters * m.micro_batches());
  return sums;
}

void Trainer::run() {
  Impl& m = *impl_;
  const TrainOptions& o = m.o;
  if (o.print_samples > 0) {
    if (m.world->rank() == 0) print_samples(m.log);
    return;
  }
  const int64_t M = m.micro_batches();
  const int T = o.seq_length;
  const bool do_valid = o.eval_iters > 0 && m.task->has_split(SplitKind::VALID);
  const bool do_test = o.eval_iters > 0 && m.task->has_split(SplitKind::TEST);

  const std::vector<std::string> loss_names = m.task->loss_names();
  auto run_eval = [&](SplitKind split, int64_t first, const std::string& where, const std::string& name) {
    const std::vector<double> losses = evaluate_losses((int)split, first);
    const double ppl = std::exp(std::min(20.0, losses[0]));
    m.evals.push_back({name, m.iteration, losses[0], ppl, losses});
    m.print_eval(where, losses);
    if (m.tensorboard) {
      for (size_t i = 0; i < losses.size(); i++) {
        m.tensorboard->add_scalar(loss_names[i] + " " + name, losses[i], m.iteration);
        m.tensorboard->add_scalar(loss_names[i] + " " + name + " ppl", std::exp(std::min(20.0, losses[i])),
                                  m.iteration);
      }
      m.tensorboard->flush();
    }
    for (size_t i = 0; i < losses.size(); i++)
      if (!std::isfinite(losses[i]))
        throw Error(name + " " + loss_names[i] + " is not finite at iteration " + int_text(m.iteration));
  };

  std::vector<double> interval_losses(loss_names.size(), 0.0);
  double interval_ms = 0.0;
  int interval_count = 0, interval_skipped = 0, interval_nan = 0;
  const bool mixed = o.precision.fp16 || o.precision.bf16;
  const auto start = std::chrono::steady_clock::now();
  const int64_t first_iteration = m.iteration;
  int64_t run_skipped = 0;  // iterations of this run skipped for overflowing gradients
  // A run whose every iteration was skipped trained nothing: an error, before a checkpoint of the unchanged weights
  // could look like a result.
  auto check_not_all_skipped = [&] {
    const int64_t ran = m.iteration - first_iteration;
    if (ran == 0 || run_skipped < ran) return;
    throw Error("every one of the " + int_text(ran) + " iterations of this run was skipped: the gradients overflowed " +
                (o.precision.fp16 ? "in fp16" : "in bf16") + " at every loss scale tried (the last " +
                format("%g", m.history.back().loss_scale) + "), so the weights are where they started; the run ends without " +
                "its final checkpoint; " +
                (m.scaler.dynamic()
                     ? format("the dynamic scale starts at %g (--initial-loss-scale; DeepSpeed: fp16.initial_scale_power) "
                              "and halves once per overflow after --hysteresis %d overflows: start it lower or train "
                              "longer",
                              o.precision.initial_loss_scale, o.precision.hysteresis)
                     : std::string("lower --loss-scale, or drop it for dynamic loss scaling")));
  };
  while (!o.skip_train && m.iteration < m.train_iters) {
    const auto t0 = std::chrono::steady_clock::now();
    if (m.buckets->gradients_sharded()) m.buckets->zero_gradients();  // ZeRO-2: only the owned pieces are held
    else m.model->zero_grad();
    // This rank's share of the global batch (all of it in one process), forward and backward; with --fp16 the
    // backward runs on the loss times the loss scale.
    parallel::StepPlan plan = m.plan(SplitKind::TRAIN, m.consumed_train, true);
    const double loss_scale = m.scaler.active() ? m.scaler.scale() : 1.0;
    plan.loss_scale = (float)loss_scale;
    std::vector<double> loss_sums = m.microbatch_schedule->run(plan, *m.passes, *m.buckets);
    for (double& v : loss_sums) v = m.data_parallel_sum(v);
    // --fp16: the (scaled) parameter gradients are held in fp16 before they are unscaled, as Megatron's fp16 model
    // gradients: a value beyond 65504 is inf and the step is skipped.
    if (o.precision.fp16) m.buckets->round_gradients_to_f16();
    // The global-batch gradient is the mean over micro-batches (Megatron divides each loss by their number),
    // summed across data-parallel ranks first; the norm is global (and unscaled). Plain data parallelism then
    // gathers the whole clipped gradient on every rank.
    m.buckets->reduce();
    const double norm = m.grad_norm->scale_and_clip(m.model->grads(), m.buckets->owned(), *m.comm,
                                                    parallel::gradient_scale(M, loss_scale),
                                                    M > 1 || loss_scale != 1.0, o.clip_grad);
    m.buckets->gather_gradients();
    // The objective is the sum of the task's losses (BERT: lm + sop), each the mean over the global batch's
    // micro-batches, weighted as the task says (ELECTRA: mlm + 50·disc; its accuracy does not count).
    const std::vector<double> weights = m.task->objective_weights();
    std::vector<float> losses;
    double total = 0.0;
    for (size_t i = 0; i < loss_sums.size(); i++) {
      const double v = loss_sums[i];
      losses.push_back((float)(v / (double)M));
      total += (i < weights.size() ? weights[i] : 1.0) * v / (double)M;
    }
    const float loss = (float)total;
    // An overflow under loss scaling (inf or NaN anywhere in the gradients makes the global norm so, on every rank)
    // skips the update and lowers a dynamic scale, as Megatron's optimizer.step() returning update_successful = False.
    const bool overflow = m.scaler.active() && (!std::isfinite(norm) || !std::isfinite(loss));
    if (m.scaler.active()) m.scaler.update(overflow);
    if (!overflow && (!std::isfinite(loss) || !std::isfinite(norm)))
      throw Error("iteration " + int_text(m.iteration + 1) + ": loss " + std::to_string(loss) + ", grad norm " +
                  std::to_string(norm) + " — training diverged (try a lower --lr or --clip-grad)");
    // Megatron's convention: this step uses lr(num_steps) before the increment, so the first warm-up step has lr 0.
    // A skipped iteration leaves the weights and the schedule where they were (Megatron steps the scheduler only
    // after a successful update) but counts as an iteration and consumes its samples.
    const double lr = m.lr_scheduler->lr();
    if (!overflow) {
      m.optimizer->step(lr, m.lr_scheduler->weight_decay());
      // The bf16/fp16 working copy of the new weights (AdamW on the CPU writes a bf16 one in its own pass).
      if (!m.optimizer->writes_working_copy()) m.model->params_updated();
      m.lr_scheduler->step(o.global_batch_size);
    }
    m.iteration++;
    m.consumed_train += o.global_batch_size;
    run_skipped += overflow;
    // An accelerator runs the step's last kernels (the optimizer's) after their launch returns: the step's time
    // includes them (and the next step's does not). Returns at once on the CPU.
    m.backend->synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    m.history.push_back({m.iteration, m.consumed_train, loss, lr, norm, ms, loss_scale, overflow, losses});

    if (overflow) {
      interval_skipped++;
      interval_nan += !std::isfinite(loss);
    } else {
      for (size_t i = 0; i < losses.size(); i++) interval_losses[i] += losses[i];
      interval_count++;
    }
    interval_ms += ms;
    if (m.iteration % o.log_interval == 0 || m.iteration == m.train_iters) {
      const int iterations = interval_count + interval_skipped;
      const double avg_ms = interval_ms / iterations;
      const double tokens_per_s = (double)o.global_batch_size * T / (avg_ms / 1000.0);
      // Megatron's line; like Megatron the learning rate shown is the one the next iteration will use, the losses
      // the means over the interval's successful iterations and (mixed precision) the loss scale the current one.
      std::string line = format(" iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): "
                                "%.1f | throughput (tokens/s): %.1f | learning rate: %.6E | global batch size: %5lld |",
                                (long long)m.iteration, (long long)m.train_iters, (long long)m.consumed_train, avg_ms,
                                tokens_per_s, m.lr_scheduler->lr(), (long long)o.global_batch_size);
      if (interval_count > 0)
        for (size_t i = 0; i < loss_names.size(); i++)
          line += format(" %s: %.6E |", loss_names[i].c_str(), interval_losses[i] / interval_count);
      if (mixed) line += format(" loss scale: %.1f |", m.scaler.active() ? m.scaler.scale() : 1.0);
      line += format(" grad norm: %.3f |", norm);
      if (mixed)
        line += format(" number of skipped iterations: %3d | number of nan iterations: %3d |", interval_skipped,
                       interval_nan);
      m.log << line << "\n";
      m.log.flush();
      if (m.tensorboard) {
        for (size_t i = 0; i < loss_names.size() && interval_count > 0; i++) {
          m.tensorboard->add_scalar(loss_names[i], interval_losses[i] / interval_count, m.iteration);
          m.tensorboard->add_scalar(loss_names[i] + " vs samples", interval_losses[i] / interval_count,
                                    m.consumed_train);
        }
        m.tensorboard->add_scalar("learning-rate", m.lr_scheduler->lr(), m.iteration);
        m.tensorboard->add_scalar("grad-norm", norm, m.iteration);
        if (mixed) m.tensorboard->add_scalar("loss-scale", m.scaler.active() ? m.scaler.scale() : 1.0, m.iteration);
        m.tensorboard->add_scalar("throughput (tokens/s)", tokens_per_s, m.iteration);
        m.tensorboard->add_scalar("iteration-time (ms)", avg_ms, m.iteration);
        m.tensorboard->flush();
      }
      std::fill(interval_losses.begin(), interval_losses.end(), 0.0);
      interval_ms = 0.0;
      interval_count = interval_skipped = interval_nan = 0;
    }
    // Every rank saw the same overflow, so every rank stops here alike.
    if (const std::string why = m.scaler.stalled(); !why.empty())
      throw Error("iteration " + int_text(m.iteration) + ": " + why);
    if (do_valid && m.iteration % o.eval_interval == 0) {
      run_eval(SplitKind::VALID, m.consumed_valid, "iteration " + int_text(m.iteration), "validation");
      m.consumed_valid += (int64_t)o.eval_iters * o.global_batch_size;
    }
    if (!o.save.empty() && o.save_interval > 0 && m.iteration % o.save_interval == 0) m.save();
    const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 60.0;
    const bool by_interval = o.exit_interval > 0 && m.iteration % o.exit_interval == 0;
    bool by_time = o.exit_duration_in_mins > 0.0 && minutes >= o.exit_duration_in_mins;
    // Clocks differ between ranks: they stop together when any one of them has run out of time.
    if (o.exit_duration_in_mins > 0.0 && m.world->size() > 1) {
      double any = by_time ? 1.0 : 0.0;
      m.world->all_reduce_sum(&any, 1);
      by_time = any > 0.0;
    }
    if ((by_interval || by_time) && m.iteration < m.train_iters) {
      check_not_all_skipped();
      if (!o.save.empty() && m.last_saved != m.iteration) m.save();
      m.log << "exiting at iteration " << m.iteration
            << (by_interval ? " (--exit-interval " + int_text(o.exit_interval) + ")\n"
                            : format(" (--exit-duration-in-mins %g: %.2f minutes)\n", o.exit_duration_in_mins,
                                     minutes));
      m.log.flush();
      return;
    }
  }
  check_not_all_skipped();
  if (!o.skip_train && !o.save.empty() && m.last_saved != m.iteration) m.save();
  if (do_valid) {
    run_eval(SplitKind::VALID, m.consumed_valid, "the end of training for val data", "validation");
    m.consumed_valid += (int64_t)o.eval_iters * o.global_batch_size;
  }
  if (do_test) run_eval(SplitKind::TEST, 0, "the end of training for test data", "test");
  if (m.pipeline) m.log_pipeline_timing();
  if (m.comm->size() > 1)
    m.log << format("data parallel: %lld of %lld bucket reductions started during the backward pass\n",
                    (long long)m.buckets->overlapped_buckets(), (long long)m.buckets->reduced_buckets());
}

}  // namespace lmforge::train
