// defines: lmforge::train::ModelShape (the sizes that decide a run's memory, from its model family), check_memory()
//          (a memory estimate made before anything is allocated)
#pragma once
#include <cstdint>

#include "train/train_options.h"

namespace lmforge::train {

// The sizes that decide a run's memory, known from the flags and the tokenizer alone (families::ModelFamily::shape).
struct ModelShape {
  int64_t whole_parameters = 0;  // all tensors of the whole model (tensor-parallel size 1)
  int64_t padded_vocab = 0;      // rows of the embedding / columns of the logits
  int64_t layers = 0;            // attention layers whose probabilities a forward keeps (encoder + decoder)
  int64_t heads = 0;
  int64_t positions = 0;         // the longest sequence a layer attends over
};

// A lower bound of the memory a run needs on each rank (parameters, gradients and optimizer state, the attention
// probabilities of every layer and the logits of one micro-batch), checked against the machine's memory so that an
// absurd --seq-length or --micro-batch-size is an error saying how much it would take, not a std::bad_alloc later.
void check_memory(const ModelShape& shape, const TrainOptions& options);

}  // namespace lmforge::train
