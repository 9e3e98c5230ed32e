// defines: GPTConfig::validate/padded_vocab_size and the GPT model (composition of layers, forward, backward,
//          decoding)
#include "model/gpt.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;

int GPTConfig::padded_vocab_size() const {
  const int64_t m = make_vocab_size_divisible_by;
  return (int)((vocab_size + m - 1) / m * m);
}

void GPTConfig::validate() const {
  auto fail = [](const std::string& msg) { throw Error("invalid GPT config: " + msg); };
  if (num_layers < 1) fail("num_layers must be >= 1 (got " + std::to_string(num_layers) + ")");
  if (hidden < 1) fail("hidden size must be >= 1 (got " + std::to_string(hidden) + ")");
  if (heads < 1) fail("number of attention heads must be >= 1 (got " + std::to_string(heads) + ")");
  if (hidden % heads != 0)
    fail("hidden size " + std::to_string(hidden) + " is not divisible by the number of attention heads " +
         std::to_string(heads));
  if (max_positions < 1) fail("max_positions must be >= 1 (got " + std::to_string(max_positions) + ")");
  if (seq_length < 1 || seq_length > max_positions)
    fail("seq_length " + std::to_string(seq_length) + " must be in [1, max_positions = " +
         std::to_string(max_positions) + "]");
  if (vocab_size < 1) fail("vocab_size must be >= 1 (got " + std::to_string(vocab_size) + ")");
  if (make_vocab_size_divisible_by < 1)
    fail("make_vocab_size_divisible_by must be >= 1 (got " + std::to_string(make_vocab_size_divisible_by) + ")");
  if ((int64_t)vocab_size + make_vocab_size_divisible_by > INT32_MAX) fail("vocab_size too large");
  if (!(init_std > 0.0f) || !std::isfinite(init_std))
    fail("init_std must be a positive number (got " + std::to_string(init_std) + ")");
  if (!(hidden_dropout >= 0.0f && hidden_dropout < 1.0f))
    fail("hidden dropout must be in [0, 1) (got " + std::to_string(hidden_dropout) + ")");
  if (!(attention_dropout >= 0.0f && attention_dropout < 1.0f))
    fail("attention dropout must be in [0, 1) (got " + std::to_string(attention_dropout) + ")");
  if (!recompute_granularity.empty() && recompute_granularity != "full" && recompute_granularity != "selective")
    fail("recompute granularity must be full or selective (got " + recompute_granularity + ")");
  if (recompute_method != "uniform" && recompute_method != "block")
    fail("recompute method must be uniform or block (got " + recompute_method + ")");
  if (loss_chunk_rows < 0) fail("loss_chunk_rows must be >= 0 (got " + std::to_string(loss_chunk_rows) + ")");
  if (recompute_num_layers < 1 || recompute_num_layers > num_layers)
    fail("recompute num layers must be in [1, num_layers = " + std::to_string(num_layers) + "] (got " +
         std::to_string(recompute_num_layers) + ")");
}

namespace {

struct GptParts {
  std::unique_ptr<layers::Embedding> embedding;
  std::vector<std::unique_ptr<layers::TransformerLayer>> layers;
  std::vector<size_t> layer_first;
  std::unique_ptr<layers::LayerNorm> ln_f;
  std::unique_ptr<layers::Linear> head;
};

// GPT-2 out of layers, adding the parameters in Hugging Face's order and names.
GptParts build(const GPTConfig& c, layers::ParameterStore& store, const layers::TensorParallel& tp,
            layers::Workspace& workspace, const GPTStage& stage = {}) {
  const int T = tp.size();
  if (c.padded_vocab_size() % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide the padded vocabulary " +
                std::to_string(c.padded_vocab_size()) + " (use --make-vocab-size-divisible-by a multiple of it)");
  if ((4 * c.hidden) % T != 0 || c.heads % T != 0)
    throw Error("--tensor-model-parallel-size " + std::to_string(T) + " does not divide --num-attention-heads " +
                std::to_string(c.heads) + " (each rank takes whole heads)");
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
    // The last stage's copy of the tied table, added as the embedding adds it (same name, shape and split).
    word = store.add(e.word_name + ".weight", {e.padded_vocab, e.hidden}, true, layers::Init::normal(e.init_std),
                     /*split_dim=*/0);
  }
  const int first = stage.first_layer, end = stage.num_layers < 0 ? c.num_layers : first + stage.num_layers;
  if (first < 0 || end > c.num_layers || first >= end)
    throw Error("GPT stage: layers [" + std::to_string(first) + ", " + std::to_string(end) + ") of " +
                std::to_string(c.num_layers));
  // Layer numbers are the whole model's (dropout streams and names), so a stage draws one process's masks.
  for (int l = first; l < end; l++) {
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
    s.attention.recompute_core = c.recompute_granularity == "selective";
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
  // The LM head: logits = x·wteᵀ over this rank's vocabulary rows (column-parallel over the tied table).
  layers::LinearSpec head;
  head.name = "lm_head";
  head.in = C;
  head.out = c.padded_vocab_size();
  head.layout = kernels::WeightLayout::OUT_IN;
  head.bias = false;
  head.parallelism = layers::Parallelism::COLUMN;
  head.tied_weight = (int64_t)word;
  p.head = std::make_unique<layers::Linear>(store, tp, workspace, head);
  return p;
}

}  // namespace

GPT::GPT(const GPTConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel, GPTStage stage)
    : config_(config),
      stage_(stage),
      tp_(tensor_parallel),
      store_(backend, tp_.rank(), tp_.size()),
      workspace_(backend),
      loss_(tp_, backend) {
  config_.validate();
  GptParts p = build(config_, store_, tp_, workspace_, stage_);
  embedding_ = std::move(p.embedding);
  layers_ = std::move(p.layers);
  layer_first_ = std::move(p.layer_first);
  ln_f_ = std::move(p.ln_f);
  head_ = std::move(p.head);
  store_.allocate();
  chunks_ = make_chunks();
}

std::vector<GPT::Chunk> GPT::make_chunks() const {
  std::vector<Chunk> chunks;
  if (config_.recompute_granularity != "full") return chunks;
  // Over this stage's layers (Megatron: a pipeline stage's transformer chunks its own layers).
  const int L = (int)layers_.size(), n = config_.recompute_num_layers;
  if (config_.recompute_method == "uniform") {
    for (int a = 0; a < L; a += n) chunks.push_back({a, std::min(a + n, L), {}, {}});
  } else {
    for (int a = 0; a < std::min(n, L); a++) chunks.push_back({a, a + 1, {}, {}});
  }
  return chunks;
}

GPT::~GPT() = default;

param::ParamTable GPT::parameter_table(const GPTConfig& config) {
  config.validate();
  layers::TensorParallel tp;
  layers::ParameterStore store(kernels::cpu_backend(), 0, 1);
  layers::Workspace workspace(kernels::cpu_backend());
  GptParts p = build(config, store, tp, workspace);
  return store.table();
}

// A stage initialises its tensors from the whole model's stream: the draws of the tensors it lacks are discarded
// (the whole model is built as a table only, no buffers).
void GPT::init_weights(uint64_t seed) {
  if (stage_.whole(config_)) return store_.init(seed);
  layers::TensorParallel one;
  layers::ParameterStore whole(kernels::cpu_backend(), 0, 1);
  layers::Workspace workspace(kernels::cpu_backend());
  GptParts p = build(config_, whole, one, workspace);
  std::vector<uint64_t> discard(table().size(), 0);
  uint64_t skipped = 0;
  size_t next = 0;  // the stage's tensors appear in the whole table in the same order
  for (size_t i = 0; i < whole.table().size(); i++) {
    if (next < table().size() && whole.table()[i].name == table()[next].name) {
      discard[next++] = skipped;
      skipped = 0;
    } else {
      skipped += whole.stream_draws(i);
    }
  }
  if (next != table().size()) throw std::logic_error("GPT stage: tensors out of the whole model's order");
  store_.init(seed, discard);
}

void GPT::require_whole(const char* what) const {
  if (!stage_.whole(config_))
    throw Error(std::string("GPT ") + what + ": this is one pipeline stage, not the whole model");
}

void GPT::set_compute_dtype(kernels::DType dtype) {
  store_.set_compute_dtype(dtype);
  workspace_.set_dtype(store_.activation_dtype());
}

void GPT::check_ids(const int32_t* ids, size_t n, const char* what) const {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      throw Error(std::string("GPT forward: ") + what + " id " + std::to_string(ids[i]) + " at position " +
                  std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
}

Tensor GPT::forward_body(const int32_t* tokens, const float* input, int B, int T, const layers::ForwardStep& step) {
  if (B < 1 || T < 1) throw Error("GPT forward: batch and sequence sizes must be >= 1");
  if (T > config_.max_positions)
    throw Error("GPT forward: sequence length " + std::to_string(T) + " exceeds max_positions " +
                std::to_string(config_.max_positions));
  const int64_t N = (int64_t)B * T, C = config_.hidden;
  kernels::Backend& be = backend();
  B_ = B;
  T_ = T;
  step_ = step;
  Tensor x;
  if (stage_.pre_process) {
    check_ids(tokens, (size_t)N, "token");
    tokens_.resize(be, kernels::DType::I32, (size_t)N);
    be.copy_to_device(tokens_.data(), tokens, (size_t)N * sizeof(int32_t));
    if (positions_.count() != (size_t)N || positions_T_ != T) {
      std::vector<int32_t> pos((size_t)N);
      for (int64_t n = 0; n < N; n++) pos[(size_t)n] = (int32_t)(n % T);
      positions_.resize(be, kernels::DType::I32, (size_t)N);
      be.copy_to_device(positions_.data(), pos.data(), pos.size() * sizeof(int32_t));
      positions_T_ = T;
    }
    x = embedding_->forward(tokens_.view({N}), positions_.view({N}), Tensor{}, step);
  } else {
    input_.resize(be, kernels::DType::F32, (size_t)(N * C));
    be.copy_to_device(input_.data(), input, (size_t)(N * C) * sizeof(float));
    x = input_.view({N, C});
    if (store_.activation_dtype() != kernels::DType::F32) {  // the layers read the activation dtype
      input_act_.resize(be, store_.activation_dtype(), (size_t)(N * C));
      kernels::copy(input_act_.view({N, C}), x);
      x = input_act_.view({N, C});
    }
  }
  size_t c = 0;  // the next recomputed chunk
  for (int l = 0; l < (int)layers_.size(); l++) {
    if (c < chunks_.size() && l == chunks_[c].begin) chunks_[c].input = x;
    x = layers_[(size_t)l]->forward(x, Tensor{}, Tensor{}, Tensor{}, B, T, 0, step);
    if (c < chunks_.size() && l + 1 == chunks_[c].end) {
      // Keep only the chunk's output (the next layer's input); its layers run again in the backward.
      Chunk& k = chunks_[c++];
      k.output.resize(be, x.dtype, (size_t)(N * C));
      kernels::copy(k.output.view({N, C}), x);
      for (int i = k.begin; i < k.end; i++) layers_[(size_t)i]->release_activations();
      x = k.output.view({N, C});
    }
  }
  body_out_ = x;
  if (!stage_.post_process) return x;
  normed_.resize(be, store_.activation_dtype(), (size_t)(N * C));
  const Tensor normed = normed_.view({N, C});
  ln_f_->forward(normed, x);
  return normed;
}

float GPT::forward(const int32_t* tokens, const int32_t* targets, int B, int T, const layers::ForwardStep* step) {
  require_whole("forward");
  return forward_stage(tokens, nullptr, targets, B, T, step);
}

float GPT::forward_stage(const int32_t* tokens, const float* input, const int32_t* targets, int B, int T,
                         const layers::ForwardStep* step) {
  have_targets_ = false;
  have_forward_ = false;
  const int64_t N = (int64_t)B * T;
  if (stage_.post_process && B >= 1 && T >= 1) check_ids(targets, (size_t)N, "target");
  const Tensor normed = forward_body(tokens, input, B, T, step ? *step : layers::ForwardStep{});
  have_forward_ = true;
  if (!stage_.post_process) {
    stage_to_f32(body_out_);
    return 0.0f;
  }
  kernels::Backend& be = backend();
  targets_.resize(be, kernels::DType::I32, (size_t)N);
  be.copy_to_device(targets_.data(), targets, (size_t)N * sizeof(int32_t));
  // This rank's vocabulary rows start where its piece of the (row-split) word table starts.
  const int64_t vocab_offset = (int64_t)config_.padded_vocab_size() / tp_.size() * tp_.rank();
  const int64_t Vl = head_->local_out(), rows = loss_chunk_rows(N);
  // Logits in the activation dtype (bf16 under --bf16, as Megatron's): the head's GEMM writes them rounded, the
  // cross-entropy reads them into fp32 statistics and writes dlogits in place in the same dtype, which the head's
  // backward GEMMs then take as they are (no fp32 copy of a [rows, vocab] matrix).
  logits_.resize(be, store_.activation_dtype(), (size_t)(rows * Vl));
  // The loss of each row depends on its logits only, so chunks of rows give the same per-row losses.
  double sum = 0.0;
  loss_chunks_ = 0;
  for (int64_t r0 = 0; r0 < N; r0 += rows, loss_chunks_++) {
    const int64_t n = std::min(rows, N - r0);
    const Tensor logits = logits_.view({n, Vl});
    head_->forward(logits, normed.slice0(r0, n));
    sum += loss_.forward(logits, targets_.view({N}).slice0(r0, n), nullptr, vocab_offset);
  }
  have_targets_ = true;
  return (float)(sum / (double)N);
}

void GPT::backward(float loss_scale) {
  require_whole("backward");
  backward_stage(nullptr, loss_scale);
}

void GPT::backward_stage(const float* output_grad, float loss_scale) {
  if (stage_.post_process ? !have_targets_ : !have_forward_)
    throw Error("GPT backward: no forward() with targets precedes it (or backward already ran)");
  have_targets_ = have_forward_ = false;
  const int64_t N = (int64_t)B_ * T_, C = config_.hidden;
  kernels::Backend& be = backend();
  // d_residual carries the gradient of the residual stream down through the layers (in place, see
  // TransformerLayer::backward).
  d_residual_.resize(be, store_.activation_dtype(), (size_t)(N * C));
  const Tensor d = d_residual_.view({N, C});
  if (stage_.post_process) {
    const int64_t Vl = head_->local_out();
    const int64_t vocab_offset = (int64_t)config_.padded_vocab_size() / tp_.size() * tp_.rank();
    const Tensor d_normed = workspace_.take(layers::Slot::D_NORMED, {N, C}, true);
    const Tensor normed = normed_.view({N, C});
    const int64_t rows = loss_chunks_ == 1 ? N : loss_chunk_rows(N);
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      const Tensor logits = logits_.view({n, Vl});
      if (loss_chunks_ > 1) {  // the chunk's logits and loss statistics again (the forward dropped them)
        head_->forward(logits, normed.slice0(r0, n));
        loss_.forward(logits, targets_.view({N}).slice0(r0, n), nullptr, vocab_offset);
      }
      // Mean over N positions: each row's loss has weight loss_scale/N. dlogits overwrite the logits in place.
      loss_.backward(logits, loss_scale / (float)N);
      head_->backward(d_normed.slice0(r0, n), logits, normed.slice0(r0, n));
    }
    d_residual_.zero();
    ln_f_->backward(d, d_normed, body_out_);
    if (ready_hook_) ready_hook_(tensor("transformer.ln_f.weight").offset);  // ln_f, the last tensors of the table
  } else {
    // The next stage's d(loss)/d(output) already carries loss_scale (fp32: converted to the activation dtype).
    if (d.dtype == kernels::DType::F32) {
      be.copy_to_device(d_residual_.data(), output_grad, (size_t)(N * C) * sizeof(float));
    } else {
      stage_f32_.resize(be, kernels::DType::F32, (size_t)(N * C));
      be.copy_to_device(stage_f32_.data(), output_grad, (size_t)(N * C) * sizeof(float));
      kernels::copy(d, stage_f32_.view({N, C}));
    }
  }
  size_t c = chunks_.size();  // recomputed chunks, walked from the last
  for (size_t l = layers_.size(); l-- > 0;) {
    if (c > 0 && (int)l + 1 == chunks_[c - 1].end) {
      // Full recomputation: the chunk's forward again from its kept input, with the same step (dropout masks).
      const Chunk& k = chunks_[--c];
      Tensor x = k.input;
      for (int i = k.begin; i < k.end; i++)
        x = layers_[(size_t)i]->forward(x, Tensor{}, Tensor{}, Tensor{}, B_, T_, 0, step_);
    }
    backward_layer(l);
    if (c < chunks_.size() && (int)l == chunks_[c].begin)
      for (int i = chunks_[c].begin; i < chunks_[c].end; i++) layers_[(size_t)i]->release_activations();
  }
  if (embedding_) embedding_->backward(d);  // otherwise d now holds d(loss)/d(input): input_grad()
  else stage_to_f32(d);
  if (ready_hook_) ready_hook_(0);
}

void GPT::stage_to_f32(const Tensor& t) {
  if (t.dtype == kernels::DType::F32) {
    stage_f32_ = kernels::Buffer();
    return;
  }
  const int64_t N = t.rows(), C = t.dim(-1);
  stage_f32_.resize(backend(), kernels::DType::F32, (size_t)(N * C));
  kernels::copy(stage_f32_.view({N, C}), t);
}

int64_t GPT::loss_chunk_rows(int64_t N) const {
  if (config_.loss_chunk_rows > 0) return std::min<int64_t>(config_.loss_chunk_rows, N);
  const int64_t Vl = head_->local_out();
  return std::clamp<int64_t>(GPTConfig::kLossChunkLogits / Vl, 1, N);
}

void GPT::backward_layer(size_t l) {
  layers_[l]->backward(d_residual_.view({(int64_t)B_ * T_, config_.hidden}), Tensor{});
  if (ready_hook_) ready_hook_(table()[layer_first_[l]].offset);  // layer l and everything after it
}

const float* GPT::forward_logits(const int32_t* tokens, int B, int T) {
  require_whole("forward_logits");
  have_targets_ = false;
  forward_body(tokens, nullptr, B, T, layers::ForwardStep{});
  const int64_t C = config_.hidden, Vl = head_->local_out();
  kernels::Backend& be = backend();
  last_.resize(be, store_.activation_dtype(), (size_t)B * C);
  const size_t row = (size_t)C * kernels::dtype_size(store_.activation_dtype());
  for (int b = 0; b < B; b++)
    be.copy_on_device(static_cast<char*>(last_.data()) + (size_t)b * row,
                      static_cast<const char*>(normed_.data()) + ((size_t)b * T + T - 1) * row, row);
  last_logits_.resize(be, kernels::DType::F32, (size_t)(B * Vl));
  head_->forward(last_logits_.view({B, Vl}), last_.view({B, C}));
  return last_logits_.f32();
}

void GPT::decode_begin(int B) {
  require_whole("decoding");
  if (B < 1) throw Error("GPT decode: batch size must be >= 1");
  for (auto& layer : layers_) layer->decode_begin(B, config_.max_positions);
  decode_B_ = B;
  decode_pos_ = 0;
}

const float* GPT::decode_step(const int32_t* tokens) {
  if (decode_B_ == 0) throw Error("GPT decode: decode_begin() must come first");
  if (decode_pos_ >= config_.max_positions)
    throw Error("GPT decode: the sequence is already max_positions = " + std::to_string(config_.max_positions) +
                " long");
  const int B = decode_B_;
  const int64_t C = config_.hidden, Vl = head_->local_out();
  check_ids(tokens, (size_t)B, "token");
  have_targets_ = false;
  kernels::Backend& be = backend();
  // Position decode_pos_ of every row: the embedding, each layer over its cache, ln_f and the head on B rows.
  tokens_.resize(be, kernels::DType::I32, (size_t)B);
  be.copy_to_device(tokens_.data(), tokens, (size_t)B * sizeof(int32_t));
  const std::vector<int32_t> pos((size_t)B, decode_pos_);
  positions_.resize(be, kernels::DType::I32, (size_t)B);
  be.copy_to_device(positions_.data(), pos.data(), pos.size() * sizeof(int32_t));
  T_ = positions_T_ = 0;  // the positions buffer no longer holds a training sequence's
  const Tensor x = embedding_->forward(tokens_.view({B}), positions_.view({B}), Tensor{}, layers::ForwardStep{});
  for (auto& layer : layers_) layer->decode_step(x, decode_pos_);
  last_.resize(be, store_.activation_dtype(), (size_t)B * C);
  ln_f_->forward(last_.view({B, C}), x);
  last_logits_.resize(be, kernels::DType::F32, (size_t)(B * Vl));
  head_->forward(last_logits_.view({B, Vl}), last_.view({B, C}));
  decode_pos_++;
  return last_logits_.f32();
}

double GPT::training_flops(int B, int T) const {
  const double C = config_.hidden, L = config_.num_layers, Vp = config_.padded_vocab_size();
  const double matrix_params = L * 12.0 * C * C + Vp * C;
  return (double)B * T * (6.0 * matrix_params + 12.0 * L * C * T);
}

}  // namespace lmforge::model
