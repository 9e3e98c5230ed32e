// defines: T5Config::validate and the T5 model (composition of layers, forward, backward)
#include "model/t5.h"

#include <cmath>

#include "model/stage_init.h"
#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;
using layers::sized;

void T5Config::validate() const {
  const ConfigCheck check("T5");
  check.positive({{"encoder_num_layers", encoder_num_layers}, {"decoder layers", decoder_layers()},
                  {"hidden size", hidden}, {"number of attention heads", heads}, {"max_positions", max_positions},
                  {"encoder_seq_length", encoder_seq_length}, {"decoder_seq_length", decoder_seq_length},
                  {"vocab_size", vocab_size}, {"make_vocab_size_divisible_by", make_vocab_size_divisible_by}});
  if (decoder_num_layers < 0) check.fail("decoder_num_layers must be >= 0 (0: the encoder's)");
  check.ffn_hidden(ffn_hidden);
  check.heads_divide(hidden, heads);
  if (encoder_seq_length > max_positions || decoder_seq_length > max_positions)
    check.fail("encoder_seq_length " + std::to_string(encoder_seq_length) + " and decoder_seq_length " +
               std::to_string(decoder_seq_length) + " must not exceed max_positions " +
               std::to_string(max_positions) + " (one position table serves both)");
  check.numbers(vocab_size, make_vocab_size_divisible_by, layernorm_eps, init_std);
  check.dropouts(hidden_dropout, attention_dropout);
  try {
    recompute.validate(std::min(encoder_num_layers, decoder_layers()));
  } catch (const Error& e) {
    check.fail(std::string(e.what()) + " (each of the encoder and decoder stacks)");
  }
}

namespace {

struct T5Parts {
  std::unique_ptr<layers::Embedding> embedding;
  std::vector<std::unique_ptr<layers::TransformerLayer>> encoder, decoder;
  std::vector<size_t> encoder_first, decoder_first;
  std::unique_ptr<layers::LayerNorm> encoder_norm, decoder_norm;
  std::unique_ptr<layers::LmHead> head;
};

layers::AttentionSpec self_attention(const T5Config& c, const std::string& prefix, bool causal, int layer,
                                     double out_std) {
  layers::AttentionSpec a;
  a.name = prefix + "self_attention";
  a.fused_qkv = true;
  a.qkv_per_head = true;  // Megatron's [head][q|k|v][d] rows
  a.qkv = "query_key_value";
  a.out = "dense";
  a.hidden = c.hidden;
  a.heads = c.heads;
  a.layout = kernels::WeightLayout::OUT_IN;
  a.causal = causal;
  a.init_std = c.init_std;
  a.out_init_std = out_std;
  a.attention_dropout = c.attention_dropout;
  a.layer = layer;
  a.recompute_core = c.recompute.selective();
  return a;
}

layers::TransformerLayerSpec layer_spec(const T5Config& c, const std::string& prefix, bool decoder, int layer) {
  // Megatron scales every output projection by 1/√(2·L) with L the ENCODER's layer count, in both stacks.
  const double out_std = c.init_std / std::sqrt(2.0 * c.encoder_num_layers);
  layers::TransformerLayerSpec s;
  s.layer = layer;
  s.hidden = c.hidden;
  s.pre_layernorm = true;
  s.layernorm_eps = c.layernorm_eps;
  s.ln1 = prefix + "input_norm";
  s.attention = self_attention(c, prefix, decoder, layer, out_std);
  if (decoder) {
    s.ln_cross = prefix + "post_attention_norm";
    s.ln2 = prefix + "post_inter_attention_norm";
    layers::AttentionSpec x;
    x.name = prefix + "inter_attention";
    x.cross = true;
    x.causal = false;
    x.fused_qkv = false;
    x.fused_kv = true;  // key_value [2H,H], rows [head][k|v][d]
    x.q = "query";
    x.kv = "key_value";
    x.out = "dense";
    x.hidden = c.hidden;
    x.heads = c.heads;
    x.layout = kernels::WeightLayout::OUT_IN;
    x.init_std = c.init_std;
    x.out_init_std = out_std;
    x.attention_dropout = c.attention_dropout;
    x.layer = layer;
    x.recompute_core = c.recompute.selective();
    s.cross_attention = x;
  } else {
    s.ln2 = prefix + "post_attention_norm";
  }
  s.mlp.fc = prefix + "mlp.dense_h_to_4h";
  s.mlp.proj = prefix + "mlp.dense_4h_to_h";
  s.mlp.hidden = c.hidden;
  s.mlp.ffn = c.ffn();
  s.mlp.layout = kernels::WeightLayout::OUT_IN;
  s.mlp.gelu = c.gelu;
  s.mlp.init_std = c.init_std;
  s.mlp.out_init_std = out_std;
  s.hidden_dropout = c.hidden_dropout;
  return s;
}


// The encoder's layers [first, end) and the decoder's a stage holds (stack-local numbers; empty ranges when none).
struct StageLayers {
  int enc_first, enc_end, dec_first, dec_end;
};
StageLayers stage_layers(const T5Config& c, const Stage& st) {
  st.check("T5", c.encoder_num_layers + c.decoder_layers());
  const int Le = c.encoder_num_layers, first = st.first_layer, end = st.end_layer(Le + c.decoder_layers());
  return {std::min(first, Le), std::min(end, Le), std::max(first, Le) - Le, std::max(end, Le) - Le};
}

// T5 out of layers in Megatron's state_dict order; a pipeline stage adds only its own tensors (see Stage in t5.h).
T5Parts build(const T5Config& c, layers::ParameterStore& store, const layers::TensorParallel& tp,
              layers::Workspace& workspace, const Stage& st = {}) {
  check_tensor_parallel_fits(tp.size(), c.padded_vocab_size(), c.heads, c.ffn());
  const StageLayers sl = stage_layers(c, st);
  const bool encoder_lookup = sl.enc_first == 0 && sl.enc_end > 0;
  const bool decoder_lookup = sl.dec_first == 0 && sl.dec_end > 0;
  const bool head = sl.dec_end == c.decoder_layers();
  T5Parts p;
  layers::EmbeddingSpec e;
  e.word_name = "language_model.embedding.word_embeddings";
  e.position_name = "language_model.embedding.position_embeddings";
  e.padded_vocab = c.padded_vocab_size();
  e.max_positions = c.max_positions;
  e.hidden = c.hidden;
  e.init_std = c.init_std;
  e.dropout = c.hidden_dropout;
  size_t word = 0;  // the word table the tied head reads
  if (encoder_lookup || decoder_lookup) {
    p.embedding = std::make_unique<layers::Embedding>(store, tp, e);
    word = p.embedding->word_index();
  } else if (head) {
    word = add_tied_word_copy(store, e);
  }
  // Dropout streams: layer 0 the embedding, 1..Le the encoder, Le+1..Le+Ld the decoder (the whole model's numbers
  // on every stage).
  for (int l = sl.enc_first; l < sl.enc_end; l++) {
    p.encoder_first.push_back(store.table().size());
    p.encoder.push_back(std::make_unique<layers::TransformerLayer>(
        store, tp, workspace,
        layer_spec(c, "language_model.encoder.layers." + std::to_string(l) + ".", false, l + 1)));
  }
  if (sl.enc_end == c.encoder_num_layers && sl.enc_first < sl.enc_end)
    p.encoder_norm =
        std::make_unique<layers::LayerNorm>(store, "language_model.encoder.final_norm", c.hidden, c.layernorm_eps);
  for (int l = sl.dec_first; l < sl.dec_end; l++) {
    p.decoder_first.push_back(store.table().size());
    p.decoder.push_back(std::make_unique<layers::TransformerLayer>(
        store, tp, workspace,
        layer_spec(c, "language_model.decoder.layers." + std::to_string(l) + ".", true,
                   c.encoder_num_layers + l + 1)));
  }
  if (!head) return p;
  p.decoder_norm =
      std::make_unique<layers::LayerNorm>(store, "language_model.decoder.final_norm", c.hidden, c.layernorm_eps);
  // logits = dec_out·Eᵀ + b over the masked decoder rows (the others add neither loss nor gradient), in fp32.
  layers::LmHeadSpec h;
  h.name = "lm_head";
  h.bias_name = "lm_head.bias";
  h.hidden = c.hidden;
  h.padded_vocab = c.padded_vocab_size();
  h.word = word;
  h.masked_rows_only = true;
  h.logits_in_activation_dtype = false;
  p.head = std::make_unique<layers::LmHead>(store, tp, workspace, h);
  return p;
}

}  // namespace

T5::T5(const T5Config& config, kernels::Backend& backend, dist::Communicator* tensor_parallel, Stage stage)
    : LanguageModel(backend, tensor_parallel), config_(config), stage_(stage) {
  config_.validate();
  T5Parts p = build(config_, store_, tp_, workspace_, stage_);
  const StageLayers sl = stage_layers(config_, stage_);
  encoder_lookup_ = sl.enc_first == 0 && sl.enc_end > 0;
  decoder_lookup_ = sl.dec_first == 0 && sl.dec_end > 0;
  encoder_norm_held_ = p.encoder_norm != nullptr;
  head_held_ = p.head != nullptr;
  embedding_ = std::move(p.embedding);
  encoder_ = layers::TransformerStack(std::move(p.encoder), config_.recompute);
  decoder_ = layers::TransformerStack(std::move(p.decoder), config_.recompute);
  encoder_first_ = std::move(p.encoder_first);
  decoder_first_ = std::move(p.decoder_first);
  encoder_norm_ = std::move(p.encoder_norm);
  decoder_norm_ = std::move(p.decoder_norm);
  head_ = std::move(p.head);
  store_.allocate();
}

T5::~T5() = default;

void T5::init_weights(uint64_t seed) {
  init_stage_weights(seed, whole(), [&](auto&... a) { return build(config_, a...); });
}

void T5::require_whole(const char* what) const {
  if (!whole()) throw Error(std::string("T5 ") + what + ": this is one pipeline stage, not the whole model");
}

param::ParamTable T5::parameter_table(const T5Config& config) {
  config.validate();
  return build_whole_model([&](auto&... a) { return build(config, a...); },
                           [](const layers::ParameterStore& whole) { return whole.table(); });
}

void T5::check_inputs(const T5Inputs& in, bool need_labels) const {
  auto fail = [](const std::string& msg) { throw Error("T5 forward: " + msg); };
  if (in.B < 1 || in.Te < 1 || in.Td < 1) fail("batch and sequence sizes must be >= 1");
  if (in.Te > config_.max_positions || in.Td > config_.max_positions)
    fail("encoder length " + std::to_string(in.Te) + " / decoder length " + std::to_string(in.Td) +
         " exceed max_positions " + std::to_string(config_.max_positions));
  if (!in.encoder_tokens || !in.decoder_tokens || (need_labels && (!in.labels || !in.loss_mask)))
    fail("encoder and decoder tokens, labels and loss_mask are required");
  const int V = config_.vocab_size;
  auto zero_one = [&](const int32_t* v, size_t n, const char* what) {
    if (v)
      for (size_t i = 0; i < n; i++)
        if (v[i] != 0 && v[i] != 1) fail(std::string(what) + " value at position " + std::to_string(i) + " is not 0/1");
  };
  const size_t Ne = (size_t)in.B * in.Te, Nd = (size_t)in.B * in.Td;
  check_ids(in.encoder_tokens, Ne, V, "T5 forward", "encoder token");
  check_ids(in.decoder_tokens, Nd, V, "T5 forward", "decoder token");
  zero_one(in.encoder_padding, Ne, "encoder padding");
  zero_one(in.decoder_padding, Nd, "decoder padding");
  if (!need_labels) return;
  for (size_t i = 0; i < Nd; i++) {
    if (in.labels[i] < -1 || in.labels[i] >= V)
      fail("label " + std::to_string(in.labels[i]) + " at decoder position " + std::to_string(i) +
           " is outside [-1, " + std::to_string(V) + ")");
    if (in.labels[i] < 0 && in.loss_mask[i] != 0.0f)
      fail("decoder position " + std::to_string(i) + " has a nonzero loss mask but no label");
  }
}

// A stage ending inside the encoder passes [Ne, H], one ending with it the encoder's output [Ne, H], one ending
// inside the decoder [Nd + Ne, H]; a stage's input is what its predecessor passes.
size_t T5::stage_input_elements(int B, int Te, int Td) const {
  if (stage_.pre_process) return 0;
  const size_t Ne = (size_t)B * Te, Nd = (size_t)B * Td, H = (size_t)config_.hidden;
  return (encoder_.empty() && !decoder_lookup_ ? Nd + Ne : Ne) * H;
}

size_t T5::stage_output_elements(int B, int Te, int Td) const {
  if (head_held_) return 0;
  const size_t Ne = (size_t)B * Te, Nd = (size_t)B * Td, H = (size_t)config_.hidden;
  return (decoder_.empty() ? Ne : Nd + Ne) * H;
}

Tensor T5::embed_both(const T5Inputs& in, const layers::ForwardStep& step, Activations& a) {
  const int64_t Ne = (int64_t)in.B * in.Te, Nd = (int64_t)in.B * in.Td;
  std::vector<int32_t> ids((size_t)(Ne + Nd)), pos((size_t)(Ne + Nd));
  std::copy(in.encoder_tokens, in.encoder_tokens + Ne, ids.begin());
  std::copy(in.decoder_tokens, in.decoder_tokens + Nd, ids.begin() + Ne);
  for (int64_t n = 0; n < Ne; n++) pos[(size_t)n] = (int32_t)(n % in.Te);
  for (int64_t n = 0; n < Nd; n++) pos[(size_t)(Ne + n)] = (int32_t)(n % in.Td);
  return embedding_->forward(upload_ids(a.tokens, ids.data(), ids.size()),
                             upload_ids(a.positions, pos.data(), pos.size()), Tensor{}, step, a.embedding);
}

Tensor T5::stage_input(const float* input, int64_t rows, Activations& a) {
  kernels::Backend& be = backend();
  const int64_t H = config_.hidden;
  const Tensor x = sized(be, a.stage_in_f32, kernels::DType::F32, rows, H);
  be.copy_to_device(x.data, input, (size_t)(rows * H) * sizeof(float));
  const kernels::DType act = store_.activation_dtype();
  if (act == kernels::DType::F32) return x;
  const Tensor x_act = sized(be, a.stage_in, act, rows, H);
  kernels::copy(x_act, x);
  return x_act;
}

void T5::forward_body(const T5Inputs& in, const float* input, const layers::ForwardStep& step, Activations& a) {
  decode_B_ = 0;  // a decode session ends here (as documented: forward() ends a decode session)
  const int B = in.B, Te = in.Te, Td = in.Td;
  const int64_t Ne = (int64_t)B * Te, Nd = (int64_t)B * Td, H = config_.hidden;
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  a.B = B, a.Te = Te, a.Td = Td;
  a.enc_pad = a.dec_pad = a.memory = Tensor{};
  if (in.encoder_padding) a.enc_pad = upload_ids(a.enc_padding, in.encoder_padding, (size_t)Ne).reshaped({B, Te});
  if (in.decoder_padding) a.dec_pad = upload_ids(a.dec_padding, in.decoder_padding, (size_t)Nd).reshaped({B, Td});
  // One embedding lookup for both sides (rows [0, Ne) the encoder's tokens, [Ne, Ne+Nd) the decoder's), so the
  // shared table's gradient is one scatter over both on the whole model (Megatron calls the same module twice).
  const Tensor emb = embedding_ ? embed_both(in, step, a) : Tensor{};
  const Tensor x_in =
      stage_.pre_process ? Tensor{} : stage_input(input, (int64_t)stage_input_elements(B, Te, Td) / H, a);
  if (!encoder_.empty()) {
    a.enc_body = encoder_.forward(encoder_lookup_ ? emb.slice0(0, Ne) : x_in, {B, Te, a.enc_pad, {}, {}, 0}, step,
                                  a.encoder);
    if (encoder_norm_held_) {
      a.memory = sized(be, a.enc_out, act, Ne, H);
      encoder_norm_->forward(a.memory, a.enc_body, a.encoder_norm);
    }
  } else {  // the encoder's output came from the previous stage: alone (to the first decoder stage) or after the
            // decoder's rows
    a.memory = decoder_lookup_ ? x_in : x_in.slice0(Nd, Ne);
  }
  if (decoder_.empty()) {
    const Tensor out = stage_out_ = sized(be, stage_out_buf_, kernels::DType::F32, Ne, H);
    kernels::copy(out, encoder_norm_held_ ? a.memory : a.enc_body);
    return;
  }
  // The decoder layers read the encoder's output through a.memory, kept until the backward.
  a.dec_body = decoder_.forward(decoder_lookup_ ? emb.slice0(Ne, Nd) : x_in.slice0(0, Nd),
                                {B, Td, a.dec_pad, a.memory, a.enc_pad, Te}, step, a.decoder);
  if (head_held_) {
    decoder_norm_->forward(sized(be, a.dec_out, act, Nd, H), a.dec_body, a.decoder_norm);
    return;
  }
  const Tensor out = stage_out_ = sized(be, stage_out_buf_, kernels::DType::F32, Nd + Ne, H);  // [decoder | encoder]
  kernels::copy(out.slice0(0, Nd), a.dec_body);
  kernels::copy(out.slice0(Nd, Ne), a.memory);
}

double T5::forward(const T5Inputs& in, const layers::ForwardStep* step) {
  require_whole("forward");
  return forward_stage(in, nullptr, step);
}

double T5::forward_stage(const T5Inputs& in, const float* input, const layers::ForwardStep* step, size_t slot) {
  Activations& a = activation_slot(slots_, slot);
  a.have_forward = false;
  check_inputs(in, head_held_);
  forward_body(in, input, step ? *step : layers::ForwardStep{}, a);
  a.have_forward = true;
  if (!head_held_) return 0.0;
  // lm = Σ CE·mask / Σ mask over the decoder positions (logits = dec_out·Eᵀ + b over this rank's vocabulary).
  const int64_t Nd = (int64_t)in.B * in.Td;
  const double masked = head_->forward(a.dec_out.view({Nd, config_.hidden}), in.labels, in.loss_mask, a.head);
  a.mask_sum = 0.0;
  for (int64_t n = 0; n < Nd; n++) a.mask_sum += (double)in.loss_mask[n];
  return masked / a.mask_sum;  // 0/0 = NaN when nothing is masked, as in Megatron
}

void T5::backward(float loss_scale) {
  require_whole("backward");
  backward_stage(nullptr, loss_scale);
}

// Down the decoder (from the loss, or from what the next stage sent back: the decoder rows' gradient and the
// encoder output's), then the encoder (its output's gradient summed over every cross-attention), to the embedding
// (one scatter for both lookups) or to input_grad().
void T5::backward_stage(const float* output_grad, float loss_scale, size_t slot) {
  if (slot >= slots_.size() || !slots_[slot]->have_forward)
    throw Error("T5 backward: no forward() precedes it (or backward already ran)");
  Activations& a = *slots_[slot];
  a.have_forward = false;
  const int64_t Ne = (int64_t)a.B * a.Te, Nd = (int64_t)a.B * a.Td, H = config_.hidden;
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  // d_all is the gradient of the embedding's output (each stack's rows carried down through its layers in place);
  // d_in that of this stage's input, in the activation dtype.
  const Tensor d_all = embedding_ ? sized(be, d_all_, act, Ne + Nd, H, true) : Tensor{};
  const int64_t in_rows = (int64_t)stage_input_elements(a.B, a.Te, a.Td) / H;
  const Tensor d_in = in_rows > 0 ? sized(be, d_input_, act, in_rows, H, true) : Tensor{};
  Tensor g_out;  // d(loss)/d(output) of a stage that is not the last, in the activation dtype
  if (!head_held_) {
    const int64_t out_rows = (int64_t)stage_output_elements(a.B, a.Te, a.Td) / H;
    const Tensor g = sized(be, d_output_f32_, kernels::DType::F32, out_rows, H);
    be.copy_to_device(g.data, output_grad, (size_t)(out_rows * H) * sizeof(float));
    g_out = g;
    if (act != kernels::DType::F32) {
      g_out = sized(be, d_output_, act, out_rows, H);
      kernels::copy(g_out, g);
    }
  }
  Tensor d_memory;
  if (!decoder_.empty()) {
    const Tensor d_dec = decoder_lookup_ ? d_all.slice0(Ne, Nd) : d_in.slice0(0, Nd);
    if (!encoder_.empty()) d_memory = sized(be, d_memory_, act, Ne, H, true);
    else d_memory = decoder_lookup_ ? d_in : d_in.slice0(Nd, Ne);
    if (head_held_) {
      if (a.mask_sum > 0.0) {
        const Tensor d_out = sized(be, d_dec_out_, act, Nd, H, true);
        head_->backward(d_out, (float)((double)loss_scale / a.mask_sum), a.head);
        decoder_norm_->backward(d_dec, d_out, a.dec_body, a.decoder_norm);
      }
      hook_at("language_model.decoder.final_norm.weight");
    } else {
      kernels::copy(d_dec, g_out.slice0(0, Nd));
      kernels::copy(d_memory, g_out.slice0(Nd, Ne));
    }
    decoder_.backward(d_dec, d_memory, a.decoder, [&](size_t l) {
      if (ready_hook_) ready_hook_(table()[decoder_first_[l]].offset);
    });
  }
  if (!encoder_.empty()) {
    const Tensor d_enc = encoder_lookup_ ? d_all.slice0(0, Ne) : d_in;
    if (encoder_norm_held_) {
      encoder_norm_->backward(d_enc, decoder_.empty() ? g_out : d_memory, a.enc_body, a.encoder_norm);
      hook_at("language_model.encoder.final_norm.weight");
    } else {
      kernels::copy(d_enc, g_out);
    }
    encoder_.backward(d_enc, Tensor{}, a.encoder, [&](size_t l) {
      if (ready_hook_) ready_hook_(table()[encoder_first_[l]].offset);
    });
  }
  if (embedding_) embedding_->backward(d_all, a.embedding);
  if (d_in.present()) {  // for the previous stage, in fp32
    kernels::copy(input_grad_ = sized(be, d_input_f32_, kernels::DType::F32, in_rows, H), d_in);
  }
  if (ready_hook_) ready_hook_(0);
}

const float* T5::forward_logits(const int32_t* encoder_tokens, int B, int Te, const int32_t* decoder_tokens,
                               int Td) {
  require_whole("forward_logits");
  Activations& a = activation_slot(slots_, 0);
  a.have_forward = false;
  T5Inputs in;
  in.B = B, in.Te = Te, in.Td = Td;
  in.encoder_tokens = encoder_tokens;
  in.decoder_tokens = decoder_tokens;
  check_inputs(in, false);
  forward_body(in, nullptr, layers::ForwardStep{}, a);
  const int64_t Nd = (int64_t)B * Td;
  logits_.resize(backend(), kernels::DType::F32, (size_t)(Nd * head_->local_vocab()));
  head_->logits(logits_.view({Nd, head_->local_vocab()}), a.dec_out.view({Nd, config_.hidden}));
  return logits_.f32();
}

Tensor T5::encode(const int32_t* tokens, int B, int Te) {
  const int64_t Ne = (int64_t)B * Te, H = config_.hidden;
  kernels::Backend& be = backend();
  std::vector<int32_t> pos((size_t)Ne);
  for (int64_t n = 0; n < Ne; n++) pos[(size_t)n] = (int32_t)(n % Te);
  Tensor x = embedding_->forward(upload_ids(decode_tokens_, tokens, (size_t)Ne),
                                 upload_ids(decode_positions_, pos.data(), (size_t)Ne), Tensor{});
  x = encoder_.forward(x, {B, Te, {}, {}, {}, 0}, layers::ForwardStep{}, encode_saved_);
  const Tensor memory = sized(be, decode_memory_, kernels::DType::F32, Ne, H);
  encoder_norm_->forward(memory, x);
  return memory;
}

void T5::decode_begin(const int32_t* encoder_tokens, int B, int Te) {
  require_whole("decode_begin");
  if (!slots_.empty()) slots_[0]->have_forward = false;
  if (B < 1 || Te < 1) throw Error("T5 decode: batch size and encoder length must be >= 1");
  if (Te > config_.max_positions)
    throw Error("T5 decode: the encoder input (" + std::to_string(Te) + " tokens) exceeds max_positions " +
                std::to_string(config_.max_positions));
  check_ids(encoder_tokens, (size_t)B * Te, config_.vocab_size, "T5 decode", "encoder token");
  const Tensor memory = encode(encoder_tokens, B, Te);
  for (auto& layer : decoder_.layers()) layer->decode_begin(B, config_.max_positions, memory, Te);
  decode_B_ = B;
  decode_pos_ = 0;
}

const float* T5::decode_step(const int32_t* tokens) {
  if (decode_B_ == 0) throw Error("T5 decode: decode_begin() must come first");
  if (decode_pos_ >= config_.max_positions)
    throw Error("T5 decode: the decoder input is already max_positions = " + std::to_string(config_.max_positions) +
                " long");
  // Decoder position decode_pos_ of every row: the shared embedding, each layer over its caches, the final
  // LayerNorm and the tied head on B rows.
  const float* logits = decode_next(tokens, decode_B_, decode_pos_, config_.vocab_size, "T5 decode",
                                        *embedding_, decoder_, *decoder_norm_, *head_);
  decode_pos_++;
  return logits;
}

double T5::training_flops(int B, int Te, int Td) const {
  const double H = config_.hidden, F = config_.ffn(), Vp = config_.padded_vocab_size();
  const double Le = config_.encoder_num_layers, Ld = config_.decoder_layers();
  const double enc_params = Le * (4.0 * H * H + 2.0 * H * F);
  // Per decoder token: self-attention, query + dense of the cross-attention, MLP, head; the cross-attention's
  // key_value runs once per encoder token.
  const double dec_params = Ld * (6.0 * H * H + 2.0 * H * F) + Vp * H;
  const double kv_params = Ld * 2.0 * H * H;
  const double per_step = 6.0 * (Te * (enc_params + kv_params) + Td * dec_params) +
                          12.0 * (Le * H * Te * Te + Ld * H * (Td * Td + Td * Te));
  return (double)B * per_step;
}

}  // namespace lmforge::model
