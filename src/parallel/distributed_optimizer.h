// defines: lmforge::parallel::DistributedOptimizer (the optimizer of a data-parallel model: whole on every rank, or
//          sharded across the ranks as Megatron's distributed optimizer / ZeRO-1, with the gather and scatter of its
//          state for checkpoints)
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "optim/factory.h"
#include "parallel/grad_buckets.h"

namespace lmforge::parallel {

// AdamW, LAMB or SGD (optim/factory.h) over the spans of one model whose gradients GradBuckets reduces. Plain data
// parallelism (sharded false) keeps the whole optimizer on every rank, updating every parameter from the all-gathered
// gradient; the distributed optimizer (Megatron-core optimizer/distrib_optimizer.py, ZeRO-1) keeps state only for
// this rank's piece of every bucket (one optimizer per bucket), updates those parameters and all-gathers them. Both
// update each element alike, so they give the same parameters.
//
// Optimizers needing whole-tensor norms (LAMB's trust ratio ‖p‖/‖u‖) run in two phases (optim::Optimizer): the
// partial sums of p² and u² of every shard are added per tensor, all-reduced over the data-parallel group (the
// distributed optimizer cuts tensors anywhere, also inside one) and, with tensor parallelism, over the tensor-
// parallel group for split tensors (a replicated tensor is whole on every tensor-parallel rank, so only the rank
// counting it contributes); then every shard applies its update with the whole-tensor norms.
class DistributedOptimizer {
 public:
  // `buckets` (the data-parallel group and the pieces) must outlive this.
  // params: the flat f32 device view of the parameters the spans tile.
  DistributedOptimizer(const GradBuckets& buckets, std::vector<optim::ParamSpan> spans, const kernels::Tensor& params,
                       const optim::OptimizerConfig& config);
  ~DistributedOptimizer();

  bool sharded() const { return buckets_.distributed_optimizer(); }
  // With tensor parallelism: LAMB's per-tensor norms also sum over `tensor_parallel`, counting span i only where
  // counted[i] (replicated tensors on one rank of the group).
  void set_tensor_parallel(dist::Communicator* tensor_parallel, std::vector<bool> counted);

  // The step with this lr and weight decay on the reduced (scaled, clipped) gradients (collective when the optimizer
  // needs whole-tensor norms); the distributed optimizer then all-gathers the parameters.
  void step(double lr, double weight_decay);
  // Whether step() also wrote the spans' working copies (optim::Optimizer::writes_working_copy()): never for the
  // distributed optimizer, whose shards see only their elements before the all-gather (the model then syncs).
  bool writes_working_copy() const { return !sharded() && full_ != nullptr && full_->writes_working_copy(); }

  // An optimizer holding the whole state, for checkpoints (collective: the distributed optimizer gathers its
  // shards into a temporary whole copy on the device, copies between device buffers and all-gathers of device
  // tensors; plain data parallelism returns its own).
  const optim::Optimizer& gathered();
  void release_gathered();  // frees the distributed optimizer's temporary whole copy
  // Whole-state optimizer to load a checkpoint into; then call scatter_loaded() (every rank).
  optim::Optimizer& to_load();
  void scatter_loaded();

  // Bytes of optimizer state (every named state array) this rank holds.
  size_t state_bytes() const;

 private:
  const GradBuckets& buckets_;
  dist::Communicator& comm_;
  std::vector<optim::ParamSpan> spans_;
  kernels::Tensor params_;
  optim::OptimizerConfig config_;
  dist::Communicator* tensor_parallel_ = nullptr;
  std::vector<bool> counted_spans_;                        // per span: counted in LAMB's norms (tensor parallel)
  std::unique_ptr<optim::Optimizer> full_;                 // plain; or a temporary whole copy (checkpoints)
  std::vector<std::unique_ptr<optim::Optimizer>> shards_;  // distributed optimizer: one per bucket
};

}  // namespace lmforge::parallel
