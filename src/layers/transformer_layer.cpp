// defines: TransformerLayer (pre-/post-LN forward, backward through one residual-gradient buffer, decoding)
#include "layers/transformer_layer.h"

#include "util/error.h"

namespace lmforge::layers {

using kernels::Tensor;

TransformerLayer::TransformerLayer(ParameterStore& store, const TensorParallel& tp, Workspace& workspace,
                                   TransformerLayerSpec spec)
    : workspace_(workspace),
      spec_(std::move(spec)),
      backend_(store.backend()),
      drop_attention_(spec_.hidden_dropout, spec_.layer, DropoutSite::ATTENTION_OUT),
      drop_cross_(spec_.hidden_dropout, spec_.layer, DropoutSite::CROSS_OUT),
      drop_mlp_(spec_.hidden_dropout, spec_.layer, DropoutSite::MLP_OUT) {
  // Parameters in Hugging Face's state_dict order: pre-LN GPT-2 has ln_1, attn, ln_2, mlp; post-LN BERT has
  // attention (its output LayerNorm last), then the MLP and its LayerNorm.
  const int64_t C = spec_.hidden;
  const float eps = spec_.layernorm_eps;
  if (spec_.pre_layernorm) ln1_ = std::make_unique<LayerNorm>(store, spec_.ln1, C, eps);
  attention_ = std::make_unique<Attention>(store, tp, workspace_, spec_.attention);
  if (!spec_.pre_layernorm) ln1_ = std::make_unique<LayerNorm>(store, spec_.ln1, C, eps);
  if (spec_.cross_attention) {
    if (spec_.pre_layernorm) ln_cross_ = std::make_unique<LayerNorm>(store, spec_.ln_cross, C, eps);
    cross_ = std::make_unique<Attention>(store, tp, workspace_, *spec_.cross_attention);
    if (!spec_.pre_layernorm) ln_cross_ = std::make_unique<LayerNorm>(store, spec_.ln_cross, C, eps);
  }
  if (spec_.pre_layernorm) ln2_ = std::make_unique<LayerNorm>(store, spec_.ln2, C, eps);
  mlp_ = std::make_unique<Mlp>(store, tp, workspace_, spec_.mlp);
  if (!spec_.pre_layernorm) ln2_ = std::make_unique<LayerNorm>(store, spec_.ln2, C, eps);
}

TransformerLayer::~TransformerLayer() = default;

void TransformerLayer::join(const Tensor& out, const Tensor& x, const Tensor& branch, const Dropout& dropout,
                            const ForwardStep& step) {
  if (dropout.active(step)) {
    const Tensor dropped = workspace_.take(Slot::DROPPED, {branch.dim(0), branch.dim(1)});
    dropout.forward(dropped, branch, step);
    kernels::add_forward(out, x, dropped);
  } else {
    kernels::add_forward(out, x, branch);
  }
}

Tensor TransformerLayer::branch_grad(const Tensor& d, const Dropout& dropout, const ForwardStep& step) {
  if (!dropout.active(step)) return d;
  const Tensor g = workspace_.take(Slot::D_BRANCH, {d.dim(0), d.dim(1)}, true);
  dropout.backward(g, d, step);
  return g;
}

Tensor TransformerLayer::forward(const Tensor& x, const LayerInputs& in, const ForwardStep& step, Saved& sv) {
  const int B = in.B, T = in.T, Tk = in.Tk;
  const Tensor &key_padding = in.key_padding, &memory = in.memory, &memory_padding = in.memory_padding;
  const int64_t N = (int64_t)B * T, C = spec_.hidden;
  if (cross_ && !memory.present()) throw std::logic_error("decoder layer without encoder memory");
  sv.N = N;
  sv.x = x;
  sv.memory = memory;
  sv.step = step;
  auto buffer = [&](kernels::Buffer& b) { return sized(backend_, b, workspace_.dtype(), N, C); };
  const Tensor n1 = buffer(sv.normed1), h1 = buffer(sv.h1), n2 = buffer(sv.normed2), out = buffer(sv.out);
  Tensor branch = workspace_.take(Slot::BRANCH_OUT, {N, C});
  Tensor cur;
  if (spec_.pre_layernorm) {
    ln1_->forward(n1, x, sv.ln1);
    attention_->forward(branch, n1, Tensor{}, key_padding, B, T, T, step, sv.attention);
    join(h1, x, branch, drop_attention_, step);
    cur = h1;
    if (cross_) {
      const Tensor nc = buffer(sv.normed_cross), h2 = buffer(sv.h2);
      ln_cross_->forward(nc, h1, sv.ln_cross);
      cross_->forward(branch, nc, memory, memory_padding, B, T, Tk, step, sv.cross);
      join(h2, h1, branch, drop_cross_, step);
      cur = h2;
    }
    ln2_->forward(n2, cur, sv.ln2);
    mlp_->forward(branch, n2, sv.mlp);
    join(out, cur, branch, drop_mlp_, step);
    return out;
  }
  // Post-LN: the normed* buffers hold the residual sums that the LayerNorms normalise.
  attention_->forward(branch, x, Tensor{}, key_padding, B, T, T, step, sv.attention);
  join(n1, x, branch, drop_attention_, step);
  ln1_->forward(h1, n1, sv.ln1);
  cur = h1;
  if (cross_) {
    const Tensor sc = buffer(sv.normed_cross), h2 = buffer(sv.h2);
    cross_->forward(branch, h1, memory, memory_padding, B, T, Tk, step, sv.cross);
    join(sc, h1, branch, drop_cross_, step);
    ln_cross_->forward(h2, sc, sv.ln_cross);
    cur = h2;
  }
  mlp_->forward(branch, cur, sv.mlp);
  join(n2, cur, branch, drop_mlp_, step);
  ln2_->forward(out, n2, sv.ln2);
  return out;
}

void TransformerLayer::backward(const Tensor& d, const Tensor& dmemory, Saved& sv) {
  const int64_t N = sv.N, C = spec_.hidden;
  const ForwardStep& step = sv.step;
  const Tensor n1 = sv.normed1.view({N, C}), h1 = sv.h1.view({N, C}), n2 = sv.normed2.view({N, C});
  const Tensor cur = cross_ ? sv.h2.view({N, C}) : h1;
  if (spec_.pre_layernorm) {
    // y = cur + drop(mlp(ln2(cur))): d(cur) = d + ln2ᵀ(mlpᵀ(dropᵀ d)), accumulated into d itself.
    Tensor g = branch_grad(d, drop_mlp_, step);
    Tensor dn = workspace_.take(Slot::D_NORMED, {N, C}, true);
    mlp_->backward(dn, g, sv.mlp);
    ln2_->backward(d, dn, cur, sv.ln2);
    if (cross_) {
      g = branch_grad(d, drop_cross_, step);
      dn = workspace_.take(Slot::D_NORMED, {N, C}, true);
      cross_->backward(dn, dmemory, g, sv.cross);
      ln_cross_->backward(d, dn, h1, sv.ln_cross);
    }
    g = branch_grad(d, drop_attention_, step);
    dn = workspace_.take(Slot::D_NORMED, {N, C}, true);
    attention_->backward(dn, Tensor{}, g, sv.attention);
    ln1_->backward(d, dn, sv.x, sv.ln1);
    return;
  }
  // Post-LN: y = ln2(s2), s2 = cur + drop(mlp(cur)): d(s2) = ln2ᵀ d; d(cur) = d(s2) + mlpᵀ(dropᵀ d(s2)).
  Tensor ds = workspace_.take(Slot::D_RESIDUAL, {N, C}, true);
  ln2_->backward(ds, d, n2, sv.ln2);
  kernels::copy(d, ds);
  mlp_->backward(d, branch_grad(ds, drop_mlp_, step), sv.mlp);
  if (cross_) {
    ds = workspace_.take(Slot::D_RESIDUAL, {N, C}, true);
    ln_cross_->backward(ds, d, sv.normed_cross.view({N, C}), sv.ln_cross);
    kernels::copy(d, ds);
    cross_->backward(d, dmemory, branch_grad(ds, drop_cross_, step), sv.cross);
  }
  ds = workspace_.take(Slot::D_RESIDUAL, {N, C}, true);
  ln1_->backward(ds, d, n1, sv.ln1);
  kernels::copy(d, ds);
  attention_->backward(d, Tensor{}, branch_grad(ds, drop_attention_, step), sv.attention);
}

void TransformerLayer::decode_begin(int B, int max_len) {
  if (cross_)
    throw Error("key/value-cache decoding of an encoder-decoder layer needs the encoder's output (the memory)");
  attention_->decode_begin(B, max_len);
  dec_normed_.resize(backend_, workspace_.dtype(), (size_t)B * spec_.hidden);
  dec_branch_.resize(backend_, workspace_.dtype(), (size_t)B * spec_.hidden);
}

void TransformerLayer::decode_begin(int B, int max_len, const Tensor& memory, int Tk) {
  if (!cross_) throw std::logic_error("decode_begin with memory on a layer without cross-attention");
  attention_->decode_begin(B, max_len);
  cross_->decode_begin_cross(memory, B, Tk);
  dec_normed_.resize(backend_, kernels::DType::F32, (size_t)B * spec_.hidden);
  dec_branch_.resize(backend_, kernels::DType::F32, (size_t)B * spec_.hidden);
}

// The forward's equations on one position per row (dropout off), the residual stream updated in x.
void TransformerLayer::decode_step(const Tensor& x, int pos) {
  const int64_t B = x.rows(), C = spec_.hidden;
  const Tensor n = dec_normed_.view({B, C}), br = dec_branch_.view({B, C});
  if (spec_.pre_layernorm) {
    ln1_->forward(n, x);
    attention_->decode_forward(br, n, pos);
    kernels::add_forward(x, x, br);
    if (cross_) {
      ln_cross_->forward(n, x);
      cross_->decode_forward(br, n, pos);
      kernels::add_forward(x, x, br);
    }
    ln2_->forward(n, x);
    mlp_->forward(br, n);
    kernels::add_forward(x, x, br);
    return;
  }
  attention_->decode_forward(br, x, pos);
  kernels::add_forward(n, x, br);
  ln1_->forward(x, n);
  if (cross_) {
    cross_->decode_forward(br, x, pos);
    kernels::add_forward(n, x, br);
    ln_cross_->forward(x, n);
  }
  mlp_->forward(br, x);
  kernels::add_forward(n, x, br);
  ln2_->forward(x, n);
}

}  // namespace lmforge::layers
