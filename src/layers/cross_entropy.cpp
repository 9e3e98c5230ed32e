// defines: VocabParallelCrossEntropy
#include "layers/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace lmforge::layers {

using kernels::Tensor;

double VocabParallelCrossEntropy::forward(const Tensor& logits, const Tensor& targets, const float* loss_mask,
                                          int64_t vocab_offset, Saved& saved) {
  const int64_t N = logits.rows();
  const int T = tp_.size();
  saved.targets = targets;
  saved.vocab_offset = vocab_offset;
  if (loss_mask) saved.mask.assign(loss_mask, loss_mask + N);
  else saved.mask.assign((size_t)N, 1.0f);
  std::vector<float>& maxima = maxima_;
  std::vector<float>& sums = sums_;
  sums.resize((size_t)(2 * N));
  if (!tp_.active()) {
    // One rank holds whole rows: maxima, Σexp and the target logits in one pass over the logits (each row read from
    // memory once) into one [3, N] buffer, brought to the host in ONE copy (on a GPU the forward's only wait).
    stats_.resize(backend_, kernels::DType::F32, (size_t)(3 * N));
    const Tensor all = stats_.view({3, N});
    kernels::crossentropy_stats(all.slice0(0, 1).reshaped({N}), all.slice0(1, 1).reshaped({N}),
                                all.slice0(2, 1).reshaped({N}), logits, targets, vocab_offset);
    stats_host_.resize((size_t)(3 * N));
    backend_.copy_to_host(stats_host_.data(), stats_.data(), stats_host_.size() * sizeof(float));
    maxima.assign(stats_host_.begin(), stats_host_.begin() + N);
    sums.assign(stats_host_.begin() + N, stats_host_.end());
  } else {
    // Row maxima, then the group's maximum per row: each rank's N maxima in its piece of a [T, N] buffer.
    row_max_.resize(backend_, kernels::DType::F32, (size_t)(T * N));
    maxima.resize((size_t)(T * N));
    // Σexp and the target logit: [2, N], summed over the group in one all-reduce.
    sumexp_.resize(backend_, kernels::DType::F32, (size_t)(2 * N));
    const Tensor both = sumexp_.view({2, N});
    kernels::crossentropy_row_max(row_max_.view({N}), logits);
    backend_.copy_to_host(maxima.data() + (size_t)tp_.rank() * N, row_max_.data(), (size_t)N * sizeof(float));
    tp_.all_gather(maxima.data(), (size_t)N);
    for (int64_t n = 0; n < N; n++)
      for (int q = 0; q < T; q++) maxima[(size_t)n] = std::max(maxima[(size_t)n], maxima[(size_t)q * N + n]);
    backend_.copy_to_device(row_max_.data(), maxima.data(), (size_t)N * sizeof(float));
    kernels::crossentropy_sumexp(both.slice0(0, 1).reshaped({N}), both.slice0(1, 1).reshaped({N}), logits,
                                 row_max_.view({N}), targets, vocab_offset);
    tp_.all_reduce(both);
    backend_.copy_to_host(sums.data(), sumexp_.data(), sums.size() * sizeof(float));
  }
  lse_host_.resize((size_t)N);
  double total = 0.0;
  for (int64_t n = 0; n < N; n++) {
    lse_host_[(size_t)n] = maxima[(size_t)n] + std::log(sums[(size_t)n]);
    const float loss = lse_host_[(size_t)n] - sums[(size_t)(N + n)];
    total += (double)saved.mask[(size_t)n] * (double)loss;
  }
  saved.lse.resize(backend_, kernels::DType::F32, (size_t)N);
  backend_.copy_to_device(saved.lse.data(), lse_host_.data(), (size_t)N * sizeof(float));
  return total;
}

void VocabParallelCrossEntropy::backward(const Tensor& logits, float scale, const Saved& saved) {
  const int64_t N = logits.rows();
  std::vector<float>& dloss = sums_;
  dloss.resize((size_t)N);
  for (int64_t n = 0; n < N; n++) dloss[(size_t)n] = scale * saved.mask[(size_t)n];
  dloss_.resize(backend_, kernels::DType::F32, (size_t)N);
  backend_.copy_to_device(dloss_.data(), dloss.data(), (size_t)N * sizeof(float));
  kernels::crossentropy_backward(logits, logits, saved.lse.view({N}), saved.targets, dloss_.view({N}),
                                 saved.vocab_offset);
}

}  // namespace lmforge::layers
