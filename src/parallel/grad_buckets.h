// defines: lmforge::parallel::GradRange, GradBuckets (data-parallel gradient reduction in buckets: rank-ordered
//          reduce-scatter, overlapped with the backward pass through the model's ready hook, ZeRO-2 release of the
//          pieces a rank does not own, fp16 gradient storage)
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "kernels/tensor.h"
#include "optim/optimizer.h"

namespace lmforge::parallel {

// A range [begin, end) of the flat gradient buffer.
struct GradRange {
  size_t begin = 0, end = 0;
};

// The gradient buffer of one model (a flat f32 device view of n floats; the spans tile it in order, as the models
// lay their tensors out) over a data-parallel communicator of D ranks (Megatron-core's distributed/ DDP with its param-and-grad buffer).
//
// The buffer is cut into buckets; within a bucket, rank r owns piece r (dist::even_split). A bucket is
// reduce-scattered (rank-ordered sums, see dist::Communicator), so each rank holds the summed gradient of its
// pieces; the gradient norm and clipping then run over the owned pieces (grad_norm.h). Plain data parallelism
// all-gathers the clipped sums (gather_gradients) and every rank updates everything; the distributed optimizer
// (distributed_optimizer.h) keeps state for its pieces only and all-gathers the parameters instead. Against one
// process only the order of the gradient sum differs (fp32 rounding).
class GradBuckets {
 public:
  // distributed_optimizer: the ranks keep only their pieces of the reduced gradient (no all-gather of gradients).
  GradBuckets(dist::Communicator& data_parallel, std::vector<optim::ParamSpan> spans, const kernels::Tensor& grads,
              bool distributed_optimizer, size_t bucket_elements = kDefaultBucketElements);

  static constexpr size_t kDefaultBucketElements = size_t(1) << 22;  // 16 MB of fp32 gradients per bucket

  struct Bucket {
    size_t begin = 0, end = 0;
    std::vector<size_t> counts;           // even_split(end - begin, D)
    size_t mine_begin = 0, mine_end = 0;  // this rank's piece, absolute
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  dist::Communicator& data_parallel() const { return comm_; }
  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  bool distributed_optimizer() const { return distributed_; }

  // The ranges whose reduced gradients this rank holds after reduce(), in index order: its piece of every bucket;
  // with one rank and no distributed optimizer, the tensors (nothing is exchanged: the one-process arithmetic,
  // torch's clip_grad_norm_ summing tensor by tensor).
  const std::vector<GradRange>& owned() const { return owned_; }

  // Overlap with the backward pass: call arm_overlap() before the last local micro-batch's backward and hand
  // gradients_ready() to the model's ready hook (train::Model::set_gradients_ready_hook); each bucket whose
  // gradients are final then starts its reduce-scatter while earlier layers are differentiated, and reduce() only
  // finishes them. Without it reduce() does all the reduction.
  void arm_overlap();
  void gradients_ready(size_t from);
  // Buckets whose reduction started inside the backward pass, and all bucket reductions, since construction.
  int64_t overlapped_buckets() const { return overlapped_; }
  int64_t reduced_buckets() const { return reduced_; }

  // After this rank's micro-batches have accumulated into the buffer: the reduce-scatter of every bucket (ZeRO-2:
  // done already by finish_micro_batch), so each rank holds the sums of owned().
  void reduce();
  // Plain data parallelism, after clipping: every rank needs the whole (scaled, clipped) gradient for its whole
  // update. Nothing with the distributed optimizer.
  void gather_gradients();

  // ZeRO stage 2 (with the distributed optimizer): every micro-batch's backward reduce-scatters its buckets as they
  // become final (arm_overlap() before each backward, finish_micro_batch() after it), the owned piece accumulating
  // the rank-ordered sums, and the rest of each bucket is released: its pages go back to the system
  // (kernels::Backend::release_zeroed: on the CPU madvise(MADV_DONTNEED), which reads as zeros when the next backward
  // writes there). So after every backward a
  // rank holds only its 1/D of the gradients, and during one only the buckets not yet reduced. The sum differs
  // from stage 1 only in its order (per micro-batch across ranks, then over micro-batches).
  void shard_gradients();
  bool gradients_sharded() const { return shard_grads_; }
  // Stage 2: finishes this micro-batch's reductions (started by gradients_ready) and releases the unowned pieces.
  void finish_micro_batch();
  // zero_grad: the owned pieces zeroed, the rest released (stage 2); callers without stage 2 zero the model's.
  void zero_gradients();
  // --fp16: the accumulated local gradients are rounded to fp16 storage (optim/grad_scaler.h) bucket by bucket
  // just before each bucket's reduction starts — in the overlapped path too, so no rounding ever touches a buffer
  // a non-blocking reduction is still reading (that race made fp16 runs on several ranks differ run to run).
  void set_f16_gradient_storage(bool on) { f16_storage_ = on; }
  // With stage 2, additionally the owned, already reduced pieces (their sums over the micro-batches); otherwise a
  // no-op (the rounding happens as the reductions start).
  void round_gradients_to_f16();
  // Gradient bytes this rank holds after the backward: all of them, or with stage 2 its pieces.
  size_t held_gradient_bytes() const;

 private:
  void round_bucket_to_f16(size_t i);
  void release(size_t begin, size_t end);  // grads_[begin, end) reads as 0, its whole pages returned
  kernels::Tensor range(size_t begin, size_t end) const {  // grads_[begin, end)
    return grads_.slice0((int64_t)begin, (int64_t)(end - begin));
  }
  kernels::Tensor bucket(size_t i) const { return range(buckets_[i].begin, buckets_[i].end); }

  dist::Communicator& comm_;
  kernels::Tensor grads_;
  size_t n_;
  bool distributed_;
  std::vector<Bucket> buckets_;
  std::vector<GradRange> owned_;
  bool armed_ = false;
  bool shard_grads_ = false;
  bool f16_storage_ = false;  // --fp16: round each bucket to fp16 storage before reducing it
  std::vector<int> handles_;  // per bucket: -2 not started, else the communicator's handle
  int64_t overlapped_ = 0, reduced_ = 0;
};

}  // namespace lmforge::parallel
