// defines: GradBuckets (bucketed rank-ordered gradient reduction on device tensors, overlapped with the backward;
//          ZeRO-2 release)
#include "parallel/grad_buckets.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/backend.h"
#include "optim/grad_scaler.h"

namespace lmforge::parallel {

GradBuckets::GradBuckets(dist::Communicator& data_parallel, std::vector<optim::ParamSpan> spans,
                         const kernels::Tensor& grads, bool distributed_optimizer, size_t bucket_elements)
    : comm_(data_parallel), grads_(grads), n_((size_t)grads.numel()), distributed_(distributed_optimizer) {
  if (grads_.ndim != 1 || grads_.dtype != kernels::DType::F32)
    throw std::logic_error("GradBuckets: the gradients must be a flat f32 view, not " + grads_.describe());
  size_t total = 0;
  for (const optim::ParamSpan& s : spans) {
    if (s.size > 0 && (s.grad.data != range(total, total).data || s.grad.device != grads_.device))
      throw std::logic_error("GradBuckets: parameter spans must tile the flat buffers in order");
    total += s.size;
  }
  if (total != n_) throw std::logic_error("GradBuckets: spans do not cover the buffer");
  if (bucket_elements == 0) bucket_elements = kDefaultBucketElements;
  const int D = comm_.size(), r = comm_.rank();
  for (size_t b = 0; b < n_; b += bucket_elements) {
    Bucket k;
    k.begin = b;
    k.end = std::min(n_, b + bucket_elements);
    k.counts = dist::even_split(k.end - k.begin, D);
    k.mine_begin = k.begin;
    for (int q = 0; q < r; q++) k.mine_begin += k.counts[(size_t)q];
    k.mine_end = k.mine_begin + k.counts[(size_t)r];
    buckets_.push_back(std::move(k));
  }
  if (D == 1 && !distributed_) {
    size_t at = 0;
    for (const optim::ParamSpan& s : spans) {
      owned_.push_back({at, at + s.size});
      at += s.size;
    }
  } else {
    for (const Bucket& k : buckets_) owned_.push_back({k.mine_begin, k.mine_end});
  }
}

void GradBuckets::arm_overlap() {
  if (comm_.size() == 1) return;  // nothing to reduce
  armed_ = true;
  handles_.assign(buckets_.size(), -2);
}

void GradBuckets::gradients_ready(size_t from) {
  if (!armed_) return;
  comm_.progress();
  // Buckets lie in index order and become final from the end of the buffer down.
  for (size_t i = buckets_.size(); i-- > 0;) {
    if (buckets_[i].begin < from) break;
    if (handles_[i] != -2) continue;
    round_bucket_to_f16(i);
    handles_[i] = comm_.start_reduce_scatter_sum(bucket(i), buckets_[i].counts);
    if (from > 0) overlapped_++;  // from == 0 is the end of the backward pass: nothing left to overlap with
  }
}

void GradBuckets::reduce() {
  if (comm_.size() == 1 && !distributed_) {  // one rank: nothing to exchange, only the fp16 storage
    for (size_t i = 0; i < buckets_.size(); i++) round_bucket_to_f16(i);
    return;
  }
  // (Stage 2 reduced every micro-batch already: finish_micro_batch.)
  for (size_t i = 0; i < buckets_.size() && !shard_grads_; i++) {
    if (armed_ && handles_[i] != -2) comm_.finish_reduce_scatter_sum(bucket(i), handles_[i]);
    else {
      round_bucket_to_f16(i);
      comm_.reduce_scatter_sum(bucket(i), buckets_[i].counts);
    }
    reduced_++;
  }
  armed_ = false;
}

void GradBuckets::gather_gradients() {
  if (distributed_ || comm_.size() == 1) return;
  for (size_t i = 0; i < buckets_.size(); i++) comm_.all_gather(bucket(i), buckets_[i].counts);
}

void GradBuckets::shard_gradients() {
  if (!distributed_)
    throw std::logic_error("GradBuckets: ZeRO stage 2 shards the gradients of the distributed optimizer");
  shard_grads_ = true;
}

// The Backend zeroes the range and returns what memory it can (the CPU: the whole pages inside it).
void GradBuckets::release(size_t begin, size_t end) {
  if (begin >= end) return;
  kernels::backend_for(grads_.device).release_zeroed(range(begin, end).data, (end - begin) * sizeof(float));
}

void GradBuckets::finish_micro_batch() {
  for (size_t i = 0; i < buckets_.size(); i++) {
    if (armed_ && handles_[i] != -2) comm_.finish_reduce_scatter_sum(bucket(i), handles_[i]);
    else {
      round_bucket_to_f16(i);
      comm_.reduce_scatter_sum(bucket(i), buckets_[i].counts);
    }
    reduced_++;
  }
  armed_ = false;
  for (const Bucket& k : buckets_) {
    release(k.begin, k.mine_begin);
    release(k.mine_end, k.end);
  }
}

void GradBuckets::zero_gradients() {
  for (const Bucket& k : buckets_) {
    if (k.mine_end > k.mine_begin)
      kernels::backend_for(grads_.device).fill_zero(range(k.mine_begin, k.mine_end).data,
                                                    (k.mine_end - k.mine_begin) * sizeof(float));
    release(k.begin, k.mine_begin);
    release(k.mine_end, k.end);
  }
}

void GradBuckets::round_bucket_to_f16(size_t i) {
  if (f16_storage_) optim::round_to_f16_storage(bucket(i));
}

void GradBuckets::round_gradients_to_f16() {
  if (!shard_grads_) return;  // rounded bucket by bucket as the reductions started (round_bucket_to_f16)
  for (const Bucket& k : buckets_) optim::round_to_f16_storage(range(k.mine_begin, k.mine_end));
}

size_t GradBuckets::held_gradient_bytes() const {
  if (!shard_grads_) return n_ * sizeof(float);
  size_t n = 0;
  for (const Bucket& k : buckets_) n += k.mine_end - k.mine_begin;
  return n * sizeof(float);
}

}  // namespace lmforge::parallel
