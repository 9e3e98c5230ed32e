// defines: lmforge::model::ElectraConfig, ElectraInputs, ElectraDraws, ElectraLosses, ElectraStepRecord, Electra
//          (ELECTRA pretraining: a generator and a discriminator, both original post-LN BERT encoders sharing the
//          word/position/type embeddings and the embedding LayerNorm, composed from the layer library; one step's
//          forward — masking, generator MLM, Gumbel sampling, fake data, discriminator — and its backward)
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"
#include "layers/linear.h"
#include "layers/lm_head.h"
#include "layers/transformer_stack.h"
#include "layers/workspace.h"
#include "model/electra_draws.h"
#include "model/electra_masking.h"
#include "model/language_model.h"
#include "model/transformer_config.h"
#include "param/parameter.h"

namespace lmforge::model {

// ELECTRA's shapes (electra-reference-notes §2, §4). The TransformerConfig fields are the discriminator's (hidden,
// heads, ffn_hidden, layernorm_eps 1e-12, dropouts, init_std; vocab 30522 unpadded: make_vocab_size_divisible_by 1);
// the generator has its own width, layers, heads and FFN; both read the shared embeddings of width embedding_size.
struct ElectraConfig : TransformerConfig {
  ElectraConfig() {
    vocab_size = 30522;
    make_vocab_size_divisible_by = 1;
    hidden = 256, heads = 4;
    layernorm_eps = 1e-12f;
  }
  int num_layers = 12;
  int embedding_size = 128;  // E; each network projects E → its hidden size when they differ
  int type_vocab_size = 2;
  int gen_hidden = 64, gen_layers = 12, gen_heads = 1, gen_ffn_hidden = 0;  // gen_ffn_hidden 0: 4·gen_hidden
  kernels::GeluKind gelu = kernels::GeluKind::ERF;  // the encoders' and both heads' GELU (HF "gelu")
  double mask_prob = 0.15;
  int max_predictions = 0;  // N per sequence; 0: int((mask_prob + 0.005)·seq_length) at each forward
  double gen_weight = 1.0, disc_weight = 50.0, temperature = 1.0;
  ElectraTokens tokens;

  int gen_ffn() const { return gen_ffn_hidden > 0 ? gen_ffn_hidden : 4 * gen_hidden; }
  int predictions(int seq_length) const {
    return max_predictions > 0 ? max_predictions : electra_max_predictions(mask_prob, seq_length);
  }
  // Throws lmforge::Error naming the first inconsistent field.
  void validate() const;
};

// One micro-batch (host memory, row-major [B, L]): ELECTRA's example features.
struct ElectraInputs {
  int B = 0, L = 0;
  const int32_t* input_ids = nullptr;
  const int32_t* input_mask = nullptr;   // 1 real token, 0 padding
  const int32_t* segment_ids = nullptr;  // nullptr: all 0
};

// The uniform draws of one step (double in [0, 1)): pos_u [B, N] and keep_u [B, N] for the masking, gumbel_u
// [B, N, vocab] for the sampling (electra_mask, electra_gumbel_sample). Either given (host arrays: a reference step
// replayed) or, with `key`, from the counter-based generator (electra_draws.h), row b of the micro-batch being the
// run's global sample first_sample + b — the training case: the same draws on every layout and resume point.
struct ElectraDraws {
  const double* pos_u = nullptr;
  const double* keep_u = nullptr;
  const double* gumbel_u = nullptr;
  const ElectraDrawKey* key = nullptr;
  uint64_t first_sample = 0;
};

// loss = gen_weight·mlm + disc_weight·disc, with
//   mlm  = Σ w·CE(generator logits at the slots, label) / (Σ w + 1e-6)
//   disc = Σ input_mask·BCE(discriminator logit, replaced) / (Σ input_mask + 1e-6)
struct ElectraLosses {
  double mlm = 0.0, disc = 0.0, total = 0.0;
};

// What a step drew and decided (host), for checks and the discriminator's accuracy.
struct ElectraStepRecord {
  ElectraMasked masked;
  std::vector<int32_t> sampled;      // [B, N]
  ElectraFake fake;
  std::vector<float> disc_logits;    // [B, L]
};

// ELECTRA on one Backend. Parameters carry the names of the shared reference step: the discriminator's under
// Hugging Face's ElectraForPreTraining names (electra.embeddings.* — the shared tables and LayerNorm —,
// electra.embeddings_project when E ≠ hidden, electra.encoder.layer.<i>.*, discriminator_predictions.*), the
// generator's own tensors under ElectraForMaskedLM's names prefixed "generator." (generator.electra.embeddings_project,
// generator.electra.encoder.layer.<i>.*, generator.generator_predictions.{dense,LayerNorm},
// generator.generator_lm_head.bias; its output weight is the shared word table). Every weight [out, in];
// initialisation N(0, init_std), biases 0, LayerNorms 1/0.
//
// Tensor parallelism (`tensor_parallel` of T ranks) splits the discriminator's encoder layers only (whole heads and
// an equal share of the MLP per rank, Megatron's column/row-parallel layers); the shared embeddings, both
// projections, the generator (its layers and head: ELECTRA's generator is 1 head wide at Small) and the
// discriminator's head are replicated, computed alike on every rank of the group, so the masking, the Gumbel argmax
// over the [B·N, V] generator logits and the BCE over the [B·L] discriminator logits need no exchange. No pipeline
// stages. Those host steps run over copies made through the backend's copy API (never a host pointer into device
// memory).
class Electra : public LanguageModel {
 public:
  Electra(const ElectraConfig& config, kernels::Backend& backend, dist::Communicator* tensor_parallel = nullptr);
  ~Electra();

  const ElectraConfig& config() const { return config_; }
  void init_weights(uint64_t seed) { store_.init(seed); }
  static param::ParamTable parameter_table(const ElectraConfig& config);

  // One training forward: masks in.input_ids with the draws, runs the generator, samples, builds the fake ids and
  // runs the discriminator. `step` (training set) turns dropout on; nullptr: none. Throws lmforge::Error for bad
  // shapes, ids outside the vocabulary, L > max_positions, a row without candidates or draws outside [0, 1).
  ElectraLosses forward(const ElectraInputs& in, const ElectraDraws& draws, const layers::ForwardStep* step = nullptr);
  // Adds loss_scale · d(total)/dθ of the last forward into grads(); the samples carry no gradient.
  void backward(float loss_scale = 1.0f);
  // The last forward's draws and decisions.
  const ElectraStepRecord& record() const { return record_; }
  // The last forward's generator logits [B·N, vocab] (host fp32), before backward() overwrites them.
  const std::vector<float>& generator_logits() const { return gen_logits_; }

 private:
  struct Parts;
  // One call of the shared embeddings and LayerNorm (each network calls them once per step, keeping its own).
  struct Embedded {
    layers::Embedding::Saved embedding;
    layers::LayerNorm::Saved ln;
    kernels::Tensor sum;                // the embedding's output, the LayerNorm's input
    kernels::Buffer normed, dropped;
  };
  void check_inputs(const ElectraInputs& in) const;
  // The shared embeddings and LayerNorm (then dropout) of `ids`: [B·L, E].
  kernels::Tensor embed(const kernels::Tensor& ids, const kernels::Tensor& positions, const kernels::Tensor& types,
                        int64_t rows, Embedded& emb, const layers::Dropout& drop);
  // From d(loss)/d(embed's output) back into the shared tables' and LayerNorm's gradients.
  void embed_backward(const kernels::Tensor& d, int64_t rows, Embedded& emb, const layers::Dropout& drop);

  ElectraConfig config_;
  layers::TensorParallel replicated_;  // no group: the layers every rank holds whole (the layers keep a reference)
  std::unique_ptr<layers::Embedding> embedding_;
  std::unique_ptr<layers::LayerNorm> ln_embedding_;
  std::unique_ptr<layers::Linear> disc_project_, gen_project_;  // absent when E equals that network's width
  layers::TransformerStack disc_stack_, gen_stack_;
  std::unique_ptr<layers::Linear> disc_dense_, disc_prediction_;
  std::unique_ptr<layers::LmHead> gen_head_;
  layers::Dropout drop_gen_embedding_, drop_disc_embedding_;

  // The last forward's activations.
  bool have_forward_ = false;
  int B_ = 0, L_ = 0, N_ = 0;
  layers::ForwardStep step_;
  double weight_sum_ = 0.0, mask_sum_ = 0.0;
  std::vector<int32_t> input_mask_;  // [B·L] host: the disc loss's weights
  ElectraStepRecord record_;
  std::vector<float> gen_logits_;
  kernels::Buffer masked_ids_, fake_ids_, positions_, types_, padding_, rows_;
  Embedded gen_emb_, disc_emb_;
  kernels::Buffer gen_projected_, disc_projected_;
  kernels::Tensor gen_in_, disc_in_, gen_out_, disc_out_;
  layers::TransformerStack::Saved gen_stack_saved_, disc_stack_saved_;
  kernels::Buffer gathered_, disc_t1_, disc_t2_, disc_logits_;
  layers::LmHead::Saved gen_head_saved_;
  // Scratch of one backward.
  kernels::Buffer d_gathered_, d_gen_, d_gen_in_, d_disc_, d_disc_in_, d_t1_, d_t2_, d_logits_, d_emb_, d_drop_;
};

}  // namespace lmforge::model
