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
  if (spec_.transform_out > 0 && spec_.transform_name.empty())
    throw Error("LM head " + spec_.name + ": transform_out needs a transform");
  d.in = width();
  d.out = spec_.padded_vocab;
  d.layout = kernels::WeightLayout::OUT_IN;
  d.parallelism = Parallelism::COLUMN;
  d.tied_weight = (int64_t)spec_.word;
  decoder_ = std::make_unique<Linear>(store, tp, workspace, d);
  vocab_offset_ = spec_.padded_vocab / tp.size() * tp.rank();
  if (!spec_.transform_name.empty()) {
    LinearSpec t;
    t.name = spec_.transform_name;
    t.in = spec_.hidden;
    t.out = width();
    t.layout = kernels::WeightLayout::OUT_IN;
    t.parallelism = Parallelism::REPLICATED;
    t.init_std = spec_.init_std;
    transform_ = std::make_unique<Linear>(store, tp, workspace, t);
    transform_ln_ = std::make_unique<LayerNorm>(store, spec_.transform_layernorm_name, width(),
                                                spec_.layernorm_eps);
  }
}

LmHead::~LmHead() = default;

int64_t LmHead::rows_per_chunk(int64_t rows) const {
  if (rows < 1) return 1;
  if (spec_.chunk_rows > 0) return std::min(spec_.chunk_rows, rows);
  const int64_t budget = store_.backend().device() == kernels::Device::CUDA ? LmHeadSpec::kDeviceChunkLogits
                                                                             : LmHeadSpec::kChunkLogits;
  return std::clamp<int64_t>(budget / local_vocab(), 1, rows);
}

Tensor LmHead::logits(const Saved& sv) const {
  if (sv.chunks != 1 || sv.M == 0) return Tensor{};
  return sv.logits.view({sv.M, local_vocab()});
}

// BERT's transform t(x) = LayerNorm(gelu(x·Wᵀ + b)) on the head's rows; x itself without one.
Tensor LmHead::transform_forward(const Tensor& x, Saved& sv) {
  if (!transform_) return x;
  kernels::Backend& be = store_.backend();
  const int64_t M = x.rows(), W = width();
  const Tensor t1 = sized(be, sv.t1, act_, M, W), t2 = sized(be, sv.t2, act_, M, W), t3 = sized(be, sv.t3, act_, M, W);
  transform_->forward(t1, x);
  kernels::gelu_forward(t2, t1, spec_.transform_gelu);
  transform_ln_->forward(t3, t2, sv.transform_ln);
  return t3;
}

Tensor LmHead::chunk_logits(int64_t rows, Saved& sv) {
  const kernels::DType dtype = spec_.logits_in_activation_dtype ? act_ : kernels::DType::F32;
  return sized(store_.backend(), sv.logits, dtype, rows, local_vocab());
}

double LmHead::forward(const Tensor& x, const int32_t* targets, const float* loss_mask, Saved& sv) {
  kernels::Backend& be = store_.backend();
  act_ = store_.activation_dtype();
  const int64_t N = x.rows(), H = spec_.hidden;
  if (x.dim(-1) != H) throw Error("LM head: input " + x.describe() + " is not " + std::to_string(H) + " wide");
  sv.x = x;
  sv.has_mask = loss_mask != nullptr;
  sv.row_ids.clear();
  sv.targets.clear();
  sv.mask.clear();
  Tensor head_in = x;
  if (spec_.masked_rows_only && loss_mask) {
    for (int64_t n = 0; n < N; n++) {
      if (loss_mask[n] == 0.0f) continue;
      sv.row_ids.push_back((int32_t)n);
      sv.targets.push_back(targets[n]);
      sv.mask.push_back(loss_mask[n]);
    }
    sv.M = (int64_t)sv.row_ids.size();
    if (sv.M == 0) {
      sv.chunks = 0;
      return 0.0;
    }
    // The rows as a gather: selected[m] = x[row_ids[m]] (the embedding lookup over x as the table, exact).
    sv.rows_buf.resize(be, kernels::DType::I32, (size_t)sv.M);
    be.copy_to_device(sv.rows_buf.data(), sv.row_ids.data(), (size_t)sv.M * sizeof(int32_t));
    head_in = sized(be, sv.selected, x.dtype, sv.M, H);
    kernels::embedding_forward(head_in, sv.rows_buf.view({sv.M}), x, 0, false);
  } else {
    sv.M = N;
    sv.targets.assign(targets, targets + N);
    if (loss_mask) sv.mask.assign(loss_mask, loss_mask + N);
  }
  head_in = transform_forward(head_in, sv);
  const int64_t M = sv.M;
  sv.targets_buf.resize(be, kernels::DType::I32, (size_t)M);
  be.copy_to_device(sv.targets_buf.data(), sv.targets.data(), (size_t)M * sizeof(int32_t));
  // The loss of each row depends on its logits only, so chunks of rows give the same per-row losses.
  sv.rows = rows_per_chunk(M);
  double sum = 0.0;
  sv.chunks = 0;
  for (int64_t r0 = 0; r0 < M; r0 += sv.rows, sv.chunks++) {
    const int64_t n = std::min(sv.rows, M - r0);
    const Tensor logits = chunk_logits(n, sv);
    decoder_->forward(logits, head_in.slice0(r0, n));
    sum += loss_.forward(logits, sv.targets_buf.view({M}).slice0(r0, n), sv.has_mask ? sv.mask.data() + r0 : nullptr,
                         vocab_offset_, sv.loss);
  }
  return sum;
}

void LmHead::backward(const Tensor& dx, float scale, Saved& sv) {
  const int64_t M = sv.M;
  if (M == 0 || sv.chunks == 0) return;  // nothing went through the head
  kernels::Backend& be = store_.backend();
  const int64_t H = spec_.hidden;
  const bool selected = !sv.row_ids.empty();
  // The head's rows: x itself, or the gathered rows; then the transform's output when there is one.
  const Tensor gathered = selected ? sv.selected.view({M, H}) : sv.x;
  const int64_t W = width();
  const Tensor head_in = transform_ ? sv.t3.view({M, W}) : gathered;
  // Gradient of the head's input rows: straight into dx when the head saw x as it is, otherwise into zeroed
  // buffers that the transform's backward and the scatter below carry back.
  Tensor d_head_in = dx;
  if (transform_) d_head_in = sized(be, d_t3_, act_, M, W, true);
  else if (selected) d_head_in = sized(be, d_selected_, act_, M, H, true);
  for (int64_t r0 = 0; r0 < M; r0 += sv.rows) {
    const int64_t n = std::min(sv.rows, M - r0);
    const Tensor logits = chunk_logits(n, sv);
    if (sv.chunks > 1) {  // the chunk's logits and loss statistics again (the forward dropped them)
      decoder_->forward(logits, head_in.slice0(r0, n));
      loss_.forward(logits, sv.targets_buf.view({M}).slice0(r0, n), sv.has_mask ? sv.mask.data() + r0 : nullptr,
                    vocab_offset_, sv.loss);
    }
    // dlogits = scale·mask·(softmax − onehot), written over the logits in place.
    loss_.backward(logits, scale, sv.loss);
    decoder_->backward(d_head_in.slice0(r0, n), logits, head_in.slice0(r0, n));
  }
  Tensor d_gathered = d_head_in;
  if (transform_) {
    const Tensor d2 = sized(be, d_t2_, act_, M, W, true), d1 = sized(be, d_t1_, act_, M, W, true);
    transform_ln_->backward(d2, d_head_in, sv.t2.view({M, W}), sv.transform_ln);
    kernels::gelu_backward(d1, sv.t1.view({M, W}), d2, spec_.transform_gelu);
    d_gathered = selected ? sized(be, d_selected_, act_, M, H, true) : dx;
    transform_->backward(d_gathered, d1, gathered);
  }
  // The scatter back to the rows of x: dx[row_ids[m]] += d_gathered[m] (the embedding lookup's backward).
  if (selected) kernels::embedding_backward(dx, d_gathered, sv.rows_buf.view({M}), 0);
}

void LmHead::logits(const Tensor& out, const Tensor& x) {
  act_ = store_.activation_dtype();
  decoder_->forward(out, transform_forward(x, scratch_));
}

}  // namespace lmforge::layers
