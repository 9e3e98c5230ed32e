// defines: lmforge::train::TensorParallelGPT (GPT-2 with Megatron tensor parallelism: column-/row-parallel attention
//          and MLP, vocabulary-parallel embedding, LM head and cross-entropy, over a tensor-parallel communicator)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "model/gpt.h"
#include "optim/optimizer.h"

namespace lmforge::train {

// One tensor-parallel rank t of T holds (Megatron's split, Hugging Face names and [in, out] Conv1D layouts):
//   wte                 rows [t·Vp/T, (t+1)·Vp/T)            (vocabulary-parallel embedding and tied LM head)
//   attn.c_attn         columns of heads [t·NH/T, (t+1)·NH/T) of each of q, k, v; bias likewise  (column-parallel)
//   attn.c_proj.weight  rows of the same heads                                                  (row-parallel)
//   mlp.c_fc            columns [t·4C/T, (t+1)·4C/T); bias likewise                           (column-parallel)
//   mlp.c_proj.weight   rows [t·4C/T, (t+1)·4C/T)                                               (row-parallel)
//   everything else     whole (LayerNorms, wpe, the row-parallel biases): replicated, and updated identically
// Forward all-reduces (rank-ordered sums) after each row-parallel layer and after the embedding lookup; the
// backward all-reduces the input gradients of the column-parallel layers and of the LM head. Cross-entropy runs
// over the vocabulary shards (global max, Σexp and target logit reduced across ranks), so no rank ever holds
// the whole [N, Vp] logits. With T = 1 this is the same computation as model::GPT.
class TensorParallelGPT {
 public:
  struct Tensor {
    std::string name;                 // the Hugging Face name of the whole tensor
    std::vector<int64_t> full_shape;  // the whole tensor's shape
    std::vector<int64_t> shape;       // this rank's piece
    size_t offset = 0, numel = 0;     // in this rank's flat buffers
    bool weight_decay = false;
    bool replicated = false;          // whole on every tensor-parallel rank
    bool split_rows = false;          // the piece is rows of the whole (else columns: the last dimension)
  };

  TensorParallelGPT(const model::GPTConfig& config, dist::Communicator& tp);
  ~TensorParallelGPT();
  TensorParallelGPT(const TensorParallelGPT&) = delete;
  TensorParallelGPT& operator=(const TensorParallelGPT&) = delete;

  const model::GPTConfig& config() const { return config_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }
  size_t num_parameters() const { return n_; }  // on this rank
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  void zero_grad();
  // Optimizer spans over this rank's flat buffers (names as tensors()).
  std::vector<optim::ParamSpan> spans();

  // Copies this rank's pieces out of a whole model's buffer laid out as model::GPT::parameter_table(config)
  // (e.g. a GPT's params() or grads(), or a loaded checkpoint), into `local` (num_parameters() floats).
  void slice_whole(const float* whole, float* local) const;
  // The inverse, collective over the tensor-parallel group: every rank receives the whole buffer.
  void gather_whole(const float* local, float* whole);

  float forward(const int32_t* tokens, const int32_t* targets, int B, int T);
  void backward();

 private:
  void ensure(int B, int T);
  // The [lo, hi) ranges of rows (split_rows) or of the last dimension that rank q holds of tensor i.
  std::vector<std::pair<int64_t, int64_t>> ranges(size_t i, int q) const;
  void all_reduce(std::vector<float>& v, size_t n) { tp_.all_reduce_sum(v.data(), n); }

  model::GPTConfig config_;
  dist::Communicator& tp_;
  int rank_ = 0, size_ = 1;
  std::vector<Tensor> tensors_;
  std::vector<model::ParamTensor> whole_;  // model::GPT's table
  size_t n_ = 0;
  std::vector<float> params_, grads_;
  // activations of the last forward
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  std::vector<int32_t> tokens_, targets_;
  std::vector<float> encoded_, ln1_, ln1_mean_, ln1_rstd_, qkv_, att_, atty_, attproj_, res2_, ln2_, ln2_mean_,
      ln2_rstd_, fch_, fch_gelu_, fcproj_, res3_, lnf_, lnf_mean_, lnf_rstd_, logits_, lse_;
  std::vector<float> d_res_, d_ln_, d_atty_, d_qkv_, d_fch_gelu_, d_fch_;
};

}  // namespace lmforge::train
