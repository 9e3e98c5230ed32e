// defines: gather_to_root
#include "train/sharded_tensors.h"

#include <stdexcept>
#include <vector>

namespace lmforge::train {

void gather_to_root(const param::ParamTable& table, size_t i, const float* local, std::span<float> whole,
                    dist::Communicator* tp) {
  const param::Parameter& p = table[i];
  const int T = tp ? tp->size() : 1, rank = tp ? tp->rank() : 0;
  if (rank == 0 && whole.size() != p.whole_numel())
    throw std::logic_error("gather_to_root: " + p.name + " needs a whole-tensor buffer on rank 0");
  if (T == 1 || p.replicated()) {  // every rank holds it whole
    if (rank == 0) std::copy(local, local + p.numel, whole.data());
    return;
  }
  if (rank == 0) table.place(i, 0, local, whole.data());
  // Rank q broadcasts its piece; rank 0 places it, the others only pass it through a piece-sized buffer.
  std::vector<float> piece(p.numel);
  for (int q = 1; q < T; q++) {
    if (rank == q) std::copy(local, local + p.numel, piece.begin());
    tp->broadcast(piece.data(), p.numel * sizeof(float), q);
    if (rank == 0) table.place(i, q, piece.data(), whole.data());
  }
}

}  // namespace lmforge::train
