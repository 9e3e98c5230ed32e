// defines: check_memory
#include "train/model_shape.h"

#include <unistd.h>

#include <cstdio>

#include "util/error.h"

namespace lmforge::train {

void check_memory(const ModelShape& s, const TrainOptions& o) {
  const double T = (double)s.positions, B = o.micro_batch_size, TP = o.tensor_model_parallel_size;
  const double state_arrays = o.optimizer.kind == "sgd" ? (o.optimizer.sgd_momentum != 0.0 ? 1 : 0) : 2;
  const double weights = 4.0 * (double)s.whole_parameters / TP * (2.0 + state_arrays);
  const double activations =
      4.0 * ((double)s.layers * B * ((double)s.heads / TP) * T * T + B * T * (double)s.padded_vocab / TP);
  const double available = (double)::sysconf(_SC_PHYS_PAGES) * (double)::sysconf(_SC_PAGESIZE);
  if (available > 0 && weights + activations > available) {
    char msg[600];
    std::snprintf(msg, sizeof msg,
                  "this run needs at least %.1f GB per rank (parameters, gradients and optimizer state %.1f GB; "
                  "attention probabilities and logits of one micro-batch %.1f GB) and the machine has %.1f GB: "
                  "lower --seq-length, --micro-batch-size or the model size, or raise --tensor-model-parallel-size",
                  (weights + activations) / 1e9, weights / 1e9, activations / 1e9, available / 1e9);
    throw Error(msg);
  }
}

}  // namespace lmforge::train
