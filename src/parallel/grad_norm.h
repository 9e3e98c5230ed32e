// defines: lmforge::parallel::gradient_scale(), GradNorm (the global gradient norm over data-, tensor- and
//          pipeline-parallel ranks, and clipping by it: the one implementation for every layout)
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "parallel/grad_buckets.h"

namespace lmforge::parallel {

// The factor the summed gradients are multiplied by before the norm: 1/M for M micro-batches (each backward
// accumulated d(micro-batch mean)/dθ; Megatron divides each loss by M), and with fp16 loss scaling also 1/S:
// float(1/(M·S)) when S ≠ 1, else 1/float(M).
float gradient_scale(int64_t global_micro_batches, double loss_scale);

// Megatron's clip_grad_norm_fp32 over the model-parallel group (torch.nn.utils.clip_grad_norm_ with one rank):
//   norm = sqrt(Σ over the counted gradients of g²),  g ← g · clip_coefficient(norm, max_norm)  (optim/clip_grad.h)
// Each rank holds some ranges of its flat gradient buffer summed over data parallelism (GradBuckets::owned());
// Σg² of each range (optim::sum_of_squares, in double) is added in index order, then summed in rank order over the
// data-parallel group, the tensor-parallel group and the pipeline, so every rank gets the same norm, and one
// process the arithmetic of optim::clip_grad_norm.
//
// What counts: tensor i of this rank's spans unless it is replicated over tensor parallelism and this is not the
// rank counting it (set_tensor_parallel: counted[i]), or it is a copy of a tensor another pipeline stage counts
// (set_pipeline: copy[i], the tied word embedding on the last stage).
class GradNorm {
 public:
  explicit GradNorm(std::span<const optim::ParamSpan> spans);

  void set_tensor_parallel(dist::Communicator* tensor_parallel, std::vector<bool> counted);
  void set_pipeline(dist::Communicator* pipeline, std::vector<bool> copy);

  // Multiplies the `owned` ranges of `grads` (the flat f32 device view of the gradients: kernel ops, only Σg² comes
  // back to the host) by `scale` (when `rescale`), returns the global norm of the result and
  // clips them to max_norm (<= 0: no clipping). `data_parallel`: the ranks whose owned ranges together cover the
  // buffer (one rank: none to sum over). A gradient that overflowed makes the norm inf or NaN on every rank.
  double scale_and_clip(const kernels::Tensor& grads, std::span<const GradRange> owned,
                        dist::Communicator& data_parallel, float scale, bool rescale, double max_norm) const;

 private:
  void update_counted();

  std::vector<size_t> sizes_;  // per span
  dist::Communicator* tensor_parallel_ = nullptr;
  dist::Communicator* pipeline_ = nullptr;
  std::vector<bool> tp_counted_, pipeline_copy_;  // per span (empty: all counted / none a copy)
  std::vector<GradRange> counted_;  // flat ranges counted in the norm (runs of counted spans)
};

}  // namespace lmforge::parallel
