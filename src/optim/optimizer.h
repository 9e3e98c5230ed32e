// defines: lmforge::optim::ParamSpan, Optimizer (the base of AdamW, Lamb and Sgd: a flat index space of parameter
//          tensors, the slice of it this optimizer owns, named per-element state, the two-phase step)
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace lmforge::optim {

// One parameter tensor as the optimizer sees it: a flat fp32 range of the model's parameter buffer, the
// matching range of its gradient buffer (both device memory: contiguous f32 views of `size` elements on one
// device), and whether weight decay applies (Megatron and nanoGPT decay matrices, including wte/wpe, but not
// biases or LayerNorm parameters). Not a second description of a parameter: the trainer binds each
// param::Parameter of the model's table (name, this rank's piece, decay) to its buffers; the optimizer module
// stays free of models and layouts (its tests build spans over plain arrays: CPU device memory is host memory).
struct ParamSpan {
  ParamSpan() = default;
  ParamSpan(std::string name_, const kernels::Tensor& param_, const kernels::Tensor& grad_, size_t size_,
            bool weight_decay_ = true);
  // Host arrays as CPU device memory.
  ParamSpan(std::string name_, float* param_, float* grad_, size_t size_, bool weight_decay_ = true);

  std::string name;  // the tensor's name (HF names for GPT-2); optimizer state is saved under it
  kernels::Tensor param;
  kernels::Tensor grad;
  // Optional: the span's part of the model's bf16 working copy (a flat view of `size` elements, with its fp32 mirror
  // where the store keeps one), which an optimizer that writes_working_copy() updates in its own pass.
  kernels::Tensor working;
  size_t size = 0;
  bool weight_decay = true;
};

// An optimizer over a list of parameter spans forming one flat index space (the spans in order), of which it owns
// the slice [shard_begin, shard_end) (a ZeRO-1 shard; by default everything). A slice may begin and end anywhere,
// also inside a tensor. Per element of the slice it keeps the float arrays named by state_names() (torch's names:
// "exp_avg"/"exp_avg_sq" for Adam and LAMB, "momentum_buffer" for SGD) in the memory of the spans' device, and
// it counts its steps from 1. Every update is a kernel op (kernels/ops.h) over device views: nothing here reads
// device memory on the host.
//
// The step has two phases, so that an update needing whole-tensor quantities works on any slice:
//   1. begin_step() updates the state of the owned elements and, when needs_tensor_norms(), writes per tensor i
//      the partial sums sums[2i] = Σ p² and sums[2i+1] = Σ u² over the owned elements of tensor i (p before the
//      update, u the update direction; double; zero for tensors outside the slice);
//   2. the caller adds the partial sums of every piece of every tensor (its other shards, other data-parallel
//      ranks, other tensor-parallel ranks), and finish_step() applies the update with those whole-tensor sums.
// Optimizers whose update is element-wise (AdamW, SGD) do everything in phase 1 and ignore the sums.
class Optimizer {
 public:
  static constexpr size_t kAll = static_cast<size_t>(-1);

  virtual ~Optimizer() = default;
  // Movable (the state buffers move with it), not copyable.
  Optimizer(Optimizer&&) = default;
  Optimizer& operator=(Optimizer&&) = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string_view name() const = 0;  // "adamw", "lamb", "sgd": recorded in checkpoints
  virtual std::map<std::string, std::string> hyperparameters() const = 0;  // for checkpoint metadata
  virtual bool needs_tensor_norms() const { return false; }

  // Phase 1 (advances the step count); `sums` has 2·params().size() entries when needs_tensor_norms(), else may
  // be empty. weight_decay applies to spans with weight_decay == true, 0 to the others.
  virtual void begin_step(double lr, double weight_decay, std::span<double> sums) = 0;
  // Phase 2 with the whole-tensor sums (the same layout as begin_step's).
  virtual void finish_step(double lr, double weight_decay, std::span<const double> sums) = 0;
  // Both phases with this optimizer's own sums: right only when no tensor is cut by the slice (else throws
  // std::logic_error: reduce the sums across the pieces and call the two phases). The same bits as begin_step()
  // and finish_step(); an optimizer needing tensor norms may keep them on the device in between (whole_step()).
  void step(double lr, double weight_decay);

  const std::vector<ParamSpan>& params() const { return params_; }
  size_t numel() const { return numel_; }  // size of the whole flat index space
  size_t shard_begin() const { return shard_begin_; }
  size_t shard_end() const { return shard_end_; }
  size_t param_offset(size_t i) const { return offsets_.at(i); }  // start of params()[i] in the flat space
  bool holds_all() const { return shard_begin_ == 0 && shard_end_ == numel_; }
  // True when the slice starts or ends strictly inside a tensor.
  bool cuts_a_tensor() const;

  // Whether a step also writes every span's working copy (ParamSpan::working), so that the model needs no separate
  // sync of it: AdamW on the CPU, over spans that all carry one.
  bool writes_working_copy() const { return writes_working_copy_; }

  int64_t steps() const { return step_; }
  void set_steps(int64_t step) { step_ = step; }

  // Named state over the slice, shard_end − shard_begin floats each, as flat f32 views of device memory (on the
  // spans' device); writable so a checkpoint can restore it (through the device's Backend copies).
  const std::vector<std::string>& state_names() const { return state_names_; }
  size_t state_index(std::string_view state) const;  // throws std::out_of_range for an unknown name
  kernels::Tensor state(size_t k) const;
  // State k of parameter i restricted to the slice: numel 0 when the parameter lies outside it.
  kernels::Tensor state_of(size_t k, size_t i) const;
  // Host copies (checks, tests): state k, or state k of parameter i (empty outside the slice).
  std::vector<float> state_values(size_t k) const;
  std::vector<float> state_values_of(size_t k, size_t i) const;
  size_t state_bytes() const;  // of all state arrays
  kernels::Backend& backend() const { return *backend_; }  // the spans' device

 protected:
  // `what` prefixes errors ("adam", "lamb", "sgd"). Throws lmforge::Error for a slice outside the space or a span
  // without storage.
  Optimizer(std::string_view what, std::vector<ParamSpan> params, std::vector<std::string> state_names,
            size_t shard_begin, size_t shard_end);

  // One work item: a run of at most kBlock elements of one tensor inside the slice. Blocks keep one parallel loop
  // even over many small tensors (biases, LayerNorms) and the big matrices.
  static constexpr size_t kBlock = 16384;
  struct Item {
    size_t param;  // index into params()
    size_t local;  // first element within the tensor
    size_t state;  // first element within the state arrays
    size_t len;
  };
  const std::vector<Item>& items() const { return items_; }
  // The views the kernel ops take for one item: its parameters, its gradients, its elements of state k (the steps
  // are those ops over each item).
  kernels::Tensor item_param(const Item& it) const {
    return params_[it.param].param.slice0((int64_t)it.local, (int64_t)it.len);
  }
  kernels::Tensor item_grad(const Item& it) const {
    return params_[it.param].grad.slice0((int64_t)it.local, (int64_t)it.len);
  }
  kernels::Tensor item_state(size_t k, const Item& it) const {
    return state(k).slice0((int64_t)it.state, (int64_t)it.len);
  }
  // The items as one list for the multi-tensor ops (built once: the buffers never move): param, grad, state 0 and
  // state 1 (absent where the optimizer keeps fewer), group = the item's parameter index. One call over this list
  // is the per-item ops in item order, bit for bit (kernels/ops.h), in one launch on a GPU.
  kernels::MultiTensorList runs() const { return {runs_.data(), runs_.size()}; }

  // step()'s work once the slice is known to hold its tensors whole: begin_step() and finish_step() with the sums
  // on the host, unless overridden (Lamb: one device pass with no host read).
  virtual void whole_step(double lr, double weight_decay);

  // For an optimizer whose multi-tensor update can write the working copy (AdamW): hands every run its part of
  // the spans' working copies when all the spans (with elements) carry one on the CPU; writes_working_copy() then.
  void write_working_copy_in_runs();

  std::vector<ParamSpan> params_;
  int64_t step_ = 0;

 private:
  std::vector<size_t> offsets_;  // params_.size() + 1 prefix sums
  size_t numel_ = 0;
  size_t shard_begin_ = 0, shard_end_ = 0;
  std::vector<std::string> state_names_;
  kernels::Backend* backend_ = nullptr;
  std::vector<kernels::Buffer> states_;
  std::vector<Item> items_;
  std::vector<kernels::MultiTensorItem> runs_;
  bool writes_working_copy_ = false;
};

// "%.17g" of x: hyperparameters as checkpoint metadata, exactly round-tripping.
std::string number_text(double x);

}  // namespace lmforge::optim
