// defines: gradient_scale, GradNorm (scale, global norm over data × tensor × pipeline ranks, clip)
#include "parallel/grad_norm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/ops.h"
#include "optim/clip_grad.h"

namespace lmforge::parallel {

float gradient_scale(int64_t global_micro_batches, double loss_scale) {
  return loss_scale != 1.0 ? (float)(1.0 / ((double)global_micro_batches * loss_scale))
                           : 1.0f / (float)global_micro_batches;
}

GradNorm::GradNorm(std::span<const optim::ParamSpan> spans) {
  for (const optim::ParamSpan& s : spans) sizes_.push_back(s.size);
  update_counted();
}

void GradNorm::set_tensor_parallel(dist::Communicator* tensor_parallel, std::vector<bool> counted) {
  if (counted.size() != sizes_.size()) throw std::logic_error("GradNorm::set_tensor_parallel: one flag per span");
  tensor_parallel_ = tensor_parallel;
  tp_counted_ = std::move(counted);
  update_counted();
}

void GradNorm::set_pipeline(dist::Communicator* pipeline, std::vector<bool> copy) {
  if (copy.size() != sizes_.size()) throw std::logic_error("GradNorm::set_pipeline: one flag per span");
  pipeline_ = pipeline;
  pipeline_copy_ = std::move(copy);
  update_counted();
}

// The flat ranges the norm counts: tensor-parallel replicas once, pipeline copies not at all (consecutive counted
// spans merged into one run).
void GradNorm::update_counted() {
  counted_.clear();
  size_t at = 0;
  for (size_t i = 0; i < sizes_.size(); i++) {
    const bool counted = (tp_counted_.empty() || tp_counted_[i]) && (pipeline_copy_.empty() || !pipeline_copy_[i]);
    if (counted) {
      if (!counted_.empty() && counted_.back().end == at) counted_.back().end = at + sizes_[i];
      else counted_.push_back({at, at + sizes_[i]});
    }
    at += sizes_[i];
  }
}

double GradNorm::scale_and_clip(const kernels::Tensor& grads, std::span<const GradRange> owned,
                                dist::Communicator& data_parallel, float scale, bool rescale, double max_norm) const {
  // Owned ranges: scale, then their Σg² (double; each range's counted runs in index order), summed across ranks in
  // rank order: data parallel (the other pieces), tensor parallel (the other shards), pipeline (the other stages).
  const auto range = [&grads](size_t begin, size_t end) {
    return grads.slice0((int64_t)begin, (int64_t)(end - begin));
  };
  // One multi-tensor op each for the scaling, the sums (one read of them all) and the clipping.
  std::vector<kernels::Tensor> scaled, counted;
  std::vector<size_t> runs_per_range;  // counted runs of each owned range
  for (const GradRange& r : owned) {
    scaled.push_back(range(r.begin, r.end));
    size_t n = 0;
    for (const GradRange& c : counted_) {
      const size_t a = std::max(c.begin, r.begin), b = std::min(c.end, r.end);
      if (a < b) counted.push_back(range(a, b)), n++;
    }
    runs_per_range.push_back(n);
  }
  if (rescale) kernels::scale_multi({scaled.data(), scaled.size()}, scale);
  std::vector<double> sums(counted.size());
  kernels::sum_squares_multi({counted.data(), counted.size()}, sums.data());
  double sq = 0.0;
  size_t at = 0;
  for (size_t n : runs_per_range) {
    double s = 0.0;
    for (size_t j = 0; j < n; j++) s += sums[at++];
    sq += s;
  }
  if (data_parallel.size() > 1) data_parallel.all_reduce_sum(&sq, 1);
  if (tensor_parallel_ != nullptr) tensor_parallel_->all_reduce_sum(&sq, 1);
  if (pipeline_ != nullptr) pipeline_->all_reduce_sum(&sq, 1);
  const double norm = std::sqrt(sq);
  const float coef = optim::clip_coefficient(norm, max_norm);
  if (coef < 1.0f) kernels::scale_multi({scaled.data(), scaled.size()}, coef);
  return norm;
}

}  // namespace lmforge::parallel
