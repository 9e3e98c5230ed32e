// defines: check_parallel_layout(), DataParallel (bucketed rank-ordered gradient reduction, plain or sharded optimizer)
#include "train/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include "optim/clip_grad.h"
#include "train/mixed_precision.h"
#include "util/error.h"

namespace lmforge::train {

void check_parallel_layout(int world_size, int tensor_parallel, int64_t global_batch, int micro_batch,
                           int pipeline_parallel) {
  if (tensor_parallel < 1) throw Error("--tensor-model-parallel-size must be >= 1");
  if (pipeline_parallel < 1) throw Error("--pipeline-model-parallel-size must be >= 1");
  const int model_parallel = tensor_parallel * pipeline_parallel;
  if (world_size % model_parallel != 0) {
    if (pipeline_parallel == 1)
      throw Error("the world size " + std::to_string(world_size) +
                  " is not divisible by --tensor-model-parallel-size " + std::to_string(tensor_parallel) +
                  " (ranks = tensor-parallel size × data-parallel size)");
    throw Error("the world size " + std::to_string(world_size) + " is not divisible by --tensor-model-parallel-size " +
                std::to_string(tensor_parallel) + " × --pipeline-model-parallel-size " +
                std::to_string(pipeline_parallel) + " (ranks = tensor × pipeline × data-parallel size)");
  }
  const int64_t dp = world_size / model_parallel;
  if (micro_batch > 0 && global_batch % ((int64_t)micro_batch * dp) != 0)
    throw Error("--global-batch-size " + std::to_string(global_batch) + " is not divisible by --micro-batch-size " +
                std::to_string(micro_batch) + " × data-parallel size " + std::to_string(dp) + " (world size " +
                std::to_string(world_size) + "): every data-parallel rank must run the same number of micro-batches");
}

DataParallel::DataParallel(dist::Communicator& comm, std::vector<optim::ParamSpan> spans, float* params, float* grads,
                           size_t n, const optim::OptimizerConfig& optimizer, bool distributed_optimizer,
                           size_t bucket_elements)
    : comm_(comm), spans_(std::move(spans)), params_(params), grads_(grads), n_(n), optimizer_(optimizer),
      distributed_(distributed_optimizer) {
  size_t total = 0;
  for (const optim::ParamSpan& s : spans_) {
    if (s.param != params_ + total || s.grad != grads_ + total)
      throw std::logic_error("DataParallel: parameter spans must tile the flat buffers in order");
    total += s.size;
  }
  if (total != n_) throw std::logic_error("DataParallel: spans do not cover the buffer");
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
  if (distributed_) {
    for (const Bucket& k : buckets_)
      shards_.push_back(optim::make_optimizer(optimizer_, spans_, k.mine_begin, k.mine_end));
  } else {
    full_ = optim::make_optimizer(optimizer_, spans_);
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::set_model_parallel(dist::Communicator* model_parallel, std::vector<bool> counted_in_norm) {
  if (counted_in_norm.size() != spans_.size()) throw std::logic_error("set_model_parallel: one flag per span");
  model_parallel_ = model_parallel;
  counted_spans_ = counted_in_norm;
  tp_counted_ = std::move(counted_in_norm);
  update_counted();
}

void DataParallel::set_pipeline(dist::Communicator* pipeline, std::vector<bool> copy) {
  if (copy.size() != spans_.size()) throw std::logic_error("set_pipeline: one flag per span");
  pipeline_ = pipeline;
  pipeline_copy_ = std::move(copy);
  update_counted();
}

// The flat ranges the global norm counts: tensor-parallel replicas once, pipeline copies not at all.
void DataParallel::update_counted() {
  counted_.clear();
  size_t at = 0;
  for (size_t i = 0; i < spans_.size(); i++) {
    const bool counted = (tp_counted_.empty() || tp_counted_[i]) && (pipeline_copy_.empty() || !pipeline_copy_[i]);
    if (counted) {
      if (!counted_.empty() && counted_.back().second == at) counted_.back().second = at + spans_[i].size;
      else counted_.push_back({at, at + spans_[i].size});
    }
    at += spans_[i].size;
  }
}

void DataParallel::arm_overlap() {
  if (comm_.size() == 1) return;  // nothing to reduce
  armed_ = true;
  handles_.assign(buckets_.size(), -2);
}

void DataParallel::gradients_ready(size_t from) {
  if (!armed_) return;
  comm_.progress();
  // Buckets lie in index order and become final from the end of the buffer down.
  for (size_t i = buckets_.size(); i-- > 0;) {
    if (buckets_[i].begin < from) break;
    if (handles_[i] != -2) continue;
    round_bucket_to_f16(i);
    handles_[i] = comm_.start_reduce_scatter_sum(grads_ + buckets_[i].begin, buckets_[i].counts);
    if (from > 0) overlapped_++;  // from == 0 is the end of the backward pass: nothing left to overlap with
  }
}

void DataParallel::shard_gradients() {
  if (!distributed_)
    throw std::logic_error("DataParallel: ZeRO stage 2 shards the gradients of the distributed optimizer");
  shard_grads_ = true;
}

// Whole pages inside the range go back to the system (private anonymous memory reads as zeros afterwards); the
// partial pages at either end are zeroed in place (they also hold a neighbour's elements).
void DataParallel::release(size_t begin, size_t end) {
  if (begin >= end) return;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t a = (uintptr_t)(grads_ + begin), b = (uintptr_t)(grads_ + end);
  const uintptr_t pa = (a + page - 1) / page * page, pb = b / page * page;
  if (pa >= pb) {
    std::memset((void*)a, 0, b - a);
    return;
  }
  std::memset((void*)a, 0, pa - a);
  std::memset((void*)pb, 0, b - pb);
  if (madvise((void*)pa, pb - pa, MADV_DONTNEED) != 0) std::memset((void*)pa, 0, pb - pa);
}

void DataParallel::finish_micro_batch() {
  for (size_t i = 0; i < buckets_.size(); i++) {
    if (armed_ && handles_[i] != -2) comm_.finish_reduce_scatter_sum(handles_[i]);
    else {
      round_bucket_to_f16(i);
      comm_.reduce_scatter_sum(grads_ + buckets_[i].begin, buckets_[i].counts);
    }
    reduced_++;
  }
  armed_ = false;
  for (const Bucket& k : buckets_) {
    release(k.begin, k.mine_begin);
    release(k.mine_end, k.end);
  }
}

void DataParallel::zero_gradients() {
  for (const Bucket& k : buckets_) {
    std::memset(grads_ + k.mine_begin, 0, (k.mine_end - k.mine_begin) * sizeof(float));
    release(k.begin, k.mine_begin);
    release(k.mine_end, k.end);
  }
}

void DataParallel::round_bucket_to_f16(size_t i) {
  if (f16_storage_) round_to_f16_storage(grads_ + buckets_[i].begin, buckets_[i].end - buckets_[i].begin);
}

void DataParallel::round_gradients_to_f16() {
  if (!shard_grads_) return;  // rounded bucket by bucket as the reductions started (round_bucket_to_f16)
  for (const Bucket& k : buckets_) round_to_f16_storage(grads_ + k.mine_begin, k.mine_end - k.mine_begin);
}

size_t DataParallel::held_gradient_bytes() const {
  if (!shard_grads_) return n_ * sizeof(float);
  size_t n = 0;
  for (const Bucket& k : buckets_) n += k.mine_end - k.mine_begin;
  return n * sizeof(float);
}

double DataParallel::sum(double local) {
  comm_.all_reduce_sum(&local, 1);
  return local;
}

double DataParallel::reduce_gradients(int64_t global_micro_batches, double max_norm, double loss_scale) {
  const bool unscale = loss_scale != 1.0;
  const float scale = unscale ? (float)(1.0 / ((double)global_micro_batches * loss_scale))
                              : 1.0f / (float)global_micro_batches;
  if (comm_.size() == 1 && !distributed_ && model_parallel_ == nullptr && pipeline_ == nullptr) {
    // One process: exactly the single-process trainer's arithmetic.
    if (f16_storage_) round_to_f16_storage(grads_, n_);
    if (global_micro_batches > 1 || unscale) optim::scale_grads(spans_, scale);
    return optim::clip_grad_norm(spans_, max_norm);
  }
  // (Stage 2 reduced every micro-batch already: finish_micro_batch.)
  for (size_t i = 0; i < buckets_.size() && !shard_grads_; i++) {
    if (armed_ && handles_[i] != -2) comm_.finish_reduce_scatter_sum(handles_[i]);
    else {
      round_bucket_to_f16(i);
      comm_.reduce_scatter_sum(grads_ + buckets_[i].begin, buckets_[i].counts);
    }
    reduced_++;
  }
  armed_ = false;
  // Own pieces: scale, then their Σg² (double, in index order) summed across ranks in rank order.
  double sq = 0.0;
  for (const Bucket& k : buckets_) {
    float* g = grads_ + k.mine_begin;
    const int64_t len = (int64_t)(k.mine_end - k.mine_begin);
    double s = 0.0;
    if (global_micro_batches > 1 || unscale) {
#pragma omp parallel for simd schedule(static) if (len > 65536)
      for (int64_t i = 0; i < len; i++) g[i] *= scale;
    }
    if (model_parallel_ == nullptr && pipeline_ == nullptr) {
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (len > 65536)
      for (int64_t i = 0; i < len; i++) s += (double)g[i] * (double)g[i];
    } else {
      for (const auto& [lo, hi] : counted_) {
        const size_t a = std::max(lo, k.mine_begin), b = std::min(hi, k.mine_end);
        for (size_t i = a; i < b; i++) s += (double)grads_[i] * (double)grads_[i];
      }
    }
    sq += s;
  }
  comm_.all_reduce_sum(&sq, 1);
  if (model_parallel_ != nullptr) model_parallel_->all_reduce_sum(&sq, 1);
  if (pipeline_ != nullptr) pipeline_->all_reduce_sum(&sq, 1);
  const double norm = std::sqrt(sq);
  const float coef = optim::clip_coefficient(norm, max_norm);
  for (const Bucket& k : buckets_) {
    if (coef < 1.0f) {
      float* g = grads_ + k.mine_begin;
      const int64_t len = (int64_t)(k.mine_end - k.mine_begin);
#pragma omp parallel for simd schedule(static) if (len > 65536)
      for (int64_t i = 0; i < len; i++) g[i] *= coef;
    }
    // Plain data parallel: every rank needs the whole (scaled, clipped) gradient for its whole update.
    if (!distributed_) comm_.all_gather(grads_ + k.begin, k.counts);
  }
  return norm;
}

void DataParallel::step(double lr, double weight_decay) {
  std::vector<optim::Optimizer*> parts;  // this rank's optimizers, in bucket (index) order
  if (distributed_) {
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
    if (distributed_ && comm_.size() > 1) comm_.all_reduce_sum(sums.data(), sums.size());
    if (model_parallel_ != nullptr && model_parallel_->size() > 1) {
      // A replicated tensor's sums already are the whole tensor's on every tensor-parallel rank: only the ranks
      // counting it (one per group) contribute, the others add 0, so every rank ends with the same value.
      for (size_t i = 0; i < spans_.size(); i++)
        if (!counted_spans_[i]) sums[2 * i] = sums[2 * i + 1] = 0.0;
      model_parallel_->all_reduce_sum(sums.data(), sums.size());
    }
  }
  // Phase 2, and the distributed optimizer's all-gather of each bucket's updated parameters.
  for (size_t i = 0; i < parts.size(); i++) {
    parts[i]->finish_step(lr, weight_decay, sums);
    if (distributed_) comm_.all_gather(params_ + buckets_[i].begin, buckets_[i].counts);
  }
}

const optim::Optimizer& DataParallel::gathered_optimizer() {
  if (!distributed_) return *full_;
  full_ = optim::make_optimizer(optimizer_, spans_);
  full_->set_steps(shards_.front()->steps());
  for (size_t s = 0; s < full_->state_names().size(); s++) {
    std::span<float> whole = full_->state(s);
    for (size_t i = 0; i < buckets_.size(); i++) {
      const Bucket& k = buckets_[i];
      const std::span<const float> mine = shards_[i]->state(s);
      std::copy(mine.begin(), mine.end(), whole.begin() + (ptrdiff_t)k.mine_begin);
      comm_.all_gather(whole.data() + k.begin, k.counts);
    }
  }
  return *full_;
}

void DataParallel::release_gathered() {
  if (distributed_) full_.reset();
}

optim::Optimizer& DataParallel::optimizer_to_load() {
  if (!distributed_) return *full_;
  full_ = optim::make_optimizer(optimizer_, spans_);
  return *full_;
}

void DataParallel::scatter_loaded_optimizer() {
  if (!distributed_) return;
  for (size_t i = 0; i < buckets_.size(); i++) {
    const Bucket& k = buckets_[i];
    for (size_t s = 0; s < full_->state_names().size(); s++) {
      const std::span<const float> whole = std::as_const(*full_).state(s);
      std::copy(whole.begin() + (ptrdiff_t)k.mine_begin, whole.begin() + (ptrdiff_t)k.mine_end,
                shards_[i]->state(s).begin());
    }
    shards_[i]->set_steps(full_->steps());
  }
  full_.reset();  // the whole copy was only a staging area
}

size_t DataParallel::optimizer_state_bytes() const {
  size_t bytes = 0;
  if (distributed_) {
    for (const auto& s : shards_) bytes += s->state_bytes();
  } else {
    bytes = full_->state_bytes();
  }
  return bytes;
}

std::string DataParallel::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "data parallel: %d ranks (%s), %zu gradient buckets; %s %s optimizer: state %.3f MB on this rank; "
                "gradients %s: %.3f MB held after the backward\n",
                comm_.size(), comm_.name().c_str(), buckets_.size(), distributed_ ? "distributed" : "replicated",
                optimizer_.kind.c_str(), (double)optimizer_state_bytes() / 1e6,
                shard_grads_ ? "sharded (ZeRO-2)" : "whole", (double)held_gradient_bytes() / 1e6);
  return buf;
}

}  // namespace lmforge::train
