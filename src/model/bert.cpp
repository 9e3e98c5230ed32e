// defines: BertConfig::validate and the Bert model (composition of layers, forward with
//          Megatron's losses, backward)
#include "model/bert.h"

#include <cmath>
#include <limits>

#include "model/stage_init.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;

void BertConfig::validate() const {
  const ConfigCheck check("BERT");
  check.positive({{"num_layers", num_layers}, {"hidden size", hidden}, {"number of attention heads", heads},
                  {"max_positions", max_positions}, {"vocab_size", vocab_size},
                  {"make_vocab_size_divisible_by", make_vocab_size_divisible_by},
                  {"type_vocab_size", type_vocab_size}});
  check.ffn_hidden(ffn_hidden);
  check.heads_divide(hidden, heads);
  if (seq_length < 1 || seq_length > max_positions)
    check.fail("seq_length " + std::to_string(seq_length) + " must be in [1, max_positions = " +
               std::to_string(max_positions) + "]");
  check.numbers(vocab_size, make_vocab_size_divisible_by, layernorm_eps, init_std);
  check.dropouts(hidden_dropout, attention_dropout);
  try {
    recompute.validate(num_layers);
  } catch (const Error& e) {
    check.fail(e.what());
  }
}

namespace {

struct BertParts {
  std::unique_ptr<layers::Embedding> embedding;
  std::unique_ptr<layers::LayerNorm> ln_embedding;
  std::vector<std::unique_ptr<layers::TransformerLayer>> layers;
  std::vector<size_t> layer_first;
  size_t after_layers = 0;
  std::unique_ptr<layers::LayerNorm> ln_final;
  std::unique_ptr<layers::Linear> pooler, binary;
  std::unique_ptr<layers::LmHead> head;
};

layers::LinearSpec replicated(const std::string& name, int64_t in, int64_t out, double std) {
  layers::LinearSpec s;
  s.name = name;
  s.in = in;
  s.out = out;
  s.layout = kernels::WeightLayout::OUT_IN;
  s.parallelism = layers::Parallelism::REPLICATED;
  s.init_std = std;
  return s;
}

layers::TransformerLayerSpec layer_spec(const BertConfig& c, int l) {
  const std::string h = "bert.encoder.layer." + std::to_string(l) + ".";
  const bool post = c.post_layernorm;
  // Megatron scales the output projections' init by 1/√(2L); Google/HF/DLE's original BERT does not.
  const double out_std = post ? c.init_std : c.init_std / std::sqrt(2.0 * c.num_layers);
  layers::TransformerLayerSpec s;
  s.layer = l + 1;  // 0 is the embedding's dropout
  s.hidden = c.hidden;
  s.pre_layernorm = !post;
  s.layernorm_eps = c.layernorm_eps;
  s.ln1 = post ? h + "attention.output.LayerNorm" : h + "attention.ln";
  s.ln2 = post ? h + "output.LayerNorm" : h + "ln";
  s.attention.name = h + "attention.self";
  s.attention.fused_qkv = false;
  s.attention.q = "query";
  s.attention.k = "key";
  s.attention.v = "value";
  s.attention.out = h + "attention.output.dense";
  s.attention.out_is_full_name = true;
  s.attention.hidden = c.hidden;
  s.attention.heads = c.heads;
  s.attention.layout = kernels::WeightLayout::OUT_IN;
  s.attention.causal = false;
  s.attention.init_std = c.init_std;
  s.attention.out_init_std = out_std;
  s.attention.attention_dropout = c.attention_dropout;
  s.attention.layer = l + 1;
  s.attention.recompute_core = c.recompute.selective();
  s.mlp.fc = h + "intermediate.dense";
  s.mlp.proj = h + "output.dense";
  s.mlp.hidden = c.hidden;
  s.mlp.ffn = c.ffn();
  s.mlp.layout = kernels::WeightLayout::OUT_IN;
  s.mlp.gelu = c.mlp_gelu;
  s.mlp.init_std = c.init_std;
  s.mlp.out_init_std = out_std;
  s.hidden_dropout = c.hidden_dropout;
  return s;
}

// BERT out of layers, adding the parameters in Hugging Face's state_dict order and names; a pipeline stage adds
// only its own (see BertStage).
BertParts build(const BertConfig& c, layers::ParameterStore& store, const layers::TensorParallel& tp,
            layers::Workspace& workspace, const Stage& stage = {}) {
  check_tensor_parallel_fits(tp.size(), c.padded_vocab_size(), c.heads, c.ffn());
  const int64_t H = c.hidden;
  BertParts p;
  layers::EmbeddingSpec e;
  e.word_name = "bert.embeddings.word_embeddings";
  e.position_name = "bert.embeddings.position_embeddings";
  if (c.uses_token_types()) e.token_type_name = "bert.embeddings.token_type_embeddings";
  e.padded_vocab = c.padded_vocab_size();
  e.max_positions = c.max_positions;
  e.token_types = c.type_vocab_size;
  e.hidden = H;
  e.init_std = c.init_std;
  e.dropout = c.post_layernorm ? 0.0f : c.hidden_dropout;  // original BERT: dropout after the embedding LayerNorm
  size_t word = 0;  // the word table the tied decoder reads
  if (stage.pre_process) {
    p.embedding = std::make_unique<layers::Embedding>(store, tp, e);
    word = p.embedding->word_index();
    if (!c.uses_token_types())  // zero and unused: what HF's MegatronBert adds (row 0) must be nothing (§1.5)
      store.add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}, false,
                layers::Init::zeros());
    if (c.post_layernorm)
      p.ln_embedding = std::make_unique<layers::LayerNorm>(store, "bert.embeddings.LayerNorm", H, c.layernorm_eps);
  } else if (stage.post_process) {
    word = add_tied_word_copy(store, e);
  }
  const int first = stage.first_layer, end = stage.num_layers < 0 ? c.num_layers : first + stage.num_layers;
  if (first < 0 || end > c.num_layers || first >= end)
    throw Error("BERT stage: layers [" + std::to_string(first) + ", " + std::to_string(end) + ") of " +
                std::to_string(c.num_layers));
  for (int l = first; l < end; l++) {  // the whole model's layer numbers: names and dropout streams
    p.layer_first.push_back(store.table().size());
    p.layers.push_back(std::make_unique<layers::TransformerLayer>(store, tp, workspace, layer_spec(c, l)));
  }
  p.after_layers = store.table().size();
  if (!stage.post_process) return p;
  if (!c.post_layernorm)
    p.ln_final = std::make_unique<layers::LayerNorm>(store, "bert.encoder.ln", H, c.layernorm_eps);
  if (c.binary_head)
    p.pooler = std::make_unique<layers::Linear>(store, tp, workspace,
                                                replicated("bert.pooler.dense", H, H, c.init_std));
  // The masked-LM head (Megatron's BertLMHead): transform (dense, GELU, LayerNorm), then the word embedding itself
  // as the decoder (tied, vocabulary-parallel) with its own bias split like the vocabulary; HF's state_dict lists
  // that bias (cls.predictions.bias) before the transform. Only the masked positions go through it (Megatron
  // computes all B·T rows of logits, here only the ~15 % masked ones: BERT-base, seq 128, the [512 × 768]·[768 ×
  // 30592] decoder product and its two backward products, a fifth of the step, shrink to a seventh of that).
  layers::LmHeadSpec head;
  head.name = "cls.predictions.decoder";
  head.bias_name = "cls.predictions.bias";
  head.hidden = H;
  head.padded_vocab = c.padded_vocab_size();
  head.word = word;
  head.transform_name = "cls.predictions.transform.dense";
  head.transform_layernorm_name = "cls.predictions.transform.LayerNorm";
  head.transform_gelu = c.head_gelu;
  head.layernorm_eps = c.layernorm_eps;
  head.init_std = c.init_std;
  head.masked_rows_only = true;
  head.logits_in_activation_dtype = false;
  p.head = std::make_unique<layers::LmHead>(store, tp, workspace, head);
  if (c.binary_head)
    p.binary = std::make_unique<layers::Linear>(store, tp, workspace,
                                                replicated("cls.seq_relationship", H, 2, c.init_std));
  return p;
}

}  // namespace

Bert::Bert(const BertConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel, Stage stage)
    : LanguageModel(backend, tensor_parallel),
      config_(config),
      stage_(stage),
      drop_embedding_(config.hidden_dropout, 0, layers::DropoutSite::EMBEDDING) {
  config_.validate();
  BertParts p = build(config_, store_, tp_, workspace_, stage_);
  embedding_ = std::move(p.embedding);
  ln_embedding_ = std::move(p.ln_embedding);
  stack_ = layers::TransformerStack(std::move(p.layers), config_.recompute);  // this stage's layers
  layer_first_ = std::move(p.layer_first);
  after_layers_ = p.after_layers;
  ln_final_ = std::move(p.ln_final);
  head_ = std::move(p.head);
  if (p.pooler)
    binary_ = std::make_unique<layers::ClassificationHead>(std::move(p.pooler), std::move(p.binary), backend);
  store_.allocate();
}

Bert::~Bert() = default;

void Bert::init_weights(uint64_t seed) {
  init_stage_weights(seed, stage_.whole(config_.num_layers), [&](auto&... a) { return build(config_, a...); });
}

param::ParamTable Bert::parameter_table(const BertConfig& config) {
  config.validate();
  return build_whole_model([&](auto&... a) { return build(config, a...); },
                           [](const layers::ParameterStore& whole) { return whole.table(); });
}

void Bert::check_inputs(const BertInputs& in) const {
  auto fail = [](const std::string& msg) { throw Error("BERT forward: " + msg); };
  if (in.B < 1 || in.T < 1) fail("batch and sequence sizes must be >= 1");
  if (in.T > config_.max_positions)
    fail("sequence length " + std::to_string(in.T) + " exceeds max_positions " +
         std::to_string(config_.max_positions));
  if (!in.tokens || !in.labels || !in.loss_mask) fail("tokens, labels and loss_mask are required");
  if (config_.binary_head && !in.is_random) fail("the binary head needs is_random (the sentence-order labels)");
  const size_t N = (size_t)in.B * in.T;
  const int V = config_.vocab_size;
  check_ids(in.tokens, N, V, "BERT forward", "token");
  for (size_t i = 0; i < N; i++) {
    if (in.labels[i] < -1 || in.labels[i] >= V)
      fail("label " + std::to_string(in.labels[i]) + " at position " + std::to_string(i) + " is outside [-1, " +
           std::to_string(V) + ")");
    if (in.labels[i] < 0 && in.loss_mask[i] != 0.0f)
      fail("position " + std::to_string(i) + " has loss mask " + std::to_string(in.loss_mask[i]) + " but no label");
    if (config_.uses_token_types() && in.types && (in.types[i] < 0 || in.types[i] >= config_.type_vocab_size))
      fail("token type " + std::to_string(in.types[i]) + " at position " + std::to_string(i) + " is outside [0, " +
           std::to_string(config_.type_vocab_size) + ")");
    if (in.padding && in.padding[i] != 0 && in.padding[i] != 1)
      fail("padding mask value " + std::to_string(in.padding[i]) + " at position " + std::to_string(i) +
           " is not 0 or 1");
  }
  if (config_.binary_head)
    for (int b = 0; b < in.B; b++)
      if (in.is_random[b] < -1 || in.is_random[b] > 1)
        fail("is_random " + std::to_string(in.is_random[b]) + " of row " + std::to_string(b) + " is not 0, 1 or -1");
}

namespace {

Tensor buffer(kernels::Backend& be, kernels::Buffer& buf, kernels::DType dtype, int64_t rows, int64_t cols) {
  return layers::sized(be, buf, dtype, rows, cols);
}

Tensor f32(kernels::Backend& be, kernels::Buffer& buf, int64_t rows, int64_t cols) {
  return layers::sized(be, buf, kernels::DType::F32, rows, cols);
}

}  // namespace

BertLosses Bert::forward(const BertInputs& in, const layers::ForwardStep* step) {
  if (!stage_.whole(config_.num_layers)) throw Error("BERT forward: this is one pipeline stage, not the whole model");
  return forward_stage(in, nullptr, step);
}

// Embedding (original BERT: LayerNorm, then dropout) on the first stage; a later stage's input as it came.
// Activations are in the compute dtype (bf16/f16 under mixed precision); pipeline stages exchange fp32.
Tensor Bert::embed_or_input(const BertInputs& in, const float* input, const layers::ForwardStep& step,
                            Activations& a) {
  const int64_t N = (int64_t)in.B * in.T, H = config_.hidden;
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  if (!stage_.pre_process) {  // copied: the layers keep views of their inputs until the backward
    const Tensor x = f32(be, a.input, N, H);
    be.copy_to_device(x.data, input, (size_t)(N * H) * sizeof(float));
    if (act == kernels::DType::F32) return x;
    const Tensor x_act = buffer(be, a.input_act, act, N, H);  // the layers read the activation dtype
    kernels::copy(x_act, x);
    return x_act;
  }
  const Tensor tokens = upload_ids(a.tokens, in.tokens, (size_t)N);
  std::vector<int32_t> host((size_t)N);
  for (int64_t n = 0; n < N; n++) host[(size_t)n] = (int32_t)(n % in.T);
  const Tensor positions = upload_ids(a.positions, host.data(), (size_t)N);
  Tensor types;
  if (config_.uses_token_types()) {
    if (!in.types) host.assign((size_t)N, 0);
    types = upload_ids(a.types, in.types ? in.types : host.data(), (size_t)N);
  }
  Tensor x = embedding_->forward(tokens, positions, types, step, a.embedding);
  a.embedded = x;
  a.emb_dropped = false;
  if (ln_embedding_) {
    const Tensor normed = buffer(be, a.emb_normed, act, N, H);
    ln_embedding_->forward(normed, x, a.ln_embedding);
    x = normed;
    if (drop_embedding_.active(step)) {
      const Tensor out = buffer(be, a.emb_out, act, N, H);
      drop_embedding_.forward(out, normed, step);
      x = out;
      a.emb_dropped = true;
    }
  }
  return x;
}

BertLosses Bert::forward_stage(const BertInputs& in, const float* input, const layers::ForwardStep* step_ptr,
                               size_t slot) {
  Activations& a = activation_slot(slots_, slot);
  a.have_forward = false;
  check_inputs(in);
  const layers::ForwardStep step = step_ptr ? *step_ptr : layers::ForwardStep{};
  const int B = in.B, T = in.T;
  a.B = B, a.T = T;
  a.step = step;
  const Tensor padding = in.padding ? upload_ids(a.padding, in.padding, (size_t)B * T).reshaped({B, T}) : Tensor{};
  // The embedding (or the previous stage's output), this stage's layers (with the chosen recomputation), then on
  // the last stage the heads.
  Tensor x = embed_or_input(in, input, step, a);
  a.body_out = x = stack_.forward(x, {B, T, padding, {}, {}, 0}, step, a.stack);
  BertLosses losses;
  if (stage_.post_process) losses = heads_forward(in, x, a);
  else kernels::copy(stage_out_ = f32(backend(), stage_out_buf_, (int64_t)B * T, config_.hidden), x);  // for the next stage
  a.have_forward = true;
  return losses;
}

// The final LayerNorm (Megatron), the masked-LM head and the binary head over the last layer's output x.
BertLosses Bert::heads_forward(const BertInputs& in, const Tensor& x, Activations& a) {
  const int B = in.B, T = in.T;
  const int64_t N = (int64_t)B * T, H = config_.hidden;
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  Tensor final_out = x;
  if (ln_final_) {
    final_out = buffer(be, a.final_out, act, N, H);
    ln_final_->forward(final_out, x, a.ln_final);
  }
  BertLosses losses;
  losses.lm = lm_head_forward(final_out, in, a);

  // The pooler (tanh of a dense layer over position 0) and the 2-class binary head, CE averaged over the labelled
  // rows; its small tensors in fp32.
  if (binary_) losses.sop = binary_->forward(final_out, B, T, in.is_random, a.binary);
  return losses;
}

// lm = Σ mask·CE / Σ mask over the masked-LM head's rows (0/0 = NaN when nothing is masked, as in Megatron).
double Bert::lm_head_forward(const Tensor& final_out, const BertInputs& in, Activations& a) {
  const int64_t N = (int64_t)in.B * in.T;
  a.mask_sum = 0.0;
  for (int64_t n = 0; n < N; n++) a.mask_sum += (double)in.loss_mask[n];
  const double masked_ce = head_->forward(final_out, in.labels, in.loss_mask, a.head);
  return masked_ce / a.mask_sum;
}

void Bert::backward(float loss_scale) {
  if (!stage_.whole(config_.num_layers)) throw Error("BERT backward: this is one pipeline stage, not the whole model");
  backward_stage(nullptr, loss_scale);
}

void Bert::backward_stage(const float* output_grad, float loss_scale, size_t slot) {
  if (slot >= slots_.size() || !slots_[slot]->have_forward)
    throw Error("BERT backward: no forward() precedes it (or backward already ran)");
  Activations& a = *slots_[slot];
  a.have_forward = false;
  const int64_t N = (int64_t)a.B * a.T, H = config_.hidden;
  kernels::Backend& be = backend();
  d_final_.resize(be, store_.activation_dtype(), (size_t)(N * H));
  const Tensor d_final = d_final_.view({N, H});
  // d carries the residual stream's gradient down through the layers (in place, see TransformerLayer::backward).
  Tensor d = d_final;
  if (stage_.post_process) {
    d_final_.zero();
    // d(lm)/d(CE_i) = loss_mask_i / Σ loss_mask
    if (a.mask_sum > 0.0) head_->backward(d_final, (float)((double)loss_scale / a.mask_sum), a.head);
    if (binary_) binary_->backward(d_final, loss_scale, a.binary);
    if (ln_final_) {
      d_residual_.resize(be, store_.activation_dtype(), (size_t)(N * H));
      d_residual_.zero();
      d = d_residual_.view({N, H});
      ln_final_->backward(d, d_final, a.body_out, a.ln_final);
    }
    if (ready_hook_) ready_hook_(table()[after_layers_].offset);  // the heads and the final LayerNorm
  } else {  // the next stage's d(loss)/d(output), fp32, already carries loss_scale
    const Tensor g = f32(be, d_output_, N, H);
    be.copy_to_device(g.data, output_grad, (size_t)(N * H) * sizeof(float));
    kernels::copy(d_final, g);
  }
  stack_.backward(d, Tensor{}, a.stack, [&](size_t l) {
    if (ready_hook_) ready_hook_(table()[layer_first_[l]].offset);
  });
  if (embedding_) {
    embedding_backward(d, a);
  } else {
    kernels::copy(input_grad_ = f32(be, d_input_, N, H), d);  // d(loss)/d(input), fp32 for the previous stage
  }
  if (ready_hook_) ready_hook_(0);
}

void Bert::embedding_backward(Tensor d, Activations& a) {
  const int64_t N = (int64_t)a.B * a.T, H = config_.hidden;
  kernels::Backend& be = backend();
  if (ln_embedding_) {
    Tensor g = d;
    if (a.emb_dropped) {
      d_emb_.resize(be, store_.activation_dtype(), (size_t)(N * H));
      d_emb_.zero();
      g = d_emb_.view({N, H});
      drop_embedding_.backward(g, d, a.step);
    }
    d_emb_sum_.resize(be, store_.activation_dtype(), (size_t)(N * H));
    d_emb_sum_.zero();
    const Tensor ds = d_emb_sum_.view({N, H});
    ln_embedding_->backward(ds, g, a.embedded, a.ln_embedding);
    d = ds;
  }
  embedding_->backward(d, a.embedding);
}

double Bert::training_flops(int B, int T) const {
  const double H = config_.hidden, L = config_.num_layers, F = config_.ffn(), Vp = config_.padded_vocab_size();
  const double matrix_params = L * (4.0 * H * H + 2.0 * H * F) + H * H + Vp * H;
  return (double)B * T * (6.0 * matrix_params + 12.0 * L * H * T);
}

}  // namespace lmforge::model
