// defines: lmforge::model::BertConfig, BertInputs, BertLosses, Bert (Megatron's pre-LN BERT and the original
//          post-LN BERT composed from the layer library: vocabulary-parallel embedding with token types, encoder
//          layers with a padding mask, masked-LM head tied to the word embedding, pooler + binary head; training
//          forward/backward with Megatron's per-micro-batch losses; any tensor-parallel size)
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "layers/classification_head.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"
#include "layers/lm_head.h"
#include "layers/linear.h"
#include "layers/parameter_store.h"
#include "layers/transformer_stack.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"
#include "layers/workspace.h"
#include "model/language_model.h"
#include "model/transformer_config.h"
#include "param/parameter.h"

namespace lmforge::model {

// BERT shapes and flavour, named as Megatron's arguments (bert-t5-reference-notes §1.1, §1.9).
// The shared transformer fields are TransformerConfig's (vocab_size: the tokenizer's INCLUDING the [BOS]/[EOS]
// Megatron's BertWordPieceLowerCase appends, 30522 + 2 for bert-base-uncased).
struct BertConfig : TransformerConfig {
  BertConfig() { vocab_size = 30524; }
  int num_layers = 12;             // --num-layers
  int seq_length = 512;            // --seq-length; <= max_positions
  bool binary_head = true;         // off: Megatron's --bert-no-binary-head (no pooler, no binary head, and in the
                                   // Megatron flavour no token types either)
  // The original BERT (Google / NVIDIA DLE / HF BertForPreTraining): embedding LayerNorm, post-LN layers, no final
  // LayerNorm, token types always, layernorm_eps 1e-12; otherwise Megatron's pre-LN BERT (eps 1e-5).
  bool post_layernorm = false;
  // GELU of the encoder MLP and of the MLM head's transform. Megatron (fused bias-GELU, its default): TANH in the
  // MLP, ERF in the head; --no-bias-gelu-fusion: ERF/ERF; --openai-gelu: TANH/TANH. HF/DLE "gelu": ERF/ERF;
  // Google's TF "gelu": TANH/TANH.
  kernels::GeluKind mlp_gelu = kernels::GeluKind::TANH;
  kernels::GeluKind head_gelu = kernels::GeluKind::ERF;
  int type_vocab_size = 2;         // rows of the token-type table

  // Whether the model adds token-type embeddings (Megatron: only with the binary head; original: always).
  bool uses_token_types() const { return post_layernorm || binary_head; }
  // Throws lmforge::Error naming the first inconsistent field.
  void validate() const;
};

// One micro-batch (host memory, row-major [B,T]); the fields of Megatron's BertDataset.
struct BertInputs {
  int B = 0, T = 0;
  const int32_t* tokens = nullptr;     // "text": ids in [0, vocab_size)
  const int32_t* types = nullptr;      // "types": 0/1 segment ids (nullptr: all 0; ignored without token types)
  const int32_t* padding = nullptr;    // "padding_mask": 1 real, 0 padding (nullptr: no padding)
  const int32_t* labels = nullptr;     // "labels": the masked-LM target ids, −1 where nothing is predicted
  const float* loss_mask = nullptr;    // "loss_mask": 1 where a label is predicted
  const int32_t* is_random = nullptr;  // "is_random" [B]: the sentence-order label (binary head only)
};

// The losses of one micro-batch (bert-t5-reference-notes §1.4):
//   lm  = Σ_i CE_i·loss_mask_i / Σ_i loss_mask_i   (NaN when the micro-batch masks nothing: 0/0, as Megatron)
//   sop = mean over rows of CE(binary logits, is_random) (rows with is_random −1 ignored); 0 without the head
struct BertLosses {
  double lm = 0.0, sop = 0.0;
  double total() const { return lm + sop; }
};

// Megatron's BERT (pre-LN) or the original post-LN BERT on one Backend, as one rank of a tensor-parallel group.
//
// Parameters carry Hugging Face names, in HF's state_dict order (MegatronBertForPreTraining for the Megatron flavour,
// BertForPreTraining for the original), q/k/v as three [H,H] nn.Linear tensors (HF's layout; Megatron's fused
// per-head [3H,H] is the same numbers reordered, §1.8), every weight [out,in]. Without the binary head the Megatron
// flavour still holds bert.embeddings.token_type_embeddings.weight [2,H], ZERO and unused (its gradient stays 0),
// so that an HF MegatronBert, which always adds a token-type row, computes the same function (§1.5).
//
// Initialisation (§1.6): N(0, init_std) for embeddings, q/k/v, intermediate, pooler, head transform and binary
// head; Megatron flavour: N(0, init_std/√(2·layers)) for the two output projections (HF/DLE's original BERT: plain
// init_std there too); biases 0, LayerNorms 1/0. Streams as GPT's: the same weights on every parallel layout.
class Bert : public LanguageModel {
 public:
  explicit Bert(const BertConfig& config, kernels::Backend& backend,
                dist::Communicator* tensor_parallel = nullptr, Stage stage = {});
  ~Bert();

  const BertConfig& config() const { return config_; }
  // A pipeline stage draws the whole model's stream and keeps its own tensors (as GPT::init_weights).
  void init_weights(uint64_t seed);
  const Stage& stage() const { return stage_; }
  // The whole model's table (tensor-parallel size 1) for a config, without allocating a model.
  static param::ParamTable parameter_table(const BertConfig& config);

  // Training forward over one micro-batch; `step` (training set) turns dropout on, nullptr: evaluation. Throws
  // lmforge::Error for T > max_positions, ids outside the vocabulary, a label outside [−1, vocab) or −1 under a
  // nonzero loss mask, or missing is_random with the binary head.
  BertLosses forward(const BertInputs& in, const layers::ForwardStep* step = nullptr);
  // Adds loss_scale · d(lm + sop)/dθ of the last forward into grads(). When the lm loss was NaN (nothing masked)
  // its term adds no gradient (there is nothing to learn from); the caller sees the NaN loss and reports it.
  void backward(float loss_scale = 1.0f);

  // Pipeline stages (model::Stage: the first holds the embeddings and the original flavour's embedding LayerNorm,
  // the last the final LayerNorm, the pooler and both heads, with a copy of the tied word table
  // "bert.embeddings.word_embeddings.weight" unless it is also the first), as GPT's: forward_stage reads in.tokens (first stage) or `input` [B·T, H]
  // (copied), and the padding mask on every stage; the last stage reads the labels and returns the losses, the
  // others return zeros and leave their output [B·T, H] at stage_output() (valid until the next forward).
  // backward_stage starts from the losses on the last stage, from output_grad d(loss)/d(output) [B·T, H] (already
  // carrying loss_scale) on the others; afterwards, unless this is the first stage, input_grad() holds
  // d(loss)/d(input) [B·T, H] (valid until the next forward or backward). On the whole model they are forward() and
  // backward().
  //
  // `slot` names the micro-batch's activations (as GPT::forward_stage): each forward keeps them in its slot until
  // backward_stage of the same slot. forward()/backward() use slot 0.
  BertLosses forward_stage(const BertInputs& in, const float* input, const layers::ForwardStep* step,
                           size_t slot = 0);
  // Stages exchange fp32: under --bf16/--fp16 the activations and their gradients are converted at the boundary,
  // exactly (every bf16/fp16 value is an fp32 value).
  kernels::Tensor stage_output() const { return stage_out_; }  // [B·T, H] fp32 on the device
  void backward_stage(const float* output_grad, float loss_scale = 1.0f, size_t slot = 0);
  kernels::Tensor input_grad() const { return input_grad_; }
  // Layer forwards run so far (recomputation included).
  int64_t layer_forwards() const { return stack_.layer_forwards(); }

  // Model FLOPs of one training step on B×T tokens: 6·(matrix parameters incl. the tied decoder) + 12·L·H·T per
  // token (the pooler and binary head are negligible).
  double training_flops(int B, int T) const;

 private:
  // What one micro-batch's forward keeps for its backward (see forward_stage's slot).
  struct Activations {
    int B = 0, T = 0;
    bool have_forward = false, emb_dropped = false;
    layers::ForwardStep step;
    double mask_sum = 0.0;
    kernels::Buffer tokens, positions, types, padding;
    kernels::Buffer emb_normed, emb_out;  // original flavour: the embedding's LayerNorm, its dropout
    kernels::Buffer final_out;            // the final LayerNorm's output (Megatron flavour)
    kernels::Buffer input, input_act;     // a later stage's copy of its input (fp32, activation dtype)
    kernels::Tensor body_out, embedded;
    layers::Embedding::Saved embedding;
    layers::LayerNorm::Saved ln_embedding, ln_final;
    layers::TransformerStack::Saved stack;
    layers::LmHead::Saved head;
    layers::ClassificationHead::Saved binary;
  };

  void check_inputs(const BertInputs& in) const;
  double lm_head_forward(const kernels::Tensor& final_out, const BertInputs& in, Activations& a);

  // The stage's embeddings (first stage) or its input activation (the others): x [B·T, H].
  kernels::Tensor embed_or_input(const BertInputs& in, const float* input, const layers::ForwardStep& step,
                                 Activations& a);
  BertLosses heads_forward(const BertInputs& in, const kernels::Tensor& x, Activations& a);
  void embedding_backward(kernels::Tensor d, Activations& a);

  BertConfig config_;
  Stage stage_;
  std::unique_ptr<layers::Embedding> embedding_;
  std::unique_ptr<layers::LayerNorm> ln_embedding_;  // original flavour
  layers::Dropout drop_embedding_;                   // original flavour: after ln_embedding_
  layers::TransformerStack stack_;                   // this stage's layers, with full recomputation if configured
  std::vector<size_t> layer_first_;                  // table index of each layer's first tensor
  size_t after_layers_ = 0;                          // table index of the first tensor after the layers
  std::unique_ptr<layers::LayerNorm> ln_final_;      // Megatron flavour
  std::unique_ptr<layers::LmHead> head_;             // the masked-LM head over the masked rows
  std::unique_ptr<layers::ClassificationHead> binary_;  // the pooler and the sentence-order / NSP head

  std::vector<std::unique_ptr<Activations>> slots_;
  kernels::Buffer d_final_, d_residual_, d_emb_, d_emb_sum_;  // scratch of one backward
  kernels::Buffer stage_out_buf_, d_output_, d_input_;  // fp32 stage boundary: output, its gradient, the input's
  kernels::Tensor stage_out_, input_grad_;
};

}  // namespace lmforge::model
