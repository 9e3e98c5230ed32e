// defines: lmforge::model::GPTConfig, GPT (GPT-2 composed from the layer library: vocabulary-parallel embedding,
//          pre-LN transformer layers, final LayerNorm, tied vocabulary-parallel LM head and cross-entropy; training
//          forward/backward, last-position logits and key/value-cache decoding; any tensor-parallel size)
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
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"
#include "layers/linear.h"
#include "layers/lm_head.h"
#include "layers/parameter_store.h"
#include "layers/recompute.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"
#include "layers/workspace.h"
#include "model/language_model.h"
#include "model/transformer_config.h"
#include "param/parameter.h"

namespace lmforge::model {

// GPT-2 shapes, named as Megatron's arguments; the shared transformer fields (hidden = HF n_embd, heads = n_head,
// max_positions = n_positions, ...) are TransformerConfig's. GPT-2's MLP is 4·hidden wide and its LayerNorm eps
// 1e-5: validate() refuses other ffn_hidden / layernorm_eps values (the model does not read those two fields).
struct GPTConfig : TransformerConfig {
  GPTConfig() {
    max_positions = 1024;
    vocab_size = 50257;
  }
  int num_layers = 12;        // transformer blocks (HF n_layer); both c_proj weights use init_std / sqrt(2·num_layers)
  int seq_length = 1024;      // training sequence length; <= max_positions
  // The LM head and cross-entropy run over chunks of this many rows (positions) so the whole [B·T, vocab] logits are
  // never held: each chunk's logits are made, reduced to the loss and dropped, and made again in the backward
  // (one more head GEMM per chunk). 0: automatic (layers::LmHeadSpec::chunk_rows).
  int loss_chunk_rows = 0;

  // Throws lmforge::Error naming the first inconsistent field (heads not dividing hidden, seq_length >
  // max_positions, non-positive sizes, dropout outside [0,1), ...).
  void validate() const;
};

// GPT-2 (pre-LayerNorm, GELU tanh approximation, tied embedding/LM head) on one Backend, as one rank of a
// tensor-parallel group (none: the whole model).
//
// Parameters and their gradients are two flat buffers laid out by the parameter table (Hugging Face's state_dict
// order and names; with tensor parallelism each tensor's piece, see param::Parameter). Activations are allocated
// once for the largest (B, T) seen and reused. Pointers returned here are device memory of the backend (host
// memory for the CPU backend); token and target arrays are host memory.
class GPT : public LanguageModel {
 public:
  explicit GPT(const GPTConfig& config, kernels::Backend& backend,
               dist::Communicator* tensor_parallel = nullptr, Stage stage = {});
  ~GPT();

  const GPTConfig& config() const { return config_; }
  const Stage& stage() const { return stage_; }

  // Megatron's initialisation from a seeded generator, the same on every parallel layout (see
  // layers::ParameterStore::init): wte, wpe, c_attn and c_fc weights N(0, init_std); c_proj weights
  // N(0, init_std/sqrt(2·num_layers)); biases 0; LayerNorm weight 1, bias 0. Also zeroes the gradients. A pipeline
  // stage draws the whole model's stream and keeps its own tensors.
  void init_weights(uint64_t seed);

  const std::vector<param::Parameter>& tensors() const { return table().all(); }
  // The whole model's table (tensor-parallel size 1) for a config, without allocating a model.
  static param::ParamTable parameter_table(const GPTConfig& config);

  // Training forward pass over tokens/targets [B,T] (B·T ids each, row-major). Returns the mean cross-entropy
  // over all B·T positions. `step` (training set) turns dropout on; nullptr: evaluation. Throws lmforge::Error
  // for T > max_positions or an id outside [0, vocab_size).
  float forward(const int32_t* tokens, const int32_t* targets, int B, int T,
                const layers::ForwardStep* step = nullptr);
  // Logits [B·T, padded_vocab / T] (this rank's vocabulary columns, fp32 runs) of the last forward(); valid until
  // backward(), which overwrites them with their gradient. nullptr when that forward ran the head in several chunks
  // (GPTConfig::loss_chunk_rows), which never holds them all.
  const float* logits() const;
  // Adds (+=) loss_scale · d(mean loss)/d(params) of the last forward() into grads(), so micro-batches
  // accumulate; loss_scale = 1/micro_batches makes the sum Megatron's average at no extra pass over the grads.
  void backward(float loss_scale = 1.0f);

  // Pipeline stages (model::Stage: the first holds the embedding, the last ln_f, the head and the loss; when the
  // last is not also the first it holds its own copy of the tied word table "transformer.wte.weight", initialised
  // to the same values, whose gradient the trainer sums with the first stage's every step, as Megatron's embedding
  // group). forward_stage: the first stage reads `tokens`, the others `input` [B·T, C] (copied: the layers keep
  // views of their inputs until backward); the last stage computes and returns the mean loss over `targets`, the
  // others return 0 and leave their output [B·T, C] at stage_output() (valid until the next forward). On the whole
  // model it is forward().
  //
  // `slot` names the micro-batch's activations: a 1F1B stage has several micro-batches in flight, each forward
  // keeping its activations in its own slot until backward_stage of the same slot (so each micro-batch's forward
  // runs once). forward()/backward() use slot 0.
  float forward_stage(const int32_t* tokens, const float* input, const int32_t* targets, int B, int T,
                      const layers::ForwardStep* step, size_t slot = 0);
  // Stages exchange fp32 (under --bf16/--fp16 the activations and their gradients are converted at the boundary,
  // exactly: every bf16/fp16 value is an fp32 value).
  // [B·T, C] fp32 device tensors (the pipeline moves them through the backend's copies).
  kernels::Tensor stage_output() const { return stage_out_; }
  // backward_stage of the micro-batch in `slot`: the last stage starts from its loss (output_grad unused), the
  // others from output_grad d(loss)/d(output) [B·T, C]; adds loss_scale · d/dθ into grads() like backward();
  // afterwards, unless this is the first stage, input_grad() holds d(loss)/d(input) [B·T, C] (valid until the next
  // forward or backward).
  void backward_stage(const float* output_grad, float loss_scale = 1.0f, size_t slot = 0);
  kernels::Tensor input_grad() const { return input_grad_; }
  // Layer forwards run so far (recomputation included): one per layer and micro-batch unless recomputing.
  int64_t layer_forwards() const { return stack_.layer_forwards(); }

  // Inference: logits [B, padded_vocab / T] of this rank's vocabulary columns at the last position of each row.
  const float* forward_logits(const int32_t* tokens, int B, int T);

  // Generation with a key/value cache: decode_begin(B) empties the cache for B rows; each decode_step(tokens[B])
  // appends one position per row and returns that position's logits [B, padded_vocab / T] — what forward_logits
  // over the whole prefix returns, at O(prefix) instead of O(prefix²) cost per token. At most max_positions
  // steps; the pointer is valid until the next call.
  void decode_begin(int B);
  const float* decode_step(const int32_t* tokens);
  int decode_position() const { return decode_pos_; }

  // Model FLOPs of one training step (forward + backward) on B×T tokens, as PaLM/nanoGPT count them:
  // 6·(matrix parameters incl. the LM head) + 12·layers·hidden·T per token.
  double training_flops(int B, int T) const;

 private:
  // What one micro-batch's forward keeps for its backward (see forward_stage's slot).
  struct Activations {
    int B = 0, T = 0, positions_T = 0;
    bool have_targets = false, have_forward = false;
    kernels::Buffer tokens, positions, input, input_act, normed;
    kernels::Tensor body_out;  // the last layer's output
    layers::Embedding::Saved embedding;
    layers::TransformerStack::Saved stack;
    layers::LayerNorm::Saved ln_f;
    layers::LmHead::Saved head;
  };

  kernels::Tensor forward_body(const int32_t* tokens, const float* input, int B, int T,
                               const layers::ForwardStep& step, Activations& a);
  void require_whole(const char* what) const;
  // t as fp32: itself, or converted into stage_f32_ (a stage boundary under mixed precision).
  kernels::Tensor stage_to_f32(const kernels::Tensor& t);

  GPTConfig config_;
  Stage stage_;
  std::unique_ptr<layers::Embedding> embedding_;
  layers::TransformerStack stack_;   // this stage's layers, with full recomputation when configured
  std::vector<size_t> layer_first_;  // index of each layer's first tensor in the table
  std::unique_ptr<layers::LayerNorm> ln_f_;
  std::unique_ptr<layers::LmHead> head_;

  std::vector<std::unique_ptr<Activations>> slots_;
  kernels::Tensor stage_out_, input_grad_;  // the last forward's output, the last backward's input gradient (fp32)
  kernels::Buffer d_residual_, last_, last_logits_, last_rows_;
  kernels::Buffer stage_f32_;  // a stage's fp32 output / input gradient under mixed precision
  int decode_B_ = 0, decode_pos_ = 0;
};

}  // namespace lmforge::model
