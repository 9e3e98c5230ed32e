// defines: lmforge::layers::ClassificationHead (a sequence-level head: the pooler over each sequence's first
//          position, a small classifier and its cross-entropy — BERT's sentence-order / next-sentence head — made
//          of kernel ops, its saved activations owned by the caller)
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/cross_entropy.h"
#include "layers/linear.h"
#include "layers/tensor_parallel.h"

namespace lmforge::layers {

// loss = mean over the labelled rows b (label_b ≥ 0; −1 is ignored, as torch's ignore_index) of
//   CE_b = lse(z_b) − z_b[label_b],   z_b = tanh(x_{b,0}·Pᵀ + p)·Cᵀ + c
// with x_{b,0} the first position of sequence b (Megatron's Pooler and binary head, HF's BertPooler and
// cls.seq_relationship). P and C are replicated under tensor parallelism (every rank computes the same small head),
// so its cross-entropy runs over whole rows. The pooler and the classifier are built by the model, which adds
// their parameters where its checkpoint format lists them (BERT: the pooler before the LM head, the classifier
// after it). 0/0 = NaN when no row is labelled, as in Megatron.
class ClassificationHead {
 public:
  // What one forward keeps for its backward (the caller owns it, one per call in flight).
  struct Saved {
    int B = 0, count = 0;  // sequences, labelled ones
    kernels::Buffer rows, first, pooled_pre, pooled, logits, targets;
    std::vector<float> mask;
    VocabParallelCrossEntropy::Saved loss;
  };

  ClassificationHead(std::unique_ptr<Linear> pooler, std::unique_ptr<Linear> classifier, kernels::Backend& backend);

  // x [B·T, hidden] (the encoder's output; kept as a view until the backward only through the gathered copy);
  // labels: host [B] in [−1, classes). Returns the mean CE over the labelled rows.
  double forward(const kernels::Tensor& x, int B, int T, const int32_t* labels, Saved& saved);
  // dx [B·T, hidden] += scale · d(mean CE)/dx at each sequence's first position; the head's parameter gradients
  // likewise. Nothing when no row was labelled.
  void backward(const kernels::Tensor& dx, float scale, Saved& saved);

 private:
  std::unique_ptr<Linear> pooler_, classifier_;
  kernels::Backend& backend_;
  TensorParallel whole_rows_;  // no group: the classifier's logits are whole rows on every rank
  VocabParallelCrossEntropy loss_;
  kernels::Buffer d_pre_, d_pooled_, d_first_;  // scratch of one backward
};

}  // namespace lmforge::layers
