// defines: ClassificationHead (pooler, classifier and cross-entropy, forward beside backward)
#include "layers/classification_head.h"

#include <vector>

#include "layers/workspace.h"
#include "util/error.h"

namespace lmforge::layers {

using kernels::Tensor;

ClassificationHead::ClassificationHead(std::unique_ptr<Linear> pooler, std::unique_ptr<Linear> classifier,
                                       kernels::Backend& backend)
    : pooler_(std::move(pooler)), classifier_(std::move(classifier)), backend_(backend), loss_(whole_rows_, backend) {}

double ClassificationHead::forward(const Tensor& x, int B, int T, const int32_t* labels, Saved& sv) {
  const int64_t H = pooler_->local_in(), K = classifier_->local_out();
  sv.B = B;
  // first[b] = x[b·T]: a gather with the embedding op (exact), the rows' ids on the device.
  std::vector<int32_t> rows((size_t)B), targets((size_t)B);
  sv.mask.assign((size_t)B, 0.0f);
  sv.count = 0;
  for (int b = 0; b < B; b++) {
    rows[(size_t)b] = b * T;
    if (labels[b] < -1 || labels[b] >= K)
      throw Error("classification head: label " + std::to_string(labels[b]) + " of row " + std::to_string(b) +
                  " is outside [-1, " + std::to_string(K) + ")");
    targets[(size_t)b] = labels[b] < 0 ? 0 : labels[b];  // an ignored row's target is never read (mask 0)
    if (labels[b] >= 0) sv.mask[(size_t)b] = 1.0f, sv.count++;
  }
  sv.rows.resize(backend_, kernels::DType::I32, (size_t)B);
  backend_.copy_to_device(sv.rows.data(), rows.data(), rows.size() * sizeof(int32_t));
  sv.targets.resize(backend_, kernels::DType::I32, (size_t)B);
  backend_.copy_to_device(sv.targets.data(), targets.data(), targets.size() * sizeof(int32_t));
  const Tensor first = sized(backend_, sv.first, x.dtype, B, H);
  kernels::embedding_forward(first, sv.rows.view({B}), x, 0, false);
  // The head's small tensors in fp32.
  const Tensor pre = sized(backend_, sv.pooled_pre, kernels::DType::F32, B, H);
  const Tensor pooled = sized(backend_, sv.pooled, kernels::DType::F32, B, H);
  const Tensor logits = sized(backend_, sv.logits, kernels::DType::F32, B, K);
  pooler_->forward(pre, first);
  kernels::tanh_forward(pooled, pre);
  classifier_->forward(logits, pooled);
  const double sum = loss_.forward(logits, sv.targets.view({B}), sv.mask.data(), 0, sv.loss);
  return sum / (double)sv.count;
}

void ClassificationHead::backward(const Tensor& dx, float scale, Saved& sv) {
  if (sv.count == 0) return;
  const int B = sv.B;
  const int64_t H = pooler_->local_in(), K = classifier_->local_out();
  const Tensor logits = sv.logits.view({B, K});
  // d(mean CE)/dz_b = (softmax(z_b) − onehot(label_b)) · mask_b / count, written over the logits.
  loss_.backward(logits, scale / (float)sv.count, sv.loss);
  const Tensor d_pooled = sized(backend_, d_pooled_, kernels::DType::F32, B, H, true);
  classifier_->backward(d_pooled, logits, sv.pooled.view({B, H}));
  const Tensor d_pre = sized(backend_, d_pre_, kernels::DType::F32, B, H, true);
  kernels::tanh_backward(d_pre, sv.pooled_pre.view({B, H}), d_pooled);
  const Tensor d_first = sized(backend_, d_first_, kernels::DType::F32, B, H, true);
  pooler_->backward(d_first, d_pre, sv.first.view({B, H}));
  // The scatter back to each sequence's first position: dx[b·T] += d_first[b].
  const int64_t T = dx.rows() / B;
  for (int b = 0; b < B; b++) {
    const Tensor row = dx.slice0((int64_t)b * T, 1);
    kernels::add_forward(row, row, d_first.slice0(b, 1));
  }
}

}  // namespace lmforge::layers
