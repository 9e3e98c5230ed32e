// defines: Embedding
#include "layers/embedding.h"

#include "layers/workspace.h"

namespace lmforge::layers {

using kernels::Tensor;

Embedding::Embedding(ParameterStore& store, const TensorParallel& tp, EmbeddingSpec spec)
    : store_(store), tp_(tp), spec_(std::move(spec)), dropout_(spec_.dropout, 0, DropoutSite::EMBEDDING) {
  // Vocabulary-parallel rows within a tensor-parallel group; whole outside one (see Linear).
  word_ = store_.add(spec_.word_name + ".weight", {spec_.padded_vocab, spec_.hidden}, true,
                     Init::normal(spec_.init_std), /*split_dim=*/tp_.size() > 1 ? 0 : -1);
  vocab_offset_ = spec_.padded_vocab / tp_.size() * tp_.rank();
  if (!spec_.position_name.empty())
    position_ = store_.add(spec_.position_name + ".weight", {spec_.max_positions, spec_.hidden}, true,
                           Init::normal(spec_.init_std));
  if (!spec_.token_type_name.empty())
    token_type_ = store_.add(spec_.token_type_name + ".weight", {spec_.token_types, spec_.hidden}, true,
                             Init::normal(spec_.init_std));
}

Tensor Embedding::forward(const Tensor& tokens, const Tensor& positions, const Tensor& types,
                          const ForwardStep& step, Saved& saved) {
  const int64_t N = tokens.numel(), C = spec_.hidden;
  saved.tokens = tokens;
  saved.positions = positions;
  saved.types = types;
  saved.step = step;
  const bool dropped = dropout_.active(step);
  const Tensor sum = sized(store_.backend(), dropped ? saved.sum : saved.out, store_.activation_dtype(), N, C);
  kernels::embedding_forward(sum, tokens, store_.compute_value(word_), vocab_offset_, false);
  tp_.all_reduce(sum);
  if (!spec_.position_name.empty()) kernels::embedding_forward(sum, positions, store_.compute_value(position_), 0, true);
  if (!spec_.token_type_name.empty()) kernels::embedding_forward(sum, types, store_.compute_value(token_type_), 0, true);
  if (!dropped) return sum;
  const Tensor out = sized(store_.backend(), saved.out, store_.activation_dtype(), N, C);
  dropout_.forward(out, sum, step);
  return out;
}

void Embedding::backward(const Tensor& dout, const Saved& saved) {
  Tensor d = dout;
  if (dropout_.active(saved.step)) {
    d = sized(store_.backend(), ddrop_, dout.dtype, dout.rows(), spec_.hidden, true);
    dropout_.backward(d, dout, saved.step);
  }
  // Every rank receives the whole d(sum) (the forward's all-reduce is an identity on the gradient): each keeps the
  // rows of its vocabulary slice; the replicated tables take every row.
  kernels::embedding_backward(store_.grad(word_), d, saved.tokens, vocab_offset_);
  if (!spec_.position_name.empty()) kernels::embedding_backward(store_.grad(position_), d, saved.positions, 0);
  if (!spec_.token_type_name.empty()) kernels::embedding_backward(store_.grad(token_type_), d, saved.types, 0);
}

}  // namespace lmforge::layers
