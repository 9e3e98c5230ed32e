// defines: lmforge::checkpoint::NamedTensor, TrainerState, save_checkpoint(), find_latest_checkpoint(),
//          find_resume_checkpoint(), load_checkpoint(), load_weights(), JSON object helpers
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "data/writer_lock.h"
#include "optim/optimizer.h"
#include "optim/lr_schedule.h"

namespace lmforge::checkpoint {

// One fp32 tensor of a checkpoint file as the caller holds it (for GPT-2: HF names such as
// "transformer.h.0.attn.c_attn.weight", HF layouts). A file's view, not a second description of a parameter: the
// trainer builds them from the whole model's param::ParamTable (checkpoint/model_io.h). Either whole in memory (`data`, e.g. into the model's flat
// buffer), or handed over one tensor at a time through callbacks, for callers that never hold the whole tensor —
// a tensor-parallel rank holds a piece: on save, produce(whole) assembles the tensor into `whole` (nullptr on a
// rank that does not write, which still takes part in the gathering); on load, consume(whole) receives it read from
// the file (and keeps its piece). Saves and loads visit the tensors in the order given, one at a time, holding one
// tensor's buffer.
struct NamedTensor {
  NamedTensor() = default;
  NamedTensor(std::string name_, std::vector<int64_t> shape_, float* data_ = nullptr)
      : name(std::move(name_)), shape(std::move(shape_)), data(data_) {}
  std::string name;
  std::vector<int64_t> shape;
  float* data = nullptr;
  std::function<void(float* whole)> produce;
  std::function<void(const float* whole)> consume;
  size_t numel() const;
};

// An optimizer's part of a checkpoint (optimizer.safetensors): its kind, step count and hyperparameters, and its
// state tensors "<state>.<parameter name>" shaped as the parameter.
struct OptimizerCheckpoint {
  std::string kind;                              // "adamw", "lamb", "sgd"
  int64_t step = 0;                              // filled by a load
  std::map<std::string, std::string> hyperparameters;
  std::vector<NamedTensor> tensors;
};
// The checkpoint tensors of an optimizer holding the whole state, as producers and consumers copying its state
// arrays (device memory) through its Backend (the shapes of `model`'s tensors of the same names; flat otherwise).
OptimizerCheckpoint optimizer_checkpoint(optim::Optimizer& optimizer, std::span<const NamedTensor> model);

// A JSON value that is not a scalar (array or object), kept as minified JSON text.
struct RawJson {
  std::string text;
  bool operator==(const RawJson&) const = default;
};
using JsonValue = std::variant<bool, int64_t, double, std::string, RawJson>;
using JsonObject = std::map<std::string, JsonValue>;

// Parses a JSON object's top level (e.g. an HF config.json); nested values come back as RawJson. Error names
// `source` (a path) when the text is not a JSON object.
JsonObject parse_json_object(const std::string& text, const std::string& source);
std::string to_json(const JsonObject& object);  // pretty-printed, keys sorted, trailing newline

// Everything in trainer_state.json.
struct TrainerState {
  int64_t iteration = 0;
  int64_t consumed_train_samples = 0;
  int64_t consumed_valid_samples = 0;
  optim::SchedulerState scheduler;
  std::map<std::string, std::string> rng;  // RNG states, each serialized to text by its owner
  JsonObject args;                         // the arguments the run used
};

// Checkpoint layout (modeled on Megatron's):
//   <save>/latest_checkpointed_iteration.txt   "100" (Megatron's pointer file; "release" also accepted)
//   <save>/iter_0000100/model.safetensors      the parameter table under its own (HF) names, F32
//   <save>/iter_0000100/config.json            as given by the caller (HF GPT2Config for GPT-2)
//   <save>/iter_0000100/optimizer.safetensors  <state>.<name> for each of the optimizer's state_names() per
//                                              parameter, shaped as the parameter (adamw, lamb: exp_avg.<name>,
//                                              exp_avg_sq.<name>; sgd: momentum_buffer.<name>, none without
//                                              momentum); metadata optimizer (adamw|lamb|sgd), step, its
//                                              hyperparameters
//   <save>/iter_0000100/trainer_state.json     TrainerState
// A save writes <save>/iter_0000100.tmp-<host>-<pid>/, fsyncs every file and the directory, renames it into place
// (replacing an older save of the same iteration) and then replaces the pointer file the same way, so a crash
// leaves either the previous checkpoint or the new one, never a half-written directory under the final name; a save
// that fails (a full disk, an I/O error, a lost lock) removes its own temporaries before the error is reported.
// A save killed between moving an older save of the same iteration aside (iter_N.old-<host>-<pid>) and renaming the
// new one in is put right by the next save or load on that host: the old directory is renamed back; temporaries of
// dead processes are removed then too.
struct SaveRequest {
  std::span<const NamedTensor> model;
  std::string config_json;                  // must be a JSON object
  const optim::Optimizer* optimizer = nullptr;  // nullptr: no optimizer.safetensors (--no-save-optim), unless:
  const OptimizerCheckpoint* optimizer_state = nullptr;  // the optimizer's tensors as callbacks (sharded state)
  TrainerState state;                       // state.iteration names the directory
  // false: this rank only takes part in producing the tensors (every produce() is called with nullptr, in the
  // writer's order) and no file is touched; the writer's call returns the directory.
  bool writer = true;
  // The save directory's lock (lock_save_dir()), if taken: checked before anything is renamed into place, so a
  // writer that lost it (stopped past its lease while another run took the directory) publishes nothing.
  data::WriterLock* lock = nullptr;
};

std::string iteration_dir_name(int64_t iteration);  // "iter_0000100", Megatron's iter_{:07d}
// Before any training: creates `save_dir` if needed and proves it writable (a probe file created and removed), so
// an unusable --save fails at once rather than after hours of training. Errors name the path and the reason.
// Returns a warning (empty if none) when the file system has less free space than `bytes_per_checkpoint`.
std::string check_save_dir(const std::string& save_dir, uint64_t bytes_per_checkpoint);
// One writer per --save directory: the lock .<name>.lock.N beside it (data/writer_lock.h; inside, it would make
// a fresh --save non-empty), held for the whole training run, so a second run saving into the same directory
// fails at start naming the first one's host and pid. A run killed with SIGKILL on the same machine is taken over
// at once, one on another machine after the lock's lease (kDefaultWriterLockLeaseSeconds) without a heartbeat.
// Creates the directory if needed.
std::unique_ptr<data::WriterLock> lock_save_dir(const std::string& save_dir);
// Writes a checkpoint and updates the pointer; returns the final directory. Errors name the path.
std::string save_checkpoint(const std::string& save_dir, const SaveRequest& request);

// fairseq's --keep-interval-updates N: removes all but the N newest iter_NNNNNNN directories of `save_dir` (by
// iteration number; other files and directories are left alone) and returns the removed paths, oldest first.
// Errors name the path.
std::vector<std::string> keep_newest_iterations(const std::string& save_dir, int keep);

// The directory the pointer file in load_dir names, or nullopt when load_dir has no pointer file (Megatron
// then starts from scratch). A malformed pointer, or one naming a missing directory, is an Error.
std::optional<std::string> find_latest_checkpoint(const std::string& load_dir);

// What --load names (fairseq's --restore-file too), read as Megatron's and fairseq's users mean it: a save directory
// (the checkpoint its pointer file names), one of its iteration directories (that checkpoint), or the
// model.safetensors inside one (its directory). `dir` is empty when there is nothing to resume: `load` does not
// exist, or is a directory holding no checkpoint (Megatron then starts from scratch; `note` says so). Anything else
// that exists is an Error saying what it is and what reads it, never a silent fresh start: a weights file or a
// model directory without trainer state (--finetune), a save directory whose pointer file is missing (the newest
// iteration directory named), a PyTorch .pt file, any other file.
struct ResumeTarget {
  std::optional<std::string> dir;
  std::string note;  // how `load` was read, for the log ("" for a save directory with its pointer file)
};
ResumeTarget find_resume_checkpoint(const std::string& load);

struct LoadedCheckpoint {
  std::string dir;
  TrainerState state;
  std::string config_json;
  bool has_optimizer = false;  // optimizer.safetensors was present (and loaded when asked)
};

// Loads a checkpoint directory (as returned by find_latest_checkpoint, or <load>/iter_NNNNNNN for a given
// iteration) into the model table and, when optimizer is non-null, the optimizer's named state and step count
// (the checkpoint's optimizer kind must match: a lamb checkpoint does not load into adamw).
// Validates everything before writing into any caller buffer: missing files, truncated or corrupt
// safetensors, missing/extra tensors and shape mismatches against the table are Errors naming the file and
// tensor. A checkpoint without optimizer state loads when optimizer is null; with a non-null optimizer its
// absence is an Error (use --no-load-optim). The optimizer must hold the whole index space (no shard). A NaN or
// infinity in any tensor (weights or optimizer state) is an Error naming the file, the tensor and the element, found
// as the tensor is read (the caller's buffers may then hold part of the checkpoint; the load has failed).
LoadedCheckpoint load_checkpoint(const std::string& dir, std::span<const NamedTensor> model,
                                 optim::Optimizer* optimizer = nullptr);
// The same with the optimizer's tensors as the caller lays them out (e.g. consume callbacks keeping a
// tensor-parallel piece): `optimizer->kind` must match the file's, its tensors must be exactly the file's, and
// optimizer->step is filled in.
LoadedCheckpoint load_checkpoint_tensors(const std::string& dir, std::span<const NamedTensor> model,
                                         OptimizerCheckpoint* optimizer);

// Weights only (--finetune, --load of a Hugging Face model). `path` is a .safetensors file, a directory with
// model.safetensors (an HF model directory or one of our iteration directories), or a save directory with a
// pointer file. Names match with or without the "transformer." prefix; "attn.bias"/"attn.masked_bias"
// buffers and a tied duplicate "lm_head.weight" in the file are ignored unless the table has them. Missing or
// unexpected tensors and shape mismatches are Errors. Tensors named in row_padded may have fewer rows in the
// file than in the table (a vocabulary padded to a multiple of 128): the extra rows are zero-filled.
// F16/BF16/F64 files are converted to fp32; a non-finite value is an Error naming the tensor. Returns the file read.
struct WeightsOptions {
  std::set<std::string> row_padded;
};
std::string load_weights(const std::string& path, std::span<const NamedTensor> model,
                         const WeightsOptions& options = {});

}  // namespace lmforge::checkpoint
