// defines: DistributedOptimizer (whole or ZeRO-1 sharded optimizer state; LAMB's whole-tensor norms; checkpoints)
#include "parallel/distributed_optimizer.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/backend.h"

namespace lmforge::parallel {

DistributedOptimizer::DistributedOptimizer(const GradBuckets& buckets, std::vector<optim::ParamSpan> spans,
                                           const kernels::Tensor& params, const optim::OptimizerConfig& config)
    : buckets_(buckets), comm_(buckets.data_parallel()), spans_(std::move(spans)), params_(params), config_(config) {
  if (params_.ndim != 1 || params_.dtype != kernels::DType::F32)
    throw std::logic_error("DistributedOptimizer: the parameters must be a flat f32 view, not " + params_.describe());
  size_t total = 0;
  for (const optim::ParamSpan& s : spans_) {
    if (s.size > 0 && (s.param.data != params_.slice0((int64_t)total, 0).data || s.param.device != params_.device))
      throw std::logic_error("DistributedOptimizer: parameter spans must tile the flat buffers in order");
    total += s.size;
  }
  if (sharded()) {
    // (The shards leave the working copies to the model's sync after the all-gather: writing their own elements'
    // would be a pass the sync repeats.)
    std::vector<optim::ParamSpan> without_working = spans_;
    for (optim::ParamSpan& s : without_working) s.working = kernels::Tensor{};
    for (const GradBuckets::Bucket& k : buckets_.buckets())
      shards_.push_back(optim::make_optimizer(config_, without_working, k.mine_begin, k.mine_end));
  } else {
    full_ = optim::make_optimizer(config_, spans_);
  }
}

DistributedOptimizer::~DistributedOptimizer() = default;

void DistributedOptimizer::set_tensor_parallel(dist::Communicator* tensor_parallel, std::vector<bool> counted) {
  if (counted.size() != spans_.size()) throw std::logic_error("set_tensor_parallel: one flag per span");
  tensor_parallel_ = tensor_parallel;
  counted_spans_ = std::move(counted);
}

void DistributedOptimizer::step(double lr, double weight_decay) {
  // One optimizer over whole tensors with no other piece anywhere: its own step (LAMB keeps the norms on the
  // device; the same bits as the two phases below).
  if (!sharded() && (tensor_parallel_ == nullptr || tensor_parallel_->size() == 1)) {
    full_->step(lr, weight_decay);
    return;
  }
  std::vector<optim::Optimizer*> parts;  // this rank's optimizers, in bucket (index) order
  if (sharded()) {
    for (auto& s : shards_) parts.push_back(s.get());
  } else {
    parts.push_back(full_.get());
  }
  const bool norms = parts.front()->needs_tensor_norms();
  // Phase 1. sums[2i], sums[2i+1] = Σp², Σu² of tensor i: first over this rank's shards (a tensor may span
  // several buckets), then over the data-parallel ranks that own the other pieces (the distributed optimizer
  // only: plain data parallel holds every element already), then over the tensor-parallel pieces of split tensors.
  std::vector<double> sums(norms ? 2 * spans_.size() : 0, 0.0), part(sums.size());
  for (optim::Optimizer* o : parts) {
    o->begin_step(lr, weight_decay, part);
    for (size_t i = 0; i < sums.size(); i++) sums[i] += part[i];
  }
  if (norms) {
    if (sharded() && comm_.size() > 1) comm_.all_reduce_sum(sums.data(), sums.size());
    if (tensor_parallel_ != nullptr && tensor_parallel_->size() > 1) {
      // A replicated tensor's sums already are the whole tensor's on every tensor-parallel rank: only the ranks
      // counting it (one per group) contribute, the others add 0, so every rank ends with the same value.
      for (size_t i = 0; i < spans_.size(); i++)
        if (!counted_spans_[i]) sums[2 * i] = sums[2 * i + 1] = 0.0;
      tensor_parallel_->all_reduce_sum(sums.data(), sums.size());
    }
  }
  // Phase 2, and the distributed optimizer's all-gather of each bucket's updated parameters.
  const std::vector<GradBuckets::Bucket>& buckets = buckets_.buckets();
  for (size_t i = 0; i < parts.size(); i++) {
    parts[i]->finish_step(lr, weight_decay, sums);
    if (sharded())
      comm_.all_gather(params_.slice0((int64_t)buckets[i].begin, (int64_t)(buckets[i].end - buckets[i].begin)),
                       buckets[i].counts);
  }
}

const optim::Optimizer& DistributedOptimizer::gathered() {
  if (!sharded()) return *full_;
  full_ = optim::make_optimizer(config_, spans_);
  full_->set_steps(shards_.front()->steps());
  const std::vector<GradBuckets::Bucket>& buckets = buckets_.buckets();
  kernels::Backend& backend = full_->backend();
  for (size_t s = 0; s < full_->state_names().size(); s++) {
    const kernels::Tensor whole = full_->state(s);
    for (size_t i = 0; i < buckets.size(); i++) {
      const GradBuckets::Bucket& k = buckets[i];
      const kernels::Tensor mine = shards_[i]->state(s);
      if (mine.numel() > 0)
        backend.copy_on_device(whole.slice0((int64_t)k.mine_begin, mine.numel()).data, mine.data,
                               (size_t)mine.numel() * sizeof(float));
      comm_.all_gather(whole.slice0((int64_t)k.begin, (int64_t)(k.end - k.begin)), k.counts);
    }
  }
  return *full_;
}

void DistributedOptimizer::release_gathered() {
  if (sharded()) full_.reset();
}

optim::Optimizer& DistributedOptimizer::to_load() {
  if (!sharded()) return *full_;
  full_ = optim::make_optimizer(config_, spans_);
  return *full_;
}

void DistributedOptimizer::scatter_loaded() {
  if (!sharded()) return;
  const std::vector<GradBuckets::Bucket>& buckets = buckets_.buckets();
  for (size_t i = 0; i < buckets.size(); i++) {
    const GradBuckets::Bucket& k = buckets[i];
    for (size_t s = 0; s < full_->state_names().size(); s++) {
      if (k.mine_end == k.mine_begin) continue;
      const kernels::Tensor whole = full_->state(s);
      full_->backend().copy_on_device(shards_[i]->state(s).data, whole.slice0((int64_t)k.mine_begin, 0).data,
                                      (k.mine_end - k.mine_begin) * sizeof(float));
    }
    shards_[i]->set_steps(full_->steps());
  }
  full_.reset();  // the whole copy was only a staging area
}

size_t DistributedOptimizer::state_bytes() const {
  size_t bytes = 0;
  if (sharded()) {
    for (const auto& s : shards_) bytes += s->state_bytes();
  } else {
    bytes = full_->state_bytes();
  }
  return bytes;
}

}  // namespace lmforge::parallel
