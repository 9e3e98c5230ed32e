// defines: lmforge::train::gather_to_root() (a whole tensor assembled from its tensor-parallel pieces, piece by
//          piece, on one rank)
#pragma once
#include <cstddef>
#include <span>

#include "dist/communicator.h"
#include "param/parameter.h"

namespace lmforge::train {

// Collective over the tensor-parallel group `tp` (nullptr or one rank: a copy). Afterwards `whole` (on the group's
// rank 0 only: whole_numel() floats; may be empty elsewhere) holds tensor i of `table` assembled from every rank's
// piece `local` (table[i].numel floats). Each non-zero rank's piece travels to rank 0 by itself, so no rank but
// rank 0 ever holds more than its own piece, and rank 0 one whole tensor: checkpoints are gathered tensor by tensor.
void gather_to_root(const param::ParamTable& table, size_t i, const float* local, std::span<float> whole,
                    dist::Communicator* tp);

}  // namespace lmforge::train
