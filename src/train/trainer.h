// defines: lmforge::train::validate_train_options(), IterationRecord, EvalRecord, Trainer (Megatron-style GPT
//   pretraining loop: accumulation, clipping, AdamW, LR schedule, evaluation, logging, checkpoints),
//   gpt_config_json() / gpt_config_from_json() (HF GPT2Config text), max_token_id()
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/gpt.h"
#include "train/train_options.h"

namespace lmforge::train {

// Checks the flags alone (no file is opened): required flags, heads dividing hidden size, seq-length within
// max-position-embeddings, global batch a multiple of the micro batch, exactly one of --train-iters and
// --train-samples, schedule flags (as Megatron resolves them), intervals, --save-interval without --save, ...
// Throws lmforge::Error naming the flag. Fills the defaults that depend on other flags into `options`.
void validate_train_options(TrainOptions& options);

// Largest token id stored in <prefix>.bin (a memory-mapped scan; -1 for an empty dataset). The trainer checks it
// against the vocabulary before building any index, so a dataset made with another tokenizer fails at once.
int64_t max_token_id(const std::string& prefix);

// Hugging Face GPT2Config JSON for a model (vocab_size is the padded size, the number of rows of wte, so that
// transformers loads the file as-is), plus lmforge_vocab_size (the tokenizer's, which bounds sampling) and
// lmforge_make_vocab_size_divisible_by.
std::string gpt_config_json(const model::GPTConfig& config);
// The inverse, also for a plain Hugging Face config.json (then vocab_size is taken as unpadded, divisible-by 1).
// seq_length is set to n_positions. Error naming `source` for missing or invalid fields.
model::GPTConfig gpt_config_from_json(const std::string& text, const std::string& source);

struct IterationRecord {
  int64_t iteration = 0;         // 1-based, after the step
  int64_t consumed_samples = 0;  // train samples consumed after the step
  float loss = 0.0f;             // mean over the global batch's micro-batches
  double lr = 0.0;               // the learning rate this step applied
  double grad_norm = 0.0;        // global gradient norm before clipping
  double ms = 0.0;               // wall time of the iteration
};

struct EvalRecord {
  std::string name;       // "validation" or "test"
  int64_t iteration = 0;  // the iteration after which it ran
  double loss = 0.0;      // mean lm loss over eval_iters global batches
  double ppl = 0.0;       // exp(min(20, loss)), as Megatron
};

// One training run. The constructor validates the options, opens the tokenizer and the data (checking the
// token ids against the vocabulary), builds the sample indices, the model, the optimizer and the schedule,
// and loads --load / --finetune weights; nothing is trained before run().
class Trainer {
 public:
  Trainer(TrainOptions options, std::ostream& log);
  // Data parallel over `comm` (which must outlive the trainer): each rank runs its share of every global batch,
  // gradients are summed across ranks (see train/parallel.h), rank 0 writes checkpoints and TensorBoard; pass a
  // null-buffered stream as `log` on the other ranks. Every rank must construct and run() alike.
  Trainer(TrainOptions options, std::ostream& log, dist::Communicator& comm);
  ~Trainer();

  // Trains until --train-iters (or --train-samples / global batch) or --exit-interval, evaluating, logging and
  // saving as the options ask; at the end evaluates the validation and test splits and saves.
  void run();

  // The whole model. With --tensor-model-parallel-size > 1 the shards compute and this holds the whole weights
  // as of the last checkpoint or the end of run().
  model::GPT& model();
  int64_t iteration() const;
  const std::vector<IterationRecord>& history() const;  // every iteration run by this process
  const std::vector<EvalRecord>& evaluations() const;

  // One evaluation on `split` (1 validation, 2 test) over eval_iters global batches starting at sample `first`.
  double evaluate(int split, int64_t first);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmforge::train
