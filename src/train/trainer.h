// defines: lmforge::train::IterationRecord, EvalRecord, Trainer (Megatron-style pretraining loop: accumulation,
//   clipping, the optimizer, LR schedule, evaluation, logging, checkpoints)
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/gpt.h"
#include "train/model.h"
#include "train/train_options.h"

namespace lmforge::train {

struct IterationRecord {
  int64_t iteration = 0;         // 1-based, after the step
  int64_t consumed_samples = 0;  // train samples consumed after the step
  float loss = 0.0f;             // mean over the global batch's micro-batches
  double lr = 0.0;               // the learning rate this step applied
  double grad_norm = 0.0;        // global gradient norm before clipping
  double ms = 0.0;               // wall time of the iteration
  double loss_scale = 1.0;       // the loss scale this step's backward used (--fp16; 1 otherwise)
  bool skipped = false;          // --fp16: the gradients overflowed, no update was made (the scale was updated)
  std::vector<float> losses;     // each of the task's losses (Task::loss_names()), mean over the global batch;
                                 // `loss` is their sum, the objective
};

struct EvalRecord {
  std::string name;       // "validation" or "test"
  int64_t iteration = 0;  // the iteration after which it ran
  double loss = 0.0;      // mean lm loss (the task's first loss) over eval_iters global batches
  double ppl = 0.0;       // exp(min(20, loss)), as Megatron
  std::vector<double> losses;  // every loss of the task (the first is `loss`)
};

// The rank that logs and writes TensorBoard: rank 0, or under pipeline parallelism the last rank (a rank of the
// last stage, which computes the losses; Megatron's print_rank_last). Rank 0 writes checkpoints.
int logging_rank(const TrainOptions& options, int world_size);

// One training run. The constructor validates the options, opens the tokenizer and the data (checking the
// token ids against the vocabulary), builds the sample indices, the model, the optimizer and the schedule,
// and loads --load / --finetune weights; nothing is trained before run().
class Trainer {
 public:
  Trainer(TrainOptions options, std::ostream& log);
  // Data parallel over `comm` (which must outlive the trainer): each rank runs its share of every global batch,
  // gradients are summed across ranks (see parallel/grad_buckets.h), rank 0 writes checkpoints and TensorBoard; pass a
  // null-buffered stream as `log` on the other ranks. Every rank must construct and run() alike.
  Trainer(TrainOptions options, std::ostream& log, dist::Communicator& comm);
  ~Trainer();

  // Trains until --train-iters (or --train-samples / global batch) or --exit-interval, evaluating, logging and
  // saving as the options ask; at the end evaluates the validation and test splits and saves.
  void run();

  // The model this rank trains (with --tensor-model-parallel-size > 1 its pieces).
  Model& model();
  // The same model as a GPT (`lmforge train gpt`; an Error for other models).
  model::GPT& gpt();
  int64_t iteration() const;
  const std::vector<IterationRecord>& history() const;  // every iteration run by this process
  const std::vector<EvalRecord>& evaluations() const;

  // --print-samples N: the first N samples of each split, one JSON line each (Task::sample_json), as training would
  // read them. run() does this instead of training when the option is set (the model is then never built).
  void print_samples(std::ostream& out);

  // One evaluation on `split` (1 validation, 2 test) over eval_iters global batches starting at sample `first`.
  double evaluate(int split, int64_t first);
  // The same for every loss of the task (Task::loss_names()).
  std::vector<double> evaluate_losses(int split, int64_t first);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lmforge::train
