// defines: lmforge::layers::EmbeddingSpec, Embedding (word embedding split over the vocabulary across the
//          tensor-parallel group, learned position embedding, optional token-type embedding, embedding dropout)
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/dropout.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"

namespace lmforge::layers {

struct EmbeddingSpec {
  std::string word_name;        // e.g. "transformer.wte" (→ .weight [padded_vocab, C])
  std::string position_name;    // e.g. "transformer.wpe" (→ .weight [max_positions, C]); empty: none
  std::string token_type_name;  // e.g. "bert.embeddings.token_type_embeddings"; empty: none
  int64_t padded_vocab = 0;     // rows of the word table (divisible by the tensor-parallel size)
  int64_t max_positions = 0;
  int64_t token_types = 0;
  int64_t hidden = 0;
  double init_std = 0.02;
  float dropout = 0.0f;         // Megatron's --hidden-dropout after the sum
};

// out[n] = wte[token_n] + wpe[position_n] (+ wtt[type_n]), then dropout.
// Vocabulary-parallel (Megatron's VocabParallelEmbedding): rank t holds rows [t·V/T, (t+1)·V/T) of wte; each rank
// looks up the tokens in its rows (0 elsewhere) and the sum over the group assembles every row exactly (x + 0 = x).
// The position and token-type tables are replicated. The word table is shared with a tied output layer
// (word_index()).
class Embedding {
 public:
  Embedding(ParameterStore& store, const TensorParallel& tp, EmbeddingSpec spec);

  size_t word_index() const { return word_; }
  int64_t hidden() const { return spec_.hidden; }
  int64_t vocab_offset() const { return vocab_offset_; }  // first vocabulary row this rank holds

  // What one forward keeps for its backward (the caller owns it, one per call in flight): the ids (views the caller
  // keeps valid), the step (dropout masks) and the output.
  struct Saved {
    kernels::Tensor tokens, positions, types;
    ForwardStep step;
    kernels::Buffer out, sum;  // the output; with dropout the sum before it
  };

  // tokens, positions (and types) i32 [N]; returns the output [N,C], held in `saved`.
  kernels::Tensor forward(const kernels::Tensor& tokens, const kernels::Tensor& positions,
                          const kernels::Tensor& types, const ForwardStep& step, Saved& saved);
  // Inference (no backward follows; dropout off): the output is held by this layer until its next call.
  kernels::Tensor forward(const kernels::Tensor& tokens, const kernels::Tensor& positions,
                          const kernels::Tensor& types) {
    return forward(tokens, positions, types, ForwardStep{}, scratch_);
  }
  // Gradients of the table rows the forward that filled `saved` used, from dout [N,C].
  void backward(const kernels::Tensor& dout, const Saved& saved);

 private:
  ParameterStore& store_;
  const TensorParallel& tp_;
  EmbeddingSpec spec_;
  size_t word_ = 0, position_ = 0, token_type_ = 0;
  int64_t vocab_offset_ = 0;
  Dropout dropout_;
  Saved scratch_;
  kernels::Buffer ddrop_;  // the gradient before dropout (scratch of one backward)
};

}  // namespace lmforge::layers
