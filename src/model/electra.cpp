// defines: ElectraConfig::validate and the Electra model (composition of layers, one step's forward with the
//          host-side masking/sampling/BCE, backward)
#include "model/electra.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/error.h"

namespace lmforge::model {

using kernels::Tensor;

void ElectraConfig::validate() const {
  const ConfigCheck check("ELECTRA");
  check.positive({{"num_layers", num_layers}, {"hidden size", hidden}, {"number of attention heads", heads},
                  {"embedding_size", embedding_size}, {"generator hidden size", gen_hidden},
                  {"generator layers", gen_layers}, {"generator attention heads", gen_heads},
                  {"max_positions", max_positions}, {"vocab_size", vocab_size},
                  {"make_vocab_size_divisible_by", make_vocab_size_divisible_by},
                  {"type_vocab_size", type_vocab_size}});
  check.ffn_hidden(ffn_hidden);
  check.ffn_hidden(gen_ffn_hidden);
  check.heads_divide(hidden, heads);
  check.heads_divide(gen_hidden, gen_heads);
  check.numbers(vocab_size, make_vocab_size_divisible_by, layernorm_eps, init_std);
  check.dropouts(hidden_dropout, attention_dropout);
  if (!(mask_prob > 0.0 && mask_prob < 1.0)) check.fail("mask_prob " + std::to_string(mask_prob) + " is not in (0, 1)");
  if (max_predictions < 0) check.fail("max_predictions " + std::to_string(max_predictions) + " is negative");
  if (!(temperature > 0.0)) check.fail("temperature " + std::to_string(temperature) + " is not positive");
  if (!std::isfinite(gen_weight) || !std::isfinite(disc_weight)) check.fail("the loss weights must be finite");
  for (int32_t id : {tokens.cls, tokens.sep, tokens.mask})
    if (id < 0 || id >= vocab_size)
      check.fail("special token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                 std::to_string(vocab_size) + ")");
  check.recompute(recompute, num_layers);
  check.recompute(recompute, gen_layers);
}

namespace {

layers::LinearSpec electra_linear(const std::string& name, int64_t in, int64_t out, double std) {
  layers::LinearSpec s;
  s.name = name;
  s.in = in;
  s.out = out;
  s.layout = kernels::WeightLayout::OUT_IN;
  s.parallelism = layers::Parallelism::REPLICATED;
  s.init_std = std;
  return s;
}

struct EncoderShape {
  std::string prefix;  // "electra." or "generator.electra."
  int hidden, heads, ffn, layers;
  int first_number;    // the dropout stream number of its first layer
};

// The original BERT's post-LN layer under Hugging Face's names (as Bert's post_layernorm flavour builds it).
layers::TransformerLayerSpec electra_layer(const ElectraConfig& c, const EncoderShape& e, int l) {
  const std::string h = e.prefix + "encoder.layer." + std::to_string(l) + ".";
  layers::TransformerLayerSpec s;
  s.layer = e.first_number + l;
  s.hidden = e.hidden;
  s.pre_layernorm = false;
  s.layernorm_eps = c.layernorm_eps;
  s.ln1 = h + "attention.output.LayerNorm";
  s.ln2 = h + "output.LayerNorm";
  s.attention.name = h + "attention.self";
  s.attention.fused_qkv = false;
  s.attention.q = "query";
  s.attention.k = "key";
  s.attention.v = "value";
  s.attention.out = h + "attention.output.dense";
  s.attention.out_is_full_name = true;
  s.attention.hidden = e.hidden;
  s.attention.heads = e.heads;
  s.attention.layout = kernels::WeightLayout::OUT_IN;
  s.attention.causal = false;
  s.attention.init_std = c.init_std;
  s.attention.out_init_std = c.init_std;
  s.attention.attention_dropout = c.attention_dropout;
  s.attention.layer = s.layer;
  s.attention.recompute_core = c.recompute.selective();
  s.mlp.fc = h + "intermediate.dense";
  s.mlp.proj = h + "output.dense";
  s.mlp.hidden = e.hidden;
  s.mlp.ffn = e.ffn;
  s.mlp.layout = kernels::WeightLayout::OUT_IN;
  s.mlp.gelu = c.gelu;
  s.mlp.init_std = c.init_std;
  s.mlp.out_init_std = c.init_std;
  s.hidden_dropout = c.hidden_dropout;
  return s;
}

layers::TransformerStack::Layers electra_encoder(const ElectraConfig& c, const EncoderShape& e,
                                               layers::ParameterStore& store, const layers::TensorParallel& tp,
                                               layers::Workspace& workspace) {
  layers::TransformerStack::Layers out;
  for (int l = 0; l < e.layers; l++)
    out.push_back(std::make_unique<layers::TransformerLayer>(store, tp, workspace, electra_layer(c, e, l)));
  return out;
}

EncoderShape discriminator_shape(const ElectraConfig& c) {
  return {"electra.", c.hidden, c.heads, c.ffn(), c.num_layers, 1};
}
EncoderShape generator_shape(const ElectraConfig& c) {
  return {"generator.electra.", c.gen_hidden, c.gen_heads, c.gen_ffn(), c.gen_layers, 1 + c.num_layers};
}

}  // namespace

// Everything the model is made of, added in this order: the shared embeddings and LayerNorm, the discriminator
// (projection, layers, head), then the generator's own tensors (projection, layers, head transform, output bias).
struct Electra::Parts {
  std::unique_ptr<layers::Embedding> embedding;
  std::unique_ptr<layers::LayerNorm> ln_embedding;
  std::unique_ptr<layers::Linear> disc_project, gen_project, disc_dense, disc_prediction;
  layers::TransformerStack::Layers disc_layers, gen_layers;
  std::unique_ptr<layers::LmHead> gen_head;

  // `tp` splits the discriminator's encoder layers (Megatron's column/row-parallel attention and MLP); everything
  // else is built on `whole` (no group): replicated on every rank of the group, computed alike on each.
  Parts(const ElectraConfig& c, layers::ParameterStore& store, const layers::TensorParallel& tp,
        layers::Workspace& workspace, const layers::TensorParallel& whole) {
    const int64_t E = c.embedding_size;
    layers::EmbeddingSpec e;
    e.word_name = "electra.embeddings.word_embeddings";
    e.position_name = "electra.embeddings.position_embeddings";
    e.token_type_name = "electra.embeddings.token_type_embeddings";
    e.padded_vocab = c.padded_vocab_size();
    e.max_positions = c.max_positions;
    e.token_types = c.type_vocab_size;
    e.hidden = E;
    e.init_std = c.init_std;
    e.dropout = 0.0f;  // BERT's embedding dropout comes after the LayerNorm (Electra::embed)
    embedding = std::make_unique<layers::Embedding>(store, whole, e);
    ln_embedding = std::make_unique<layers::LayerNorm>(store, "electra.embeddings.LayerNorm", E, c.layernorm_eps);
    if (E != c.hidden)
      disc_project = std::make_unique<layers::Linear>(
          store, whole, workspace, electra_linear("electra.embeddings_project", E, c.hidden, c.init_std));
    disc_layers = electra_encoder(c, discriminator_shape(c), store, tp, workspace);
    // discriminator_predictions: dense(H → H) → GELU → dense_prediction(H → 1), one logit per token.
    disc_dense = std::make_unique<layers::Linear>(
        store, whole, workspace, electra_linear("discriminator_predictions.dense", c.hidden, c.hidden, c.init_std));
    disc_prediction = std::make_unique<layers::Linear>(
        store, whole, workspace, electra_linear("discriminator_predictions.dense_prediction", c.hidden, 1, c.init_std));
    if (E != c.gen_hidden)
      gen_project = std::make_unique<layers::Linear>(
          store, whole, workspace, electra_linear("generator.electra.embeddings_project", E, c.gen_hidden, c.init_std));
    gen_layers = electra_encoder(c, generator_shape(c), store, whole, workspace);
    // generator_predictions: dense(gen_hidden → E) → GELU → LayerNorm(E), then × word_embeddingsᵀ + output_bias
    // (the tied generator_lm_head); HF's state_dict lists the transform before the bias, which only the order of
    // this table's last tensors shows.
    layers::LmHeadSpec head;
    head.name = "generator.generator_lm_head";
    head.bias_name = "generator.generator_lm_head.bias";
    head.hidden = c.gen_hidden;
    head.padded_vocab = c.padded_vocab_size();
    head.word = embedding->word_index();
    head.transform_name = "generator.generator_predictions.dense";
    head.transform_layernorm_name = "generator.generator_predictions.LayerNorm";
    head.transform_out = E;
    head.transform_gelu = c.gelu;
    head.layernorm_eps = c.layernorm_eps;
    head.init_std = c.init_std;
    head.masked_rows_only = false;  // the rows are the gathered slots already (duplicates included)
    // One chunk whatever the rows: the sampling reads every slot's logits after the forward.
    head.chunk_rows = INT64_MAX;
    head.logits_in_activation_dtype = false;
    gen_head = std::make_unique<layers::LmHead>(store, whole, workspace, head);
  }
};

Electra::Electra(const ElectraConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel)
    : LanguageModel(backend, tensor_parallel),
      config_(config),
      drop_gen_embedding_(config.hidden_dropout, 0, layers::DropoutSite::EMBEDDING),
      drop_disc_embedding_(config.hidden_dropout, 1 + config.num_layers + config.gen_layers,
                           layers::DropoutSite::EMBEDDING) {
  config_.validate();
  // Each rank takes whole heads and an equal share of the MLP of every discriminator layer.
  if (const int T = tp_.size(); T > 1 && (config_.heads % T != 0 || config_.ffn() % T != 0))
    throw Error("ELECTRA: tensor-parallel size " + std::to_string(T) + " must divide the discriminator's " +
                std::to_string(config_.heads) + " attention heads and its FFN width " + std::to_string(config_.ffn()));
  Parts p(config_, store_, tp_, workspace_, replicated_);
  embedding_ = std::move(p.embedding);
  ln_embedding_ = std::move(p.ln_embedding);
  disc_project_ = std::move(p.disc_project);
  gen_project_ = std::move(p.gen_project);
  disc_stack_ = layers::TransformerStack(std::move(p.disc_layers), config_.recompute);
  gen_stack_ = layers::TransformerStack(std::move(p.gen_layers), config_.recompute);
  disc_dense_ = std::move(p.disc_dense);
  disc_prediction_ = std::move(p.disc_prediction);
  gen_head_ = std::move(p.gen_head);
  store_.allocate();
}

Electra::~Electra() = default;

param::ParamTable Electra::parameter_table(const ElectraConfig& config) {
  config.validate();
  return build_whole_model([&](auto& store, auto& tp, auto& workspace) {
                             return Parts(config, store, tp, workspace, tp);
                           },
                           [](const layers::ParameterStore& whole) { return whole.table(); });
}

void Electra::check_inputs(const ElectraInputs& in) const {
  auto fail = [](const std::string& msg) { throw Error("ELECTRA forward: " + msg); };
  if (in.B < 1 || in.L < 1) fail("batch and sequence sizes must be >= 1");
  if (in.L > config_.max_positions)
    fail("sequence length " + std::to_string(in.L) + " exceeds max_positions " +
         std::to_string(config_.max_positions));
  if (!in.input_ids || !in.input_mask) fail("input_ids and input_mask are required");
  const size_t n = (size_t)in.B * in.L;
  check_ids(in.input_ids, n, config_.vocab_size, "ELECTRA forward", "token");
  for (size_t i = 0; i < n; i++) {
    if (in.input_mask[i] != 0 && in.input_mask[i] != 1)
      fail("input_mask value " + std::to_string(in.input_mask[i]) + " at position " + std::to_string(i) +
           " is not 0 or 1");
    if (in.segment_ids && (in.segment_ids[i] < 0 || in.segment_ids[i] >= config_.type_vocab_size))
      fail("segment id " + std::to_string(in.segment_ids[i]) + " at position " + std::to_string(i) +
           " is outside [0, " + std::to_string(config_.type_vocab_size) + ")");
  }
}

Tensor Electra::embed(const Tensor& ids, const Tensor& positions, const Tensor& types, int64_t rows, Embedded& emb,
                      const layers::Dropout& drop) {
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  const int64_t E = config_.embedding_size;
  const Tensor x = emb.sum = embedding_->forward(ids, positions, types, step_, emb.embedding);
  const Tensor y = layers::sized(be, emb.normed, act, rows, E);
  ln_embedding_->forward(y, x, emb.ln);
  if (!drop.active(step_)) return y;
  const Tensor out = layers::sized(be, emb.dropped, act, rows, E);
  drop.forward(out, y, step_);
  return out;
}

ElectraLosses Electra::forward(const ElectraInputs& in, const ElectraDraws& draws, const layers::ForwardStep* step) {
  have_forward_ = false;
  check_inputs(in);
  if (!draws.key && (!draws.pos_u || !draws.keep_u || !draws.gumbel_u))
    throw Error("ELECTRA forward: the draws (or the key of the generator that makes them) are required");
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  step_ = step ? *step : layers::ForwardStep{};
  const int B = in.B, L = in.L, N = config_.predictions(L);
  B_ = B, L_ = L, N_ = N;
  const int64_t BL = (int64_t)B * L, BN = (int64_t)B * N, V = config_.padded_vocab_size();
  const int64_t H = config_.hidden, gH = config_.gen_hidden;

  // 1. Masking (host, from the given draws).
  record_ = ElectraStepRecord{};
  const double *pos_u = draws.pos_u, *keep_u = draws.keep_u;
  std::vector<double> made_pos, made_keep;
  if (draws.key) {
    made_pos.resize((size_t)BN), made_keep.resize((size_t)BN);
    for (int b = 0; b < B; b++) {
      const uint64_t sample = draws.first_sample + (uint64_t)b;
      electra_uniform_row(*draws.key, sample, ElectraDrawSite::POSITIONS, 0, N, made_pos.data() + (size_t)b * N);
      electra_uniform_row(*draws.key, sample, ElectraDrawSite::KEEP, 0, N, made_keep.data() + (size_t)b * N);
    }
    pos_u = made_pos.data(), keep_u = made_keep.data();
  }
  record_.masked = electra_mask(in.input_ids, in.input_mask, B, L, N, config_.mask_prob, config_.tokens, pos_u, keep_u);
  const ElectraMasked& m = record_.masked;

  // Ids, positions, types and padding, shared by both networks.
  std::vector<int32_t> host;
  append_positions(host, B, L);
  const Tensor positions = upload_ids(positions_, host.data(), (size_t)BL);
  const std::vector<int32_t> zeros(in.segment_ids ? 0 : (size_t)BL, 0);
  const Tensor types = upload_ids(types_, in.segment_ids ? in.segment_ids : zeros.data(), (size_t)BL);
  const Tensor padding = upload_ids(padding_, in.input_mask, (size_t)BL).reshaped({B, L});
  input_mask_.assign(in.input_mask, in.input_mask + BL);
  const layers::LayerInputs li{B, L, padding, {}, {}, 0};

  // 2. Generator on the masked ids: shared embeddings → its projection → its layers → the slots' rows → head.
  const Tensor masked = upload_ids(masked_ids_, m.masked_ids.data(), (size_t)BL);
  gen_in_ = embed(masked, positions, types, BL, gen_emb_, drop_gen_embedding_);
  Tensor x = gen_in_;
  if (gen_project_) {
    x = layers::sized(be, gen_projected_, act, BL, gH);
    gen_project_->forward(x, gen_in_);
  }
  gen_out_ = gen_stack_.forward(x, li, step_, gen_stack_saved_);
  // gather_positions: row b·L + position of each slot (weight-0 slots gather [CLS], as the reference does).
  std::vector<int32_t> rows((size_t)BN);
  for (int b = 0; b < B; b++)
    for (int j = 0; j < N; j++) rows[(size_t)b * N + j] = b * L + m.positions[(size_t)b * N + j];
  const Tensor row_ids = upload_ids(rows_, rows.data(), (size_t)BN);
  const Tensor gathered = layers::sized(be, gathered_, act, BN, gH);
  kernels::embedding_forward(gathered, row_ids, gen_out_, 0, false);
  weight_sum_ = 0.0;
  for (float w : m.weights) weight_sum_ += w;
  ElectraLosses losses;
  losses.mlm = gen_head_->forward(gathered, m.labels.data(), m.weights.data(), gen_head_saved_) /
               (weight_sum_ + 1e-6);

  // 3. Sampling (host): the logits come back through the backend's copy API; the samples carry no gradient.
  gen_logits_.resize((size_t)(BN * V));
  const Tensor logits = gen_head_->logits(gen_head_saved_);
  be.copy_to_host(gen_logits_.data(), logits.data, gen_logits_.size() * sizeof(float));
  record_.sampled = electra_gumbel_sample(gen_logits_.data(), BN, V, config_.temperature, [&](int64_t m, double* u) {
    if (!draws.key) {
      std::copy(draws.gumbel_u + m * V, draws.gumbel_u + (m + 1) * V, u);
      return;
    }
    // Slot j of row b: elements [j·V, (j+1)·V) of sample b's uniforms.
    electra_uniform_row(*draws.key, draws.first_sample + (uint64_t)(m / N), ElectraDrawSite::GUMBEL,
                        (uint64_t)(m % N) * (uint64_t)V, (uint64_t)V, u);
  });

  // 4. Fake input and labels (host).
  record_.fake = electra_fake_data(in.input_ids, B, L, N, m.positions.data(), record_.sampled.data());
  for (int32_t id : record_.fake.ids)
    if (id < 0 || id >= config_.vocab_size)  // only a padded vocabulary's column could be sampled
      throw Error("ELECTRA forward: the generator sampled id " + std::to_string(id) + " outside the vocabulary");

  // 5. Discriminator on the fake ids: shared embeddings → projection → layers → dense → GELU → dense_prediction.
  const Tensor fake = upload_ids(fake_ids_, record_.fake.ids.data(), (size_t)BL);
  disc_in_ = embed(fake, positions, types, BL, disc_emb_, drop_disc_embedding_);
  x = disc_in_;
  if (disc_project_) {
    x = layers::sized(be, disc_projected_, act, BL, H);
    disc_project_->forward(x, disc_in_);
  }
  disc_out_ = disc_stack_.forward(x, li, step_, disc_stack_saved_);
  const Tensor t1 = layers::sized(be, disc_t1_, act, BL, H), t2 = layers::sized(be, disc_t2_, act, BL, H);
  disc_dense_->forward(t1, disc_out_);
  kernels::gelu_forward(t2, t1, config_.gelu);
  const Tensor z = layers::sized(be, disc_logits_, act, BL, 1);
  disc_prediction_->forward(z, t2);
  // BCE (host, [B·L] values): TF's sigmoid_cross_entropy_with_logits = max(x, 0) − x·y + log(1 + e^−|x|).
  const Tensor z32 = layers::sized(be, d_logits_, kernels::DType::F32, BL, 1);
  kernels::copy(z32, z);
  record_.disc_logits.resize((size_t)BL);
  be.copy_to_host(record_.disc_logits.data(), z32.data, (size_t)BL * sizeof(float));
  double bce = 0.0;
  mask_sum_ = 0.0;
  for (int64_t i = 0; i < BL; i++) {
    if (in.input_mask[i] == 0) continue;
    const double v = record_.disc_logits[(size_t)i], y = record_.fake.labels[(size_t)i];
    bce += std::max(v, 0.0) - v * y + std::log1p(std::exp(-std::fabs(v)));
    mask_sum_ += 1.0;
  }
  losses.disc = bce / (mask_sum_ + 1e-6);
  losses.total = config_.gen_weight * losses.mlm + config_.disc_weight * losses.disc;
  have_forward_ = true;
  return losses;
}

void Electra::embed_backward(const Tensor& d, int64_t rows, Embedded& emb, const layers::Dropout& drop) {
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  const int64_t E = config_.embedding_size;
  Tensor g = d;
  if (drop.active(step_)) {
    g = layers::sized(be, d_drop_, act, rows, E, true);
    drop.backward(g, d, step_);
  }
  const Tensor de = layers::sized(be, d_emb_, act, rows, E, true);
  ln_embedding_->backward(de, g, emb.sum, emb.ln);
  embedding_->backward(de, emb.embedding);
}

void Electra::backward(float loss_scale) {
  if (!have_forward_) throw Error("ELECTRA backward: no forward() precedes it (or backward already ran)");
  have_forward_ = false;
  kernels::Backend& be = backend();
  const kernels::DType act = store_.activation_dtype();
  const int64_t BL = (int64_t)B_ * L_, BN = (int64_t)B_ * N_;
  const int64_t E = config_.embedding_size, H = config_.hidden, gH = config_.gen_hidden;

  // Discriminator: d(disc_weight·disc)/dz_i = disc_weight·mask_i·(σ(z_i) − y_i)/(Σ mask + 1e-6) (host, [B·L]).
  std::vector<float> dz((size_t)BL, 0.0f);
  const double scale_disc = (double)loss_scale * config_.disc_weight / (mask_sum_ + 1e-6);
  const std::vector<int32_t>& labels = record_.fake.labels;
  for (int64_t i = 0; i < BL; i++) {
    if (input_mask_[(size_t)i] == 0) continue;
    const double v = record_.disc_logits[(size_t)i];
    const double sigmoid = v >= 0 ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v) / (1.0 + std::exp(v));
    dz[(size_t)i] = (float)(scale_disc * (sigmoid - (double)labels[(size_t)i]));
  }
  const Tensor dz32 = layers::sized(be, d_logits_, kernels::DType::F32, BL, 1);
  be.copy_to_device(dz32.data, dz.data(), dz.size() * sizeof(float));
  Tensor dzt = dz32;
  if (act != kernels::DType::F32) {
    dzt = layers::sized(be, disc_logits_, act, BL, 1);
    kernels::copy(dzt, dz32);
  }
  const Tensor dt2 = layers::sized(be, d_t2_, act, BL, H, true), dt1 = layers::sized(be, d_t1_, act, BL, H, true);
  disc_prediction_->backward(dt2, dzt, disc_t2_.view({BL, H}));
  kernels::gelu_backward(dt1, disc_t1_.view({BL, H}), dt2, config_.gelu);
  const Tensor dd = layers::sized(be, d_disc_, act, BL, H, true);
  disc_dense_->backward(dd, dt1, disc_out_);
  disc_stack_.backward(dd, Tensor{}, disc_stack_saved_);
  Tensor d_in = dd;
  if (disc_project_) {
    d_in = layers::sized(be, d_disc_in_, act, BL, E, true);
    disc_project_->backward(d_in, dd, disc_in_);
  }
  embed_backward(d_in, BL, disc_emb_, drop_disc_embedding_);

  // Generator: d(gen_weight·mlm)/dCE_slot = gen_weight·w/(Σ w + 1e-6), through the head, scattered back to the
  // positions (duplicates add), then its layers, projection and the shared embeddings.
  const Tensor dg = layers::sized(be, d_gathered_, act, BN, gH, true);
  gen_head_->backward(dg, (float)((double)loss_scale * config_.gen_weight / (weight_sum_ + 1e-6)), gen_head_saved_);
  const Tensor dh = layers::sized(be, d_gen_, act, BL, gH, true);
  kernels::embedding_backward(dh, dg, rows_.view({BN}), 0);
  gen_stack_.backward(dh, Tensor{}, gen_stack_saved_);
  d_in = dh;
  if (gen_project_) {
    d_in = layers::sized(be, d_gen_in_, act, BL, E, true);
    gen_project_->backward(d_in, dh, gen_in_);
  }
  embed_backward(d_in, BL, gen_emb_, drop_gen_embedding_);
  if (ready_hook_) ready_hook_(0);
}

}  // namespace lmforge::model
