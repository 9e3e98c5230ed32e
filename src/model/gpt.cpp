// defines: GPTConfig::validate and the GPT model (composition of layers, forward, backward,
//          decoding)
#include "model/gpt.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "model/stage_init.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;

void GPTConfig::validate() const {
  const ConfigCheck check("GPT");
  check.positive({{"num_layers", num_layers}, {"hidden size", hidden}, {"number of attention heads", heads}});
  check.heads_divide(hidden, heads);
  check.positive({{"max_positions", max_positions}});
  if (seq_length < 1 || seq_length > max_positions)
    check.fail("seq_length " + std::to_string(seq_length) + " must be in [1, max_positions = " +
               std::to_string(max_positions) + "]");
  check.positive({{"vocab_size", vocab_size}, {"make_vocab_size_divisible_by", make_vocab_size_divisible_by}});
  check.numbers(vocab_size, make_vocab_size_divisible_by, layernorm_eps, init_std);
  // Shared fields GPT-2 fixes (TransformerConfig): a 4·hidden MLP and LayerNorm eps 1e-5 (gpt_hf_config).
  if (ffn() != 4 * hidden)
    check.fail("ffn_hidden " + std::to_string(ffn_hidden) + ": GPT-2's MLP is 4·hidden = " + std::to_string(4 * hidden));
  if (layernorm_eps != 1e-5f) check.fail("layernorm_eps must be 1e-5 (GPT-2's LayerNorm)");
  check.dropouts(hidden_dropout, attention_dropout);
  if (loss_chunk_rows < 0) check.fail("loss_chunk_rows must be >= 0 (got " + std::to_string(loss_chunk_rows) + ")");
  try {
    recompute.validate(num_layers);
  } catch (const Error& e) {
    check.fail(e.what());
  }
}

namespace {

struct GptParts {
  std::unique_ptr<layers::Embedding> embedding;
  std::vector<std::unique_ptr<layers::TransformerLayer>> layers;
  std::vector<size_t> layer_first;
  std::unique_ptr<layers::LayerNorm> ln_f;
  std::unique_ptr<layers::LmHead> head;
};

// GPT-2 out of layers, adding the parameters in Hugging Face's order and names; a pipeline stage adds only its own.
GptParts build(const GPTConfig& c, layers::ParameterStore& store, const layers::TensorParallel& tp,
               layers::Workspace& workspace, const Stage& stage = {}) {
  check_tensor_parallel_fits(tp.size(), c.padded_vocab_size(), c.heads, 4 * c.hidden);
  stage.check("GPT", c.num_layers);
  const int64_t C = c.hidden;
  const double out_std = c.init_std / std::sqrt(2.0 * c.num_layers);
  GptParts p;
  layers::EmbeddingSpec e;
  e.word_name = "transformer.wte";
  e.position_name = "transformer.wpe";
  e.padded_vocab = c.padded_vocab_size();
  e.max_positions = c.max_positions;
  e.hidden = C;
  e.init_std = c.init_std;
  e.dropout = c.hidden_dropout;
  size_t word = 0;  // the word table the tied head reads
  if (stage.pre_process) {
    p.embedding = std::make_unique<layers::Embedding>(store, tp, e);
    word = p.embedding->word_index();
  } else if (stage.post_process) {
    word = add_tied_word_copy(store, e);
  }
  // Layer numbers are the whole model's (dropout streams and names), so a stage draws one process's masks.
  for (int l = stage.first_layer; l < stage.end_layer(c.num_layers); l++) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    layers::TransformerLayerSpec s;
    s.layer = l + 1;  // 0 is the embedding's dropout
    s.hidden = C;
    s.pre_layernorm = true;
    s.layernorm_eps = 1e-5f;
    s.ln1 = h + "ln_1";
    s.ln2 = h + "ln_2";
    s.attention.name = h + "attn";
    s.attention.fused_qkv = true;
    s.attention.hidden = C;
    s.attention.heads = c.heads;
    s.attention.layout = kernels::WeightLayout::IN_OUT;
    s.attention.causal = true;
    s.attention.init_std = c.init_std;
    s.attention.out_init_std = out_std;
    s.attention.attention_dropout = c.attention_dropout;
    s.attention.layer = l + 1;
    s.attention.recompute_core = c.recompute.selective();
    s.mlp.fc = h + "mlp.c_fc";
    s.mlp.proj = h + "mlp.c_proj";
    s.mlp.hidden = C;
    s.mlp.ffn = 4 * C;
    s.mlp.layout = kernels::WeightLayout::IN_OUT;
    s.mlp.gelu = kernels::GeluKind::TANH;
    s.mlp.init_std = c.init_std;
    s.mlp.out_init_std = out_std;
    s.hidden_dropout = c.hidden_dropout;
    p.layer_first.push_back(store.table().size());
    p.layers.push_back(std::make_unique<layers::TransformerLayer>(store, tp, workspace, s));
  }
  if (!stage.post_process) return p;
  p.ln_f = std::make_unique<layers::LayerNorm>(store, "transformer.ln_f", C, 1e-5f);
  // The LM head: logits = x·wteᵀ over this rank's vocabulary rows, no bias, every position predicted.
  layers::LmHeadSpec head;
  head.name = "lm_head";
  head.hidden = C;
  head.padded_vocab = c.padded_vocab_size();
  head.word = word;
  head.chunk_rows = c.loss_chunk_rows;
  p.head = std::make_unique<layers::LmHead>(store, tp, workspace, head);
  return p;
}

}  // namespace

GPT::GPT(const GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel, Stage stage)
    : LanguageModel(backend, tensor_parallel), config_(config), stage_(stage) {
  config_.validate();
  GptParts p = build(config_, store_, tp_, workspace_, stage_);
  embedding_ = std::move(p.embedding);
  // Recomputation over this stage's layers (Megatron: a pipeline stage's transformer chunks its own layers).
  stack_ = layers::TransformerStack(std::move(p.layers), config_.recompute);
  layer_first_ = std::move(p.layer_first);
  ln_f_ = std::move(p.ln_f);
  head_ = std::move(p.head);
  store_.allocate();
}

GPT::~GPT() = default;

param::ParamTable GPT::parameter_table(const GPTConfig& config) {
  config.validate();
  return build_whole_model([&](auto&... a) { return build(config, a...); },
                           [](const layers::ParameterStore& whole) { return whole.table(); });
}

void GPT::init_weights(uint64_t seed) {
  init_stage_weights(seed, stage_.whole(config_.num_layers), [&](auto&... a) { return build(config_, a...); });
}

void GPT::require_whole(const char* what) const {
  if (!stage_.whole(config_.num_layers))
    throw Error(std::string("GPT ") + what + ": this is one pipeline stage, not the whole model");
}

Tensor GPT::forward_body(const int32_t* tokens, const float* input, int B, int T, const layers::ForwardStep& step,
                         Activations& a) {
  if (B < 1 || T < 1) throw Error("GPT forward: batch and sequence sizes must be >= 1");
  if (T > config_.max_positions)
    throw Error("GPT forward: sequence length " + std::to_string(T) + " exceeds max_positions " +
                std::to_string(config_.max_positions));
  const int64_t N = (int64_t)B * T, C = config_.hidden;
  kernels::Backend& be = backend();
  a.B = B;
  a.T = T;
  Tensor x;
  if (stage_.pre_process) {
    check_ids(tokens, (size_t)N, config_.vocab_size, "GPT forward", "token");
    const Tensor ids = upload_ids(a.tokens, tokens, (size_t)N);
    if (a.positions.count() != (size_t)N || a.positions_T != T) {  // positions n mod T, made once per shape
      std::vector<int32_t> pos((size_t)N);
      for (int64_t n = 0; n < N; n++) pos[(size_t)n] = (int32_t)(n % T);
      upload_ids(a.positions, pos.data(), pos.size());
      a.positions_T = T;
    }
    x = embedding_->forward(ids, a.positions.view({N}), Tensor{}, step, a.embedding);
  } else {
    x = layers::sized(be, a.input, kernels::DType::F32, N, C);
    be.copy_to_device(x.data, input, (size_t)(N * C) * sizeof(float));
    if (store_.activation_dtype() != kernels::DType::F32) {  // the layers read the activation dtype
      const Tensor act = layers::sized(be, a.input_act, store_.activation_dtype(), N, C);
      kernels::copy(act, x);
      x = act;
    }
  }
  a.body_out = x = stack_.forward(x, {B, T, {}, {}, {}, 0}, step, a.stack);
  if (!stage_.post_process) return x;
  const Tensor normed = layers::sized(be, a.normed, store_.activation_dtype(), N, C);
  ln_f_->forward(normed, x, a.ln_f);
  return normed;
}

float GPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T, const layers::ForwardStep* step) {
  require_whole("forward");
  return forward_stage(tokens, nullptr, targets, B, T, step);
}

float GPT::forward_stage(const int32_t* tokens, const float* input, const int32_t* targets, int B, int T,
                         const layers::ForwardStep* step, size_t slot) {
  Activations& a = activation_slot(slots_, slot);
  a.have_targets = false;
  a.have_forward = false;
  const int64_t N = (int64_t)B * T;
  if (stage_.post_process && B >= 1 && T >= 1) check_ids(targets, (size_t)N, config_.vocab_size, "GPT forward", "target");
  const Tensor normed = forward_body(tokens, input, B, T, step ? *step : layers::ForwardStep{}, a);
  a.have_forward = true;
  if (!stage_.post_process) {
    stage_out_ = stage_to_f32(a.body_out);
    return 0.0f;
  }
  // Logits in the activation dtype (bf16 under --bf16, as Megatron's), over chunks of rows (LmHeadSpec).
  const double sum = head_->forward(normed, targets, nullptr, a.head);
  a.have_targets = true;
  return (float)(sum / (double)N);
}

const float* GPT::logits() const {
  const Tensor l = head_ && !slots_.empty() ? head_->logits(slots_[0]->head) : Tensor{};
  return l.present() ? l.f32("GPT logits") : nullptr;
}

void GPT::backward(float loss_scale) {
  require_whole("backward");
  backward_stage(nullptr, loss_scale);
}

void GPT::backward_stage(const float* output_grad, float loss_scale, size_t slot) {
  Activations* ap = slot < slots_.size() ? slots_[slot].get() : nullptr;
  if (!ap || (stage_.post_process ? !ap->have_targets : !ap->have_forward))
    throw Error("GPT backward: no forward() with targets precedes it (or backward already ran)");
  Activations& a = *ap;
  a.have_targets = a.have_forward = false;
  const int64_t N = (int64_t)a.B * a.T, C = config_.hidden;
  kernels::Backend& be = backend();
  // d_residual carries the gradient of the residual stream down through the layers (in place, see
  // TransformerLayer::backward).
  const Tensor d = layers::sized(be, d_residual_, store_.activation_dtype(), N, C);
  if (stage_.post_process) {
    // Mean over N positions: each row's loss has weight loss_scale/N.
    const Tensor d_normed = workspace_.take(layers::Slot::D_NORMED, {N, C}, true);
    head_->backward(d_normed, loss_scale / (float)N, a.head);
    d_residual_.zero();
    ln_f_->backward(d, d_normed, a.body_out, a.ln_f);
    if (ready_hook_) ready_hook_(tensor("transformer.ln_f.weight").offset);  // ln_f, the last tensors of the table
  } else {
    // The next stage's d(loss)/d(output) already carries loss_scale (fp32: converted to the activation dtype).
    if (d.dtype == kernels::DType::F32) {
      be.copy_to_device(d.data, output_grad, (size_t)(N * C) * sizeof(float));
    } else {
      const Tensor g = layers::sized(be, stage_f32_, kernels::DType::F32, N, C);
      be.copy_to_device(g.data, output_grad, (size_t)(N * C) * sizeof(float));
      kernels::copy(d, g);
    }
  }
  stack_.backward(d, Tensor{}, a.stack, [&](size_t l) {
    if (ready_hook_) ready_hook_(table()[layer_first_[l]].offset);  // layer l and everything after it
  });
  if (embedding_) embedding_->backward(d, a.embedding);  // otherwise d now holds d(loss)/d(input): input_grad()
  else input_grad_ = stage_to_f32(d);
  if (ready_hook_) ready_hook_(0);
}

Tensor GPT::stage_to_f32(const Tensor& t) {
  if (t.dtype == kernels::DType::F32) return t;
  const Tensor f = layers::sized(backend(), stage_f32_, kernels::DType::F32, t.rows(), t.dim(-1));
  kernels::copy(f, t);
  return f;
}

const float* GPT::forward_logits(const int32_t* tokens, int B, int T) {
  require_whole("forward_logits");
  Activations& a = activation_slot(slots_, 0);
  a.have_targets = a.have_forward = false;
  const Tensor normed = forward_body(tokens, nullptr, B, T, layers::ForwardStep{}, a);
  const int64_t C = config_.hidden, Vl = head_->local_vocab();
  kernels::Backend& be = backend();
  // The last position of each row, gathered as a lookup of rows b·T + T − 1 of the final hidden states.
  std::vector<int32_t> rows((size_t)B);
  for (int b = 0; b < B; b++) rows[(size_t)b] = (int32_t)((int64_t)b * T + T - 1);
  last_rows_.resize(be, kernels::DType::I32, (size_t)B);
  be.copy_to_device(last_rows_.data(), rows.data(), rows.size() * sizeof(int32_t));
  last_.resize(be, store_.activation_dtype(), (size_t)B * C);
  kernels::embedding_forward(last_.view({B, C}), last_rows_.view({B}), normed, 0, false);
  last_logits_.resize(be, kernels::DType::F32, (size_t)(B * Vl));
  head_->logits(last_logits_.view({B, Vl}), last_.view({B, C}));
  return last_logits_.f32();
}

void GPT::decode_begin(int B) {
  require_whole("decoding");
  if (B < 1) throw Error("GPT decode: batch size must be >= 1");
  for (auto& layer : stack_.layers()) layer->decode_begin(B, config_.max_positions);
  decode_B_ = B;
  decode_pos_ = 0;
}

const float* GPT::decode_step(const int32_t* tokens) {
  if (decode_B_ == 0) throw Error("GPT decode: decode_begin() must come first");
  if (decode_pos_ >= config_.max_positions)
    throw Error("GPT decode: the sequence is already max_positions = " + std::to_string(config_.max_positions) +
                " long");
  if (!slots_.empty()) slots_[0]->have_targets = false;
  // Position decode_pos_ of every row: the embedding, each layer over its cache, ln_f and the head on B rows.
  const float* logits = decode_next(tokens, decode_B_, decode_pos_, config_.vocab_size, "GPT decode",
                                    *embedding_, stack_, *ln_f_, *head_);
  decode_pos_++;
  return logits;
}

double GPT::training_flops(int B, int T) const {
  const double C = config_.hidden, L = config_.num_layers, Vp = config_.padded_vocab_size();
  const double matrix_params = L * 12.0 * C * C + Vp * C;
  return (double)B * T * (6.0 * matrix_params + 12.0 * L * C * T);
}

}  // namespace lmforge::model
