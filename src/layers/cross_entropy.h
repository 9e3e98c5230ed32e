// defines: lmforge::layers::VocabParallelCrossEntropy (softmax cross-entropy over logits whose vocabulary columns are
//          split across the tensor-parallel group, with a per-position loss mask)
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/tensor_parallel.h"

namespace lmforge::layers {

// Megatron's vocab_parallel_cross_entropy: no rank ever holds a whole [N, V] row. Per row n
//   m_n   = max over the group of each rank's row maximum           (all-gather of N maxima)
//   lse_n = m_n + log Σ_ranks Σ_v exp(x_nv − m_n)                      (all-reduce of N partial sums)
//   loss_n = lse_n − x_n,target                                        (the rank holding the target supplies it)
// and the gradient d x_nv = dloss_n·(softmax_nv − [v == target_n]) needs no communication.
class VocabParallelCrossEntropy {
 public:
  VocabParallelCrossEntropy(const TensorParallel& tp, kernels::Backend& backend) : tp_(tp), backend_(backend) {}

  // What one forward keeps for its backward (the caller owns it): the targets (a view the caller keeps valid), the
  // loss mask and the rows' log-sum-exp.
  struct Saved {
    kernels::Tensor targets;
    int64_t vocab_offset = 0;
    std::vector<float> mask;
    kernels::Buffer lse;
  };

  // logits [N, V/T] (this rank's columns, the first being vocab_offset), targets i32 [N] (device). Returns
  // Σ_n mask_n·loss_n in double; loss_mask (host, N floats, nullptr: all ones).
  double forward(const kernels::Tensor& logits, const kernels::Tensor& targets, const float* loss_mask,
                 int64_t vocab_offset, Saved& saved);
  // dlogits (written, in place over the forward's logits) for dloss_n = scale·mask_n.
  void backward(const kernels::Tensor& logits, float scale, const Saved& saved);

 private:
  const TensorParallel& tp_;
  kernels::Backend& backend_;
  std::vector<float> maxima_, sums_, lse_host_, stats_host_;  // host scratch of one call
  kernels::Buffer row_max_, sumexp_, stats_, dloss_;          // device scratch of one call
};

}  // namespace lmforge::layers
