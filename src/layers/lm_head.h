// defines: lmforge::layers::LmHeadSpec, LmHead (the language-model head every model ends in: an optional
//          dense + GELU + LayerNorm transform, the output layer tied to the vocabulary-parallel word table with an
//          optional bias, and the vocabulary-parallel cross-entropy with a loss mask; optionally over the masked
//          rows only, and over chunks of rows so the whole [rows, vocab] logits are never held)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/cross_entropy.h"
#include "layers/layernorm.h"
#include "layers/linear.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"
#include "layers/workspace.h"

namespace lmforge::layers {

struct LmHeadSpec {
  std::string name;            // the output layer's parameter prefix (its weight is the tied word table)
  std::string bias_name;       // its bias, split like the vocabulary; empty: no bias (GPT-2)
  int64_t hidden = 0;
  int64_t padded_vocab = 0;    // rows of the word table (divisible by the tensor-parallel size)
  size_t word = 0;             // parameter index of the word table the output layer reads
  // BERT's prediction-head transform before the output layer: x ← LayerNorm(gelu(x·Wᵀ + b)), replicated. Empty
  // names: none. Its tensors are added AFTER the output layer's bias (Hugging Face's state_dict order).
  std::string transform_name, transform_layernorm_name;
  kernels::GeluKind transform_gelu = kernels::GeluKind::ERF;
  // The transform's output width (and its LayerNorm's, and the tied table's columns): ELECTRA's generator maps its
  // hidden size to the shared embedding width E (dense gen_hidden → E). 0: hidden. Needs a transform.
  int64_t transform_out = 0;
  float layernorm_eps = 1e-5f;
  double init_std = 0.02;
  // Only rows with a nonzero loss mask go through the head. Every step of the head is row-wise, and a row with
  // mask 0 contributes neither loss nor gradient, so this changes only the work (BERT predicts ~15 % of positions).
  bool masked_rows_only = false;
  // Rows per chunk of logits; 0: automatic, as many rows as keep a chunk within kChunkLogits logits. A chunk's
  // logits are made, reduced to its loss and dropped, and made again in the backward (one more GEMM per chunk).
  int64_t chunk_rows = 0;
  static constexpr int64_t kChunkLogits = int64_t(1) << 26;  // 256 MB of fp32 logits
  // On a GPU (Device::CUDA) the recomputed head GEMM of every further chunk costs more than the memory it saves
  // (GPT-2 small at 16 x 1024 tokens: 13 chunks, ~10 % more FLOPs, a host round trip each): up to 4 GiB of fp32.
  static constexpr int64_t kDeviceChunkLogits = int64_t(1) << 30;
  // Logits in the activation dtype (bf16 under --bf16, as Megatron's output layer writes them: the cross-entropy
  // reads them into fp32 statistics and writes dlogits in place in the same dtype); false: always fp32.
  bool logits_in_activation_dtype = true;
};

// loss = Σ_n mask_n·CE_n over the rows n of x [N, hidden], with
//   CE_n = lse(z_n) − z_n[target_n],   z_n = t(x_n)·Eᵀ (+ b)   over the whole padded vocabulary,
// t the optional transform and E the tied word table (each tensor-parallel rank holds a slice of its rows, and the
// cross-entropy reduces over the group: VocabParallelCrossEntropy). The caller scales (a mean over positions or a
// masked mean) by giving backward() the factor.
class LmHead {
 public:
  LmHead(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, LmHeadSpec spec);
  ~LmHead();

  int64_t local_vocab() const { return decoder_->local_out(); }
  // The first vocabulary column of this rank's slice.
  int64_t vocab_offset() const { return vocab_offset_; }

  // What one forward keeps for its backward (the caller owns it, one per call in flight).
  struct Saved {
    kernels::Tensor x;                   // the input (a view the caller keeps valid until the backward)
    int64_t M = 0, chunks = 0, rows = 0;  // rows through the head, chunks, rows per chunk
    std::vector<int32_t> row_ids;        // masked_rows_only: the rows of x that go through the head, ascending
    std::vector<int32_t> targets;        // the head rows' targets and mask (host; chunks re-read them)
    std::vector<float> mask;
    bool has_mask = false;
    kernels::Buffer rows_buf, targets_buf, selected, t1, t2, t3, logits;
    LayerNorm::Saved transform_ln;
    VocabParallelCrossEntropy::Saved loss;  // the last chunk's (the only one when chunks == 1)
  };

  // Σ mask·CE in double over x [N, hidden]. targets: host [N] ids (−1 allowed where the mask is 0); loss_mask: host
  // [N] (nullptr: every row counts with weight 1).
  double forward(const kernels::Tensor& x, const int32_t* targets, const float* loss_mask, Saved& saved);
  // For the forward that filled `saved`: dx [N, hidden] += scale · d(Σ mask·CE)/dx, and the head's parameter
  // gradients likewise.
  void backward(const kernels::Tensor& dx, float scale, Saved& saved);
  // That forward's logits [rows, local_vocab] when it ran in one chunk (overwritten with their gradient by
  // backward()); absent otherwise.
  kernels::Tensor logits(const Saved& saved) const;

  // Inference: out [rows, local_vocab] (fp32) = the head's logits of x [rows, hidden].
  void logits(const kernels::Tensor& out, const kernels::Tensor& x);

 private:
  int64_t rows_per_chunk(int64_t rows) const;
  int64_t width() const { return spec_.transform_out > 0 ? spec_.transform_out : spec_.hidden; }  // decoder input
  // The head's input rows after the transform (x itself without one), its activations in `saved`.
  kernels::Tensor transform_forward(const kernels::Tensor& x, Saved& saved);
  kernels::Tensor chunk_logits(int64_t rows, Saved& saved);

  ParameterStore& store_;
  LmHeadSpec spec_;
  int64_t vocab_offset_ = 0;
  std::unique_ptr<Linear> decoder_, transform_;
  std::unique_ptr<LayerNorm> transform_ln_;
  VocabParallelCrossEntropy loss_;
  kernels::DType act_ = kernels::DType::F32;
  Saved scratch_;  // inference
  kernels::Buffer d_selected_, d_t1_, d_t2_, d_t3_;  // scratch of one backward
};

}  // namespace lmforge::layers
