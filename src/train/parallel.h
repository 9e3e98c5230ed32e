// defines: lmforge::train::check_parallel_layout(), DataParallel (data-parallel gradient reduction in buckets and the
//          optimizer (AdamW, LAMB or SGD), whole on every rank or sharded across ranks as Megatron's distributed
//          optimizer / ZeRO-1)
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "optim/factory.h"

namespace lmforge::train {

// Megatron's batch rules for D = world / (T·P) data-parallel ranks: the global batch is a whole number of
// (micro batch × D) rounds. Throws lmforge::Error naming the flags and the world size.
void check_parallel_layout(int world_size, int tensor_parallel, int64_t global_batch, int micro_batch,
                           int pipeline_parallel = 1);

// Data parallelism over a communicator of D ranks for one model whose parameters and gradients are two flat
// buffers of n floats (the spans cover them in order, as model::GPT lays them out).
//
// Samples: the global batch is M = global/micro micro-batches; rank r runs M/D of them, local step k being the
// global micro-batch k·D + r (Megatron's MegatronPretrainingSampler order), so the union over ranks is exactly
// the single-process batch.
//
// Gradients: the buffer is cut into buckets; within a bucket, rank r owns piece r (even_split). A bucket is
// reduce-scattered (rank-ordered sums, see dist::Communicator), so each rank holds the summed gradient of its
// pieces. Plain data parallel then all-gathers the sums and every rank updates everything; the distributed
// optimizer (ZeRO-1) keeps optimizer state only for its pieces (one optimizer per bucket), updates them and
// all-gathers the parameters. Both scale by 1/M, compute the global norm from the owned pieces (Σg² all-reduced in
// rank order) and clip the same way, so the two give the same parameters; against one process only the order of
// the gradient sum differs (fp32 rounding).
//
// Optimizers needing whole-tensor norms (LAMB's trust ratio ‖p‖/‖u‖) run in two phases (optim::Optimizer): the
// partial sums of p² and u² of every shard are added per tensor, all-reduced over the data-parallel group (the
// distributed optimizer cuts tensors anywhere, also inside one) and, with tensor parallelism, over the tensor-
// parallel group for split tensors (a replicated tensor is whole on every tensor-parallel rank, so only rank 0's
// sum enters); then every shard applies its update with the whole-tensor norms.
class DataParallel {
 public:
  DataParallel(dist::Communicator& comm, std::vector<optim::ParamSpan> spans, float* params, float* grads, size_t n,
               const optim::OptimizerConfig& optimizer, bool distributed_optimizer,
               size_t bucket_elements = kDefaultBucketElements);
  ~DataParallel();

  static constexpr size_t kDefaultBucketElements = size_t(1) << 22;  // 16 MB of fp32 gradients per bucket

  // With tensor parallelism: the global norm (and LAMB's per-tensor norms) also sum over `model_parallel` (the
  // tensor-parallel group), and spans replicated across it (counted_in_norm[i] false on all but one of its ranks)
  // are counted once.
  void set_model_parallel(dist::Communicator* model_parallel, std::vector<bool> counted_in_norm);
  // With pipeline parallelism: the global norm also sums over `pipeline` (this rank's pipeline, one rank per stage,
  // after the tensor-parallel sum), and spans that are copies of a tensor another stage counts (copy[i]: the tied
  // word embedding on the last stage) are left out of it. LAMB's per-tensor norms stay within the stage.
  void set_pipeline(dist::Communicator* pipeline, std::vector<bool> copy);

  // ZeRO stage 2 (with the distributed optimizer): every micro-batch's backward reduce-scatters its buckets as they
  // become final (arm_overlap() before each backward, finish_micro_batch() after it), the owned piece accumulating
  // the rank-ordered sums, and the rest of each bucket is released: its pages go back to the system
  // (madvise(MADV_DONTNEED), which reads as zeros when the next backward writes there). So after every backward a
  // rank holds only its 1/D of the gradients, and during one only the buckets not yet reduced. The sum differs
  // from stage 1 only in its order (per micro-batch across ranks, then over micro-batches).
  void shard_gradients();
  bool gradients_sharded() const { return shard_grads_; }
  // Stage 2: finishes this micro-batch's reductions (started by gradients_ready) and releases the unowned pieces.
  void finish_micro_batch();
  // zero_grad: the owned pieces zeroed, the rest released (stage 2); callers without stage 2 zero the model's.
  void zero_gradients();
  // --fp16: the accumulated local gradients are rounded to fp16 storage (train/mixed_precision.h) bucket by bucket
  // just before each bucket's reduction starts — in the overlapped path too, so no rounding ever touches a buffer
  // a non-blocking reduction is still reading (that race made fp16 runs on several ranks differ run to run).
  void set_f16_gradient_storage(bool on) { f16_storage_ = on; }
  // With stage 2, additionally the owned, already reduced pieces (their sums over the micro-batches); otherwise a
  // no-op (the rounding happened as the reductions started).
  void round_gradients_to_f16();
  // Gradient bytes this rank holds after the backward: all of them, or with stage 2 its pieces.
  size_t held_gradient_bytes() const;

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  bool distributed_optimizer() const { return distributed_; }
  size_t num_buckets() const { return buckets_.size(); }

  // Micro-batches this rank runs per global batch of `global_micro_batches`, and the first sample of local step k.
  int64_t local_micro_batches(int64_t global_micro_batches) const { return global_micro_batches / size(); }
  int64_t micro_batch_first_sample(int64_t consumed, int64_t k, int micro_batch) const {
    return consumed + (k * size() + rank()) * (int64_t)micro_batch;
  }
  // Σ over ranks, identical everywhere (losses).
  double sum(double local);

  // Overlap with the backward pass: call arm_overlap() before the last local micro-batch's backward and hand
  // gradients_ready() to the model's ready hook (model::GPT::set_gradients_ready_hook); each bucket whose
  // gradients are final then starts its reduce-scatter while earlier layers are differentiated, and
  // reduce_gradients() only finishes them. Without it reduce_gradients() does all the reduction.
  void arm_overlap();
  void gradients_ready(size_t from);
  // Buckets whose reduction started inside the backward pass, and all bucket reductions, since construction.
  int64_t overlapped_buckets() const { return overlapped_; }
  int64_t reduced_buckets() const { return reduced_; }

  // After this rank's micro-batches have accumulated into the gradient buffer: sums across ranks, scales by
  // 1/global_micro_batches and clips to max_norm (<= 0: no clipping). Returns the global norm before clipping.
  // loss_scale: the gradients are loss_scale times the true ones (fp16 loss scaling), divided out with the 1/M;
  // a gradient that overflowed makes the norm inf or NaN on every rank (the caller then skips the step).
  double reduce_gradients(int64_t global_micro_batches, double max_norm, double loss_scale = 1.0);
  // The optimizer step with this lr and weight decay (collective when the optimizer needs whole-tensor norms);
  // the distributed optimizer then all-gathers the parameters.
  void step(double lr, double weight_decay);

  // An optimizer holding the whole state, for checkpoints (collective: the distributed optimizer gathers its
  // shards into a temporary whole copy; plain data parallel returns its own).
  const optim::Optimizer& gathered_optimizer();
  void release_gathered();  // frees the distributed optimizer's temporary whole copy
  // Whole-state optimizer to load a checkpoint into; then call scatter_loaded_optimizer() (every rank).
  optim::Optimizer& optimizer_to_load();
  void scatter_loaded_optimizer();
  const optim::OptimizerConfig& optimizer_config() const { return optimizer_; }

  // Bytes of optimizer state (every named state array) this rank holds.
  size_t optimizer_state_bytes() const;
  std::string describe() const;  // one log line

 private:
  struct Bucket {
    size_t begin = 0, end = 0;
    std::vector<size_t> counts;  // even_split(end - begin, D)
    size_t mine_begin = 0, mine_end = 0;  // this rank's piece, absolute
  };

  dist::Communicator& comm_;
  std::vector<optim::ParamSpan> spans_;
  float* params_;
  float* grads_;
  size_t n_;
  optim::OptimizerConfig optimizer_;
  bool distributed_;
  std::vector<Bucket> buckets_;
  dist::Communicator* model_parallel_ = nullptr;
  dist::Communicator* pipeline_ = nullptr;
  std::vector<bool> tp_counted_, pipeline_copy_;  // per span (set_model_parallel, set_pipeline)
  void update_counted();
  bool armed_ = false;
  bool shard_grads_ = false;
  bool f16_storage_ = false;  // --fp16: round each bucket to fp16 storage before reducing it
  void round_bucket_to_f16(size_t i);
  void release(size_t begin, size_t end);  // grads_[begin, end) reads as 0, its whole pages returned
  std::vector<int> handles_;   // per bucket: -2 not started, else the communicator's handle
  int64_t overlapped_ = 0, reduced_ = 0;
  std::vector<std::pair<size_t, size_t>> counted_;  // flat ranges counted in the norm (model/pipeline parallel only)
  std::vector<bool> counted_spans_;                 // per span: counted in norms (model parallel only)
  std::unique_ptr<optim::Optimizer> full_;                 // plain DP; or a temporary whole copy (checkpoints)
  std::vector<std::unique_ptr<optim::Optimizer>> shards_;  // distributed optimizer: one per bucket
};

}  // namespace lmforge::train
