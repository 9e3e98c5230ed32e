// defines: LmHead (forward over chunks of the head's rows, backward recomputing a chunk's logits when there were
//          several, inference logits)
#include "layers/lm_head.h"

#include <algorithm>

#include "util/error.h"

namespace lmforge::layers {

using kernels::Tensor;

LmHead::LmHead(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, LmHeadSpec spec)
    : store_(store), spec_(std::move(spec)), loss_(tp, store.backend()) {
  // The output layer: logits = x·Eᵀ (+ b) over this rank's vocabulary rows (column-parallel over the tied table).
  LinearSpec d;
  d.name = spec_.name;
  d.bias = !spec_.bias_name.empty();
  d.bias_name = spec_.bias_name;
  d.in = spec_.hidden;
  d.out = spec_.padded_vocab;
  d.layout = kernels::WeightLayout::OUT_IN;
  d.parallelism = Parallelism::COLUMN;
  d.tied_weight = (int64_t)spec_.word;
  decoder_ = std::make_unique<Linear>(store, tp, workspace, d);
  vocab_offset_ = spec_.padded_vocab / tp.size() * tp.rank();
  if (!spec_.transform_name.empty()) {
    LinearSpec t;
    t.name = spec_.transform_name;
    t.in = t.out = spec_.hidden;
    t.layout = kernels::WeightLayout::OUT_IN;
    t.parallelism = Parallelism::REPLICATED;
    t.init_std = spec_.init_std;
    transform_ = std::make_unique<Linear>(store, tp, workspace, t);
    transform_ln_ = std::make_unique<LayerNorm>(store, spec_.transform_layernorm_name, spec_.hidden,
                                                spec_.layernorm_eps);
  }
}

LmHead::~LmHead() = default;

int64_t LmHead::rows_per_chunk(int64_t rows) const {
  if (rows < 1) return 1;
  if (spec_.chunk_rows > 0) return std::min(spec_.chunk_rows, rows);
  return std::clamp<int64_t>(LmHeadSpec::kChunkLogits / local_vocab(), 1, rows);
}

Tensor LmHead::logits() const {
  if (chunks_ != 1 || M_ == 0) return Tensor{};
  return logits_.view({M_, local_vocab()});
}

// BERT's transform t(x) = LayerNorm(gelu(x·Wᵀ + b)) on the head's rows; x itself without one.
Tensor LmHead::transform_forward(const Tensor& x) {
  if (!transform_) return x;
  kernels::Backend& be = store_.backend();
  const int64_t M = x.rows(), H = spec_.hidden;
  const Tensor t1 = sized(be, t1_, act_, M, H), t2 = sized(be, t2_, act_, M, H), t3 = sized(be, t3_, act_, M, H);
  transform_->forward(t1, x);
  kernels::gelu_forward(t2, t1, spec_.transform_gelu);
  transform_ln_->forward(t3, t2);
  return t3;
}

Tensor LmHead::chunk_logits(int64_t rows) {
  const kernels::DType dtype = spec_.logits_in_activation_dtype ? act_ : kernels::DType::F32;
  return sized(store_.backend(), logits_, dtype, rows, local_vocab());
}

double LmHead::forward(const Tensor& x, const int32_t* targets, const float* loss_mask) {
  kernels::Backend& be = store_.backend();
  act_ = store_.activation_dtype();
  const int64_t N = x.rows(), H = spec_.hidden;
  if (x.dim(-1) != H) throw Error("LM head: input " + x.describe() + " is not " + std::to_string(H) + " wide");
  x_ = x;
  has_mask_ = loss_mask != nullptr;
  row_ids_.clear();
  targets_.clear();
  mask_.clear();
  Tensor head_in = x;
  if (spec_.masked_rows_only && loss_mask) {
    for (int64_t n = 0; n < N; n++) {
      if (loss_mask[n] == 0.0f) continue;
      row_ids_.push_back((int32_t)n);
      targets_.push_back(targets[n]);
      mask_.push_back(loss_mask[n]);
    }
    M_ = (int64_t)row_ids_.size();
    if (M_ == 0) {
      chunks_ = 0;
      return 0.0;
    }
    // The rows as a gather: selected[m] = x[row_ids[m]] (the embedding lookup over x as the table, exact).
    rows_buf_.resize(be, kernels::DType::I32, (size_t)M_);
    be.copy_to_device(rows_buf_.data(), row_ids_.data(), (size_t)M_ * sizeof(int32_t));
    head_in = sized(be, selected_, x.dtype, M_, H);
    kernels::embedding_forward(head_in, rows_buf_.view({M_}), x, 0, false);
  } else {
    M_ = N;
    targets_.assign(targets, targets + N);
    if (loss_mask) mask_.assign(loss_mask, loss_mask + N);
  }
  head_in = transform_forward(head_in);
  targets_buf_.resize(be, kernels::DType::I32, (size_t)M_);
  be.copy_to_device(targets_buf_.data(), targets_.data(), (size_t)M_ * sizeof(int32_t));
  // The loss of each row depends on its logits only, so chunks of rows give the same per-row losses.
  rows_ = rows_per_chunk(M_);
  double sum = 0.0;
  chunks_ = 0;
  for (int64_t r0 = 0; r0 < M_; r0 += rows_, chunks_++) {
    const int64_t n = std::min(rows_, M_ - r0);
    const Tensor logits = chunk_logits(n);
    decoder_->forward(logits, head_in.slice0(r0, n));
    sum += loss_.forward(logits, targets_buf_.view({M_}).slice0(r0, n), has_mask_ ? mask_.data() + r0 : nullptr,
                         vocab_offset_);
  }
  return sum;
}

void LmHead::backward(const Tensor& dx, float scale) {
  if (M_ == 0 || chunks_ == 0) return;  // nothing went through the head
  kernels::Backend& be = store_.backend();
  const int64_t H = spec_.hidden;
  const bool selected = !row_ids_.empty();
  // The head's rows: x itself, or the gathered rows; then the transform's output when there is one.
  const Tensor gathered = selected ? selected_.view({M_, H}) : x_;
  const Tensor head_in = transform_ ? t3_.view({M_, H}) : gathered;
  // Gradient of the head's input rows: straight into dx when the head saw x as it is, otherwise into zeroed
  // buffers that the transform's backward and the scatter below carry back.
  Tensor d_head_in = dx;
  if (transform_) d_head_in = sized(be, d_t3_, act_, M_, H, true);
  else if (selected) d_head_in = sized(be, d_selected_, act_, M_, H, true);
  for (int64_t r0 = 0; r0 < M_; r0 += rows_) {
    const int64_t n = std::min(rows_, M_ - r0);
    const Tensor logits = chunk_logits(n);
    if (chunks_ > 1) {  // the chunk's logits and loss statistics again (the forward dropped them)
      decoder_->forward(logits, head_in.slice0(r0, n));
      loss_.forward(logits, targets_buf_.view({M_}).slice0(r0, n), has_mask_ ? mask_.data() + r0 : nullptr,
                    vocab_offset_);
    }
    // dlogits = scale·mask·(softmax − onehot), written over the logits in place.
    loss_.backward(logits, scale);
    decoder_->backward(d_head_in.slice0(r0, n), logits, head_in.slice0(r0, n));
  }
  Tensor d_gathered = d_head_in;
  if (transform_) {
    const Tensor d2 = sized(be, d_t2_, act_, M_, H, true), d1 = sized(be, d_t1_, act_, M_, H, true);
    transform_ln_->backward(d2, d_head_in, t2_.view({M_, H}));
    kernels::gelu_backward(d1, t1_.view({M_, H}), d2, spec_.transform_gelu);
    d_gathered = selected ? sized(be, d_selected_, act_, M_, H, true) : dx;
    transform_->backward(d_gathered, d1, gathered);
  }
  // The scatter back to the rows of x: dx[row_ids[m]] += d_gathered[m] (the embedding lookup's backward).
  if (selected) kernels::embedding_backward(dx, d_gathered, rows_buf_.view({M_}), 0);
}

void LmHead::logits(const Tensor& out, const Tensor& x) {
  act_ = store_.activation_dtype();
  decoder_->forward(out, transform_forward(x));
}

}  // namespace lmforge::layers
