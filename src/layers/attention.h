// defines: lmforge::layers::AttentionSpec, Attention (multi-head self- or cross-attention with column-parallel
//          projections over whole heads, a row-parallel output projection, causal or padding masks, attention
//          dropout and a key/value cache for generation)
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/parameter_store.h"
#include "layers/tensor_parallel.h"
#include "layers/workspace.h"

namespace lmforge::layers {

struct AttentionSpec {
  std::string name;              // prefix of the projections' names, e.g. "transformer.h.0.attn"
  // FUSED: one projection <name>.<qkv> producing q|k|v (GPT-2's c_attn [C,3C]); SEPARATE: <name>.<q>, <name>.<k>,
  // <name>.<v> (BERT's query/key/value). Cross-attention is always SEPARATE (q from the input, k and v from the
  // memory).
  bool fused_qkv = true;
  std::string qkv = "c_attn", q = "query", k = "key", v = "value";
  // Megatron's fused layouts, rows grouped PER HEAD: self-attention <name>.<qkv> [3C,C] rows [head][q|k|v][d]
  // (qkv_per_head, with fused_qkv), cross-attention <name>.<q> plus one <name>.<kv> [2C,C] rows [head][k|v][d]
  // (fused_kv, with cross). Ranks take whole heads, so such a tensor is split in one contiguous piece per rank. The
  // projections' outputs are reordered into the q|k|v blocks the attention kernels read (and back in the backward).
  bool qkv_per_head = false;
  bool fused_kv = false;
  std::string kv = "key_value";
  std::string out = "c_proj";    // <name>.<out>: the output projection (or a full name when out_is_full_name)
  bool out_is_full_name = false;
  int64_t hidden = 0;
  int64_t heads = 0;             // divisible by the tensor-parallel size: each rank takes whole heads
  kernels::WeightLayout layout = kernels::WeightLayout::IN_OUT;
  bool bias = true;
  bool causal = true;            // self-attention only: key j <= query t
  bool cross = false;            // keys and values from a memory sequence (encoder-decoder)
  double init_std = 0.02;        // the q/k/v projections
  double out_init_std = 0.02;    // the output projection (Megatron: init_std / sqrt(2·layers))
  float attention_dropout = 0.0f;
  int layer = 0;                 // the layer number (dropout streams)
  // Megatron's selective recomputation (--recompute-activations): the attention core's saved state (the
  // probabilities [B,H,Tq,Tk] on the CPU, the row log-sum-exp [B,H,Tq] on CUDA: kernels::attention_saved) is not
  // kept from the forward pass; backward() recomputes it from the saved q, k, v (the same softmax and dropout
  // masks, so the gradients are bit for bit those of a kept copy).
  bool recompute_core = false;
};

// Tensor parallelism (Megatron): rank t holds heads [t·H/T, (t+1)·H/T) — the matching output columns of the q, k, v
// projections (column-parallel; with fused q|k|v each part split separately) and input rows of the output projection
// (row-parallel). Attention itself needs no communication.
class Attention {
 public:
  Attention(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, AttentionSpec spec);
  ~Attention();

  // What one forward keeps for its backward (the caller owns it, one per call in flight).
  struct Saved {
    int B = 0, Tq = 0, Tk = 0;
    kernels::Tensor x, memory, key_padding;  // views: the caller keeps them valid until the backward
    kernels::AttentionDropout dropout{};
    kernels::Buffer qkv_act, q_act, kv_act;  // the projections (fused q|k|v, or q and k|v)
    kernels::Buffer probs, heads_out;        // attention's saved state (unused with recompute_core), heads' output
  };

  // out [B·Tq, C] (e.g. a workspace view) = the output projection of the attention of x [B,Tq,C] over itself or, for
  // cross-attention, over memory [B,Tk,C]; key_padding i32 [B,Tk] (optional) masks padded keys. What the backward
  // needs goes to `saved` (x, memory and key_padding as views: they must stay valid until the backward).
  void forward(const kernels::Tensor& out, const kernels::Tensor& x, const kernels::Tensor& memory,
               const kernels::Tensor& key_padding, int B, int Tq, int Tk, const ForwardStep& step, Saved& saved);
  // dx += d/dx, dmemory += d/dmemory (cross-attention; optional) from dout [B·Tq, C], for the forward that filled
  // `saved` (with recompute_core its probabilities are made again in `saved` and dropped after).
  void backward(const kernels::Tensor& dx, const kernels::Tensor& dmemory, const kernels::Tensor& dout, Saved& saved);

  // Generation with a key/value cache (self-attention): decode_begin empties the cache for B rows of at most
  // max_len positions; decode_forward appends position `pos` of every row from x [B,C] and writes out [B,C].
  void decode_begin(int B, int max_len);
  void decode_forward(const kernels::Tensor& out, const kernels::Tensor& x, int pos);
  // Generation for cross-attention: the keys and values of memory [B·Tk, C] (the encoder's output, every key real:
  // no padding) are projected once here; decode_forward then attends each row's new query over all Tk of them
  // (`pos` is not used), which is what forward() computes for that query.
  void decode_begin_cross(const kernels::Tensor& memory, int B, int Tk);

 private:
  kernels::AttentionDropout dropout_spec(const ForwardStep& step) const;
  kernels::AttentionMask mask() const;
  kernels::Tensor probs(Saved& saved);
  void decode_forward_cross(const kernels::Tensor& out, const kernels::Tensor& x);

  const TensorParallel& tp_;
  Workspace& workspace_;
  AttentionSpec spec_;
  kernels::Backend& backend_;
  int64_t local_heads_ = 0, local_c_ = 0;
  std::unique_ptr<Linear> qkv_, q_, k_, v_, kv_, out_;
  // key/value cache
  int cache_B_ = 0, cache_len_ = 0;
  kernels::Buffer kcache_, vcache_, dec_qkv_, dec_heads_, dec_scores_;
};

}  // namespace lmforge::layers
