// defines: lmforge::model::LanguageModel (the base of GPT, Bert and T5: parameters, workspace, ready hook, a stage's
//          initialisation, id checks, the key/value-cache decoding step), Stage (one pipeline stage of any model),
//          ConfigCheck (the field checks the configs share, one message each), padded_vocab_size(),
//          check_tensor_parallel_fits(), add_tied_word_copy() (a last stage's copy of the tied word table),
//          build_whole_model() (a table-only build of the whole model for parameter_table and a stage's init)
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"
#include "layers/linear.h"
#include "layers/lm_head.h"
#include "layers/parameter_store.h"
#include "layers/transformer_layer.h"
#include "layers/transformer_stack.h"
#include "layers/tensor_parallel.h"
#include "layers/workspace.h"
#include "model/stage_init.h"
#include "param/parameter.h"

namespace lmforge::model {

// vocab_size rounded up to a multiple of divisible_by (Megatron's --make-vocab-size-divisible-by, not growing with
// the tensor-parallel size; see GPTConfig).
int padded_vocab_size(int vocab_size, int divisible_by);

// Throws lmforge::Error unless the tensor-parallel size T divides the padded vocabulary, the heads and the MLP width
// (each rank takes an equal share of each).
void check_tensor_parallel_fits(int T, int padded_vocab, int heads, int ffn);

// A last pipeline stage's own copy of the tied word table (when it does not hold the embedding), added as
// layers::Embedding adds the original: same name, shape, split and initialisation. Returns its table index.
size_t add_tied_word_copy(layers::ParameterStore& store, const layers::EmbeddingSpec& e);

// One pipeline stage of a model (Megatron's pre_process / post_process): layers [first_layer, first_layer +
// num_layers) of the whole model's stack — for an encoder-decoder the encoder's layers followed by the decoder's,
// numbered on (T5: decoder layer l is layer encoder_layers + l) —, the first stage (pre_process) reading the tokens
// and the last (post_process) holding the head and the losses. The whole model is the one stage that holds every
// layer; a model's forward and backward are those of its stages (one path). Default: the whole model.
struct Stage {
  int first_layer = 0;
  int num_layers = -1;        // -1: every layer from first_layer on
  bool pre_process = true;    // the first stage: reads the tokens
  bool post_process = true;   // the last stage: holds the head and computes the losses
  int end_layer(int total_layers) const { return num_layers < 0 ? total_layers : first_layer + num_layers; }
  bool whole(int total_layers) const {
    return pre_process && post_process && first_layer == 0 && end_layer(total_layers) == total_layers;
  }
  // Throws lmforge::Error naming `model` unless the layers are a nonempty range of [0, total_layers).
  void check(const char* model, int total_layers) const;
};

// The checks a model config makes of its fields, each throwing lmforge::Error("invalid <model> config: ...").
class ConfigCheck {
 public:
  explicit ConfigCheck(std::string model) : model_(std::move(model)) {}
  [[noreturn]] void fail(const std::string& msg) const;
  // Each value >= 1, checked in order.
  void positive(std::initializer_list<std::pair<const char*, int64_t>> fields) const;
  void ffn_hidden(int ffn_hidden) const;                           // >= 0 (0: 4·hidden)
  void heads_divide(int hidden, int heads) const;
  // vocab_size + divisible_by within int32, layernorm_eps > 0, init_std a positive number.
  void numbers(int vocab_size, int divisible_by, float layernorm_eps, float init_std) const;
  void dropouts(float hidden_dropout, float attention_dropout) const;  // each in [0, 1)
  void recompute(const layers::Recompute& r, int layers) const;       // Recompute::validate's verdict

 private:
  std::string model_;
};

// `build(store, tp, workspace)` over the whole model (tensor-parallel size 1) into a table-only store, never
// allocated; returns the store. What it builds lives until `use(store)` returns.
template <typename Build, typename Use>
auto build_whole_model(Build&& build, Use&& use) {
  layers::TensorParallel one;
  layers::ParameterStore whole(kernels::table_only_backend(), 0, 1);
  layers::Workspace workspace(kernels::table_only_backend());
  [[maybe_unused]] const auto parts = build(whole, one, workspace);
  return use(static_cast<const layers::ParameterStore&>(whole));
}

// The base of every language model composed from the layer library (Megatron-core's LanguageModule): the
// tensor-parallel group, the parameter store with its accessors, the activation workspace and the gradients-ready
// hook; a stage's initialisation from the whole model's stream; the checks of input ids; and the key/value-cache
// decoding step the decoders share. GPT, Bert and T5 derive from it. Pointers are device memory of the backend.
class LanguageModel {
 public:
  LanguageModel(const LanguageModel&) = delete;
  LanguageModel& operator=(const LanguageModel&) = delete;

  kernels::Backend& backend() { return store_.backend(); }

  // Mixed precision (Megatron's --bf16 / --fp16): the layers compute with a BF16 or F16 working copy of the weights
  // and keep activations and their gradients in that dtype; params()/grads() stay the fp32 master weights and main
  // gradients (LayerNorm statistics, softmax and cross-entropy stay fp32). F32: the default.
  void set_compute_dtype(kernels::DType dtype);
  kernels::DType compute_dtype() const { return store_.compute_dtype(); }
  // After params() changed (an optimizer step, a load): refresh the working copy (nothing in fp32).
  void params_updated() { store_.sync_compute_copy(); }
  // The bf16 working copy as one flat view (with its fp32 mirror where the store keeps one) for an optimizer to
  // write in its own pass; empty outside bf16 (layers::ParameterStore::working_copy()).
  kernels::Tensor working_copy() const { return store_.working_copy(); }
  size_t num_parameters() const { return store_.local_numel(); }  // on this rank
  float* params() { return store_.values(); }
  const float* params() const { return store_.values(); }
  float* grads() { return store_.grads(); }
  const float* grads() const { return store_.grads(); }
  const param::ParamTable& table() const { return store_.table(); }
  // Throws lmforge::Error for an unknown name.
  const param::Parameter& tensor(std::string_view name) const { return table().find(name); }
  float* param(std::string_view name) { return params() + tensor(name).offset; }
  float* grad(std::string_view name) { return grads() + tensor(name).offset; }
  void zero_grad() { store_.zero_grads(); }
  // Called inside a backward each time the gradients from flat offset `from` to the end of grads() are final for
  // this pass (after the head, after each layer, and with 0 at the end), so that a data-parallel reduction of them
  // can start while earlier layers are still being differentiated. Empty: none.
  void set_gradients_ready_hook(std::function<void(size_t from)> hook) { ready_hook_ = std::move(hook); }

 protected:
  LanguageModel(kernels::Backend& backend, dist::Communicator* tensor_parallel)
      : tp_(tensor_parallel), store_(backend, tp_.rank(), tp_.size()), workspace_(backend) {}
  ~LanguageModel() = default;

  // Megatron's initialisation from a seeded generator, the same on every parallel layout (layers::ParameterStore::
  // init). A pipeline stage (whole = false) draws the whole model's stream, built by `build(store, tp, workspace)`
  // as a table only, and keeps its own tensors (stage_init_discards).
  template <typename Build>
  void init_stage_weights(uint64_t seed, bool whole, Build&& build) {
    if (whole) return store_.init(seed);
    store_.init(seed, build_whole_model(build, [&](const layers::ParameterStore& all) {
                  return stage_init_discards(all, store_);
                }));
  }
  // Throws lmforge::Error("<context>: <what> id <v> at position <i> is outside the vocabulary [0, vocab)") for the
  // first of ids[0, n) outside it.
  static void check_ids(const int32_t* ids, size_t n, int vocab, const std::string& context, const char* what);
  // The host ids [n] in buf on the device.
  kernels::Tensor upload_ids(kernels::Buffer& buf, const int32_t* host, size_t n);
  // The learned position ids of `rows` rows of T positions each (row-major: id n mod T), appended to `ids`.
  static void append_positions(std::vector<int32_t>& ids, int64_t rows, int T);
  // The same ids in buf on the device, [rows·T].
  kernels::Tensor upload_positions(kernels::Buffer& buf, int64_t rows, int T);
  // Key/value-cache decoding: one new position `pos` of each of B rows — the embedding of tokens[B] (checked, as
  // `context`), every layer over its caches, the final LayerNorm and the head — returning that position's logits
  // [B, local vocabulary] (fp32), valid until the next call.
  const float* decode_next(const int32_t* tokens, int B, int pos, int vocab, const std::string& context,
                               layers::Embedding& embedding, layers::TransformerStack& layers,
                               layers::LayerNorm& final_norm, layers::LmHead& head);
  // The activations of micro-batch slot `slot` (made on first use): a model keeps one set per micro-batch in flight
  // (a 1F1B pipeline stage: one per forward whose backward has not run yet), each reused by later micro-batches in
  // the same slot, so buffers are allocated once for the largest shape.
  template <typename Activations>
  static Activations& activation_slot(std::vector<std::unique_ptr<Activations>>& slots, size_t slot) {
    if (slot >= slots.size()) slots.resize(slot + 1);
    if (!slots[slot]) slots[slot] = std::make_unique<Activations>();
    return *slots[slot];
  }

  layers::TensorParallel tp_;
  layers::ParameterStore store_;
  layers::Workspace workspace_;
  std::function<void(size_t)> ready_hook_;

 private:
  kernels::Buffer decode_tokens_, decode_positions_, decode_hidden_, decode_logits_;
};

}  // namespace lmforge::model
