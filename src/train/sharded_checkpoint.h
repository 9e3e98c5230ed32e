// defines: lmforge::train::gather_to_root() (a whole tensor assembled from its tensor-parallel pieces, piece by
//          piece, on one rank), gathering_tensors(), slicing_tensors(), gathering_optimizer(), slicing_optimizer()
//          (a tensor-parallel rank's model and optimizer as checkpoint tensors, saved and loaded tensor by tensor)
#pragma once
#include <cstddef>
#include <span>

#include "checkpoint/checkpoint.h"
#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "param/parameter.h"

namespace lmforge::train {

// Collective over the tensor-parallel group `tp` (nullptr or one rank: a copy). Afterwards `whole` (on the group's
// rank 0 only: whole_numel() floats; may be empty elsewhere) holds tensor i of `table` assembled from every rank's
// piece `local` (table[i].numel floats). Each non-zero rank sends its piece to rank 0 (point to point), so no rank
// but rank 0 ever holds more than its own piece, and rank 0 one whole tensor (plus one piece for a column split):
// checkpoints are gathered tensor by tensor.
void gather_to_root(const param::ParamTable& table, size_t i, const float* local, std::span<float> whole,
                    dist::Communicator* tp);

// Checkpoints hold whole tensors under their Hugging Face names, so that any layout loads any other. A rank holds
// the pieces of `table` (its tensor-parallel share; the whole tensors when the group is one rank) at `base`; `whole`
// is the whole model's table (the file's names and shapes). These adapters hand the checkpoint module one tensor at
// a time, so no rank ever holds more than one whole tensor beside its pieces.
//
// Save: each tensor is gathered to the tensor-parallel group's rank 0 (collective over `tp`; every rank of the
// group must run the save, the writer with write access, the others with SaveRequest::writer false).
std::vector<checkpoint::NamedTensor> gathering_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                                       const float* base, dist::Communicator* tp);
// The optimizer's state (whole over data parallelism: DataParallel::gathered_optimizer()) the same way.
checkpoint::OptimizerCheckpoint gathering_optimizer(const optim::Optimizer& local, const param::ParamTable& table,
                                                    const param::ParamTable& whole, dist::Communicator* tp);
// Load: every rank reads each whole tensor and keeps its piece.
std::vector<checkpoint::NamedTensor> slicing_tensors(const param::ParamTable& table, const param::ParamTable& whole,
                                                     float* base);
checkpoint::OptimizerCheckpoint slicing_optimizer(optim::Optimizer& local, const param::ParamTable& table,
                                                  const param::ParamTable& whole);

}  // namespace lmforge::train
