// defines: lmforge::optim::ParamSpan, Optimizer (what the trainer and checkpoints need from AdamW and Lamb)
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::optim {

// One parameter tensor as the optimizer sees it: a flat fp32 range of the model's parameter buffer, the
// matching range of its gradient buffer, and whether decoupled weight decay applies (Megatron and nanoGPT
// decay matrices, including wte/wpe, but not biases or LayerNorm parameters).
struct ParamSpan {
  std::string name;  // the tensor's name (HF names for GPT-2); optimizer state is saved under it
  float* param = nullptr;
  float* grad = nullptr;
  size_t size = 0;
  bool weight_decay = true;
};

// An optimizer with Adam-style state (first and second moments per element and a step count) over a list of
// parameter spans forming one flat index space, of which it may own a slice (a ZeRO-1 shard).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string_view name() const = 0;  // "adamw", "lamb": recorded in checkpoints
  // One update of this optimizer's slice with the given lr and weight decay (0 for spans without decay).
  virtual void step(double lr, double weight_decay) = 0;
  virtual const std::vector<ParamSpan>& params() const = 0;
  virtual bool holds_all() const = 0;  // owns the whole index space (no shard)
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t step) = 0;
  // The moments of parameter i within this optimizer's slice (empty when outside it); writable for restoring.
  virtual std::span<float> exp_avg_of(size_t i) = 0;
  virtual std::span<float> exp_avg_sq_of(size_t i) = 0;
  virtual std::map<std::string, std::string> hyperparameters() const = 0;  // for checkpoint metadata
};

}  // namespace lmforge::optim
