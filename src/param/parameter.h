// defines: lmforge::param::Parameter (one description of a named parameter tensor: whole shape, tensor-parallel
//          split, weight decay, and this rank's piece in the flat buffers), ParamTable (a model's parameters in
//          order), LocalRun, for_each_local_run()
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::param {

// A parameter tensor as everybody sees it: initialisation, the layers' forward and backward, the optimizer (which
// tensors decay, per-tensor norms for LAMB), data parallelism (the flat buffers it reduces) and checkpoints (the
// whole tensor's name and shape, and how to assemble it from the tensor-parallel pieces).
//
// Tensor parallelism cuts a tensor along ONE dimension, split_dim, across the T ranks of a tensor-parallel group
// (Megatron's column- and row-parallel layers, the vocabulary-parallel embedding). A fused tensor such as GPT-2's
// c_attn (q | k | v side by side along its last dimension) is split_blocks equal blocks along split_dim, each cut
// into T pieces on its own: rank t holds piece t of every block, concatenated in block order
// (q_t | k_t | v_t), which is what a column-parallel linear over whole heads needs.
//
// Every tensor is row-major; shape is the whole (Hugging Face) tensor, local_shape this rank's piece; offset and
// numel place the piece in the rank's flat parameter (and gradient, and optimizer-state) buffers.
struct Parameter {
  std::string name;             // the whole tensor's Hugging Face name, e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   // the whole tensor
  int split_dim = -1;           // the dimension cut across tensor-parallel ranks; -1: replicated (whole everywhere)
  int split_blocks = 1;         // equal blocks along split_dim, each split separately (fused q|k|v: 3)
  bool weight_decay = false;    // Megatron's rule: matrices decay, biases and other 1-D tensors do not
  std::vector<int64_t> local_shape;  // this rank's piece (== shape when replicated)
  size_t offset = 0;            // of the piece in the flat buffers, in elements
  size_t numel = 0;             // elements of the piece

  bool replicated() const { return split_dim < 0; }
  size_t whole_numel() const;
};

// A contiguous run of a tensor's elements that a rank holds: whole[whole_offset, +length) ==
// local[local_offset, +length) (offsets in elements, relative to the tensor).
struct LocalRun {
  size_t whole_offset = 0;
  size_t local_offset = 0;
  size_t length = 0;
};

// The runs of `p` that tensor-parallel rank `rank` of `size` holds, in increasing whole (and local) order; together
// they cover the rank's piece exactly once. A replicated tensor is one run of everything.
void for_each_local_run(const Parameter& p, int rank, int size, const std::function<void(const LocalRun&)>& fn);

// A model's parameters in a fixed order (the order of the flat buffers and of checkpoints: Hugging Face's
// state_dict order), for one tensor-parallel rank. Layers add their tensors while the model is being built;
// the offsets are assigned in the order of add().
class ParamTable {
 public:
  ParamTable() = default;
  ParamTable(int tp_rank, int tp_size);

  int tp_rank() const { return tp_rank_; }
  int tp_size() const { return tp_size_; }

  // Adds a tensor and returns its index. Throws lmforge::Error when split_dim's length is not divisible by
  // split_blocks × tp_size (the message names the tensor), or when the name is already taken.
  size_t add(std::string name, std::vector<int64_t> shape, bool weight_decay, int split_dim = -1,
             int split_blocks = 1);

  size_t size() const { return params_.size(); }
  const Parameter& operator[](size_t i) const { return params_[i]; }
  const std::vector<Parameter>& all() const { return params_; }
  auto begin() const { return params_.begin(); }
  auto end() const { return params_.end(); }
  size_t local_numel() const { return total_; }  // elements of this rank's flat buffers
  size_t whole_numel() const;                    // elements of the whole model
  // Throws lmforge::Error naming the tensor when there is none.
  const Parameter& find(std::string_view name) const;
  size_t index_of(std::string_view name) const;
  bool contains(std::string_view name) const;

  // This rank's piece of tensor i, copied out of the whole tensor (row-major, whole_numel() elements).
  void slice(size_t i, const float* whole, float* local) const;
  // Writes the piece `local` of rank `rank` into its places in the whole tensor.
  void place(size_t i, int rank, const float* local, float* whole) const;

 private:
  int tp_rank_ = 0, tp_size_ = 1;
  std::vector<Parameter> params_;
  size_t total_ = 0;
};

}  // namespace lmforge::param
