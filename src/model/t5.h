// defines: lmforge::model::T5Config, T5Inputs, T5 (Megatron's encoder-decoder "T5" composed from the layer
//          library: one word+position embedding shared by encoder and decoder, pre-LN encoder with a padding mask and
//          a final LayerNorm, decoder layers with causal self-attention, cross-attention and three LayerNorms, a
//          final LayerNorm, a tied LM head with a bias; training forward/backward; any tensor-parallel size)
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
#include "layers/cross_entropy.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layernorm.h"
#include "layers/lm_head.h"
#include "layers/linear.h"
#include "layers/parameter_store.h"
#include "layers/recompute.h"
#include "layers/tensor_parallel.h"
#include "layers/transformer_layer.h"
#include "layers/workspace.h"
#include "model/language_model.h"
#include "model/transformer_config.h"
#include "param/parameter.h"

namespace lmforge::model {

// Megatron T5's shapes (bert-t5-reference-notes §3.1), named as its arguments.
// The shared transformer fields are TransformerConfig's (vocab_size: the tokenizer's vocabulary including [BOS]/[EOS]
// and the --vocab-extra-ids sentinels, 30522 + 2 + 100 for bert-base-uncased). Its recompute applies to the encoder
// and the decoder stack each: selective recomputes the core of every self- and cross-attention; full counts
// num_layers in each stack, as Megatron's two ParallelTransformers do.
struct T5Config : TransformerConfig {
  T5Config() { vocab_size = 30624; }
  int encoder_num_layers = 12;  // --encoder-num-layers (or --num-layers)
  int decoder_num_layers = 0;   // --decoder-num-layers; 0: the encoder's count (Megatron M23 has no default and
                                // crashes without it)
  int encoder_seq_length = 512;  // --encoder-seq-length (or --seq-length)
  int decoder_seq_length = 128;  // --decoder-seq-length
  kernels::GeluKind gelu = kernels::GeluKind::TANH;  // Megatron's fused bias-GELU (tanh); ERF: --no-bias-gelu-fusion

  int decoder_layers() const { return decoder_num_layers > 0 ? decoder_num_layers : encoder_num_layers; }
  // Throws lmforge::Error naming the first inconsistent field.
  void validate() const;
};

// One micro-batch (host memory, row-major), the fields of Megatron's T5Dataset.
struct T5Inputs {
  int B = 0, Te = 0, Td = 0;
  const int32_t* encoder_tokens = nullptr;   // "text_enc" [B,Te]
  const int32_t* encoder_padding = nullptr;  // [B,Te] 1 real, 0 padding (nullptr: none); Megatron's enc_mask keys
  const int32_t* decoder_tokens = nullptr;   // "text_dec" [B,Td]
  const int32_t* decoder_padding = nullptr;  // [B,Td] 1 real, 0 padding (nullptr: none)
  const int32_t* labels = nullptr;           // "labels" [B,Td], −1 where nothing is predicted
  const float* loss_mask = nullptr;          // "loss_mask" [B,Td]
};

// A pipeline stage of a T5 is a model::Stage over the encoder's layers followed by the decoder's (decoder layer l is
// layer encoder_num_layers + l). Megatron splits at --pipeline-model-parallel-split-rank S: stages [0, S) hold
// encoder layers, [S, P) decoder layers. What a stage holds follows from its layers: the embedding (word and position
// tables) when it holds encoder layer 0 (the encoder's lookup) or decoder layer 0 (the decoder's); the encoder's
// final LayerNorm with the encoder's last layer; the decoder's final LayerNorm, the LM head and the loss with the
// decoder's last layer (and a copy of the tied word table when it holds no embedding). The copies of the tables are
// initialised to the same values and their gradients summed between their holders every step (Megatron's embedding
// and position-embedding groups). The whole model is the stage that holds every layer.

// Megatron's T5 on one Backend, as one rank of a tensor-parallel group.
//
// Parameters carry Megatron M23's legacy module names (there is no Hugging Face class for this model; HF's T5 is a
// different architecture, §3.1), in its state_dict order, every weight [out,in]:
//   language_model.embedding.word_embeddings.weight [Vpad,H]     (also the LM head's weight: tied)
//   language_model.embedding.position_embeddings.weight [P,H]
//   language_model.encoder.layers.<i>.input_norm.{weight,bias}
//     ….self_attention.query_key_value.{weight,bias} [3H,H], rows per head [head][q|k|v][d]
//     ….self_attention.dense.{weight,bias} [H,H]
//     ….post_attention_norm.{weight,bias}
//     ….mlp.dense_h_to_4h.{weight,bias} [F,H], ….mlp.dense_4h_to_h.{weight,bias} [H,F]
//   language_model.encoder.final_norm.{weight,bias}
//   language_model.decoder.layers.<i>.input_norm, self_attention.query_key_value, self_attention.dense,
//     post_attention_norm, inter_attention.query [H,H], inter_attention.key_value [2H,H] (rows [head][k|v][d]),
//     inter_attention.dense, post_inter_attention_norm, mlp.dense_h_to_4h, mlp.dense_4h_to_h
//   language_model.decoder.final_norm.{weight,bias}
//   lm_head.bias [Vpad]
// (Megatron's checkpoints nest these under "model"; pre-2023 ones say *_layernorm for *_norm.)
//
// Initialisation (§1.6): N(0, init_std) for the embeddings, q/k/v projections and dense_h_to_4h; N(0, init_std /
// √(2·encoder layers)) for every output projection (self- and cross-attention dense, dense_4h_to_h) of BOTH
// stacks; biases 0, LayerNorms 1/0. Layout-independent streams as GPT's.
class T5 : public LanguageModel {
 public:
  explicit T5(const T5Config& config, kernels::Backend& backend,
              dist::Communicator* tensor_parallel = nullptr, Stage stage = {});
  ~T5();

  const T5Config& config() const { return config_; }
  // A pipeline stage draws the whole model's stream and keeps its own tensors (as GPT::init_weights).
  void init_weights(uint64_t seed);
  const Stage& stage() const { return stage_; }
  bool whole() const { return stage_.whole(total_layers()); }
  int total_layers() const { return config_.encoder_num_layers + config_.decoder_layers(); }
  // Whether this stage holds the embedding (the encoder's or the decoder's lookup).
  bool holds_embedding() const { return embedding_ != nullptr; }
  static param::ParamTable parameter_table(const T5Config& config);

  // The micro-batch's lm loss Σ CE·loss_mask / Σ loss_mask over the decoder positions (NaN when nothing is
  // masked, as in Megatron). `step` (training set) turns dropout on; nullptr: evaluation. Throws lmforge::Error for
  // lengths beyond max_positions, ids outside the vocabulary, labels outside [−1, vocab) or −1 under a nonzero
  // mask.
  double forward(const T5Inputs& in, const layers::ForwardStep* step = nullptr);
  // Adds loss_scale · d(lm)/dθ of the last forward into grads() (nothing when the loss was NaN).
  void backward(float loss_scale = 1.0f);

  // Pipeline stages (see Stage above); forward() and backward() are the one-stage case. What passes from a stage
  // to the next, per micro-batch (fp32, row-major, H wide; under --bf16/--fp16 the activations are converted at the
  // boundary, exactly: every bf16/fp16 value is an fp32 value):
  //   a stage ending inside the encoder:        its last layer's output [B·Te, H]
  //   a stage ending with the encoder:          the encoder's output [B·Te, H] (after its final LayerNorm)
  //   a stage ending inside the decoder:        [B·Td decoder rows | B·Te rows of the encoder's output], the latter
  //                                             passed on unchanged so that every decoder stage's cross-attention
  //                                             reads it (Megatron's schedules send both tensors to decoder stages)
  // and each stage's input is its predecessor's output. forward_stage returns the lm loss on the last stage (0 on
  // the others) and leaves the output at stage_output() (valid until the next forward); backward_stage starts from
  // the loss (last stage) or from output_grad, shaped as the output; afterwards input_grad() is shaped as the input
  // (a decoder stage's encoder rows sum its cross-attentions' gradients and what came back from later stages).
  // Stage sizes in floats: stage_input_elements / stage_output_elements.
  //
  // `slot` names the micro-batch's activations (as GPT::forward_stage): each forward keeps them in its slot until
  // backward_stage of the same slot. forward()/backward() use slot 0.
  double forward_stage(const T5Inputs& in, const float* input, const layers::ForwardStep* step, size_t slot = 0);
  kernels::Tensor stage_output() const { return stage_out_; }  // fp32 on the device, shaped as described above
  void backward_stage(const float* output_grad, float loss_scale = 1.0f, size_t slot = 0);
  // Layer forwards run so far in both stacks (recomputation included).
  int64_t layer_forwards() const { return encoder_.layer_forwards() + decoder_.layer_forwards(); }
  kernels::Tensor input_grad() const { return input_grad_; }
  size_t stage_input_elements(int B, int Te, int Td) const;
  size_t stage_output_elements(int B, int Te, int Td) const;

  // Inference (dropout off, no padding). forward_logits: the decoder's logits [B·Td, padded_vocab / T] for the
  // whole decoder input — the reference of the cached path. decode_begin runs the encoder once over
  // encoder_tokens [B,Te] and gives its output to every decoder layer (cross-attention keys/values projected once);
  // each decode_step(tokens[B]) appends one decoder position per row (self-attention key/value cache) and returns
  // its logits [B, padded_vocab / T]. At most max_positions decoder positions; forward() ends a decode session.
  const float* forward_logits(const int32_t* encoder_tokens, int B, int Te, const int32_t* decoder_tokens, int Td);
  void decode_begin(const int32_t* encoder_tokens, int B, int Te);
  const float* decode_step(const int32_t* tokens);
  int decode_position() const { return decode_pos_; }

  // 6·(matrix parameters touched per token) per encoder and decoder token + attention terms (PaLM's count).
  double training_flops(int B, int Te, int Td) const;

 private:
  // What one micro-batch's forward keeps for its backward (see forward_stage's slot).
  struct Activations {
    int B = 0, Te = 0, Td = 0;
    bool have_forward = false;
    double mask_sum = 0.0;
    kernels::Buffer tokens, positions, enc_padding, dec_padding;
    kernels::Buffer enc_out, dec_out;       // the encoder's final LayerNorm output; the decoder's (last stage)
    kernels::Buffer stage_in_f32, stage_in;  // a later stage's input (fp32 as received, activation dtype)
    kernels::Tensor enc_pad, dec_pad, enc_body, dec_body, memory;
    layers::Embedding::Saved embedding;
    layers::TransformerStack::Saved encoder, decoder;
    layers::LayerNorm::Saved encoder_norm, decoder_norm;
    layers::LmHead::Saved head;
  };

  // need_labels: training/evaluation (labels and loss mask checked too); false: inference.
  void check_inputs(const T5Inputs& in, bool need_labels = true) const;
  // The stage's layers and final LayerNorms over one micro-batch: the encoder's output in a.memory (when this stage
  // has it), the decoder's final LayerNorm output in a.dec_out (last stage), or the stage's output in stage_out_.
  void forward_body(const T5Inputs& in, const float* input, const layers::ForwardStep& step, Activations& a);
  // The encoder over `tokens` [B·Te] alone, its final LayerNorm's output in decode_memory_ (inference).
  kernels::Tensor encode(const int32_t* tokens, int B, int Te);
  void require_whole(const char* what) const;
  // The lookup of both stacks' tokens (rows [0, Ne) the encoder's, [Ne, Ne + Nd) the decoder's), so that its
  // dropout draws what the whole model's one lookup draws on every stage; a stage uses its own rows.
  kernels::Tensor embed_both(const T5Inputs& in, const layers::ForwardStep& step, Activations& a);
  // rows × H floats of the previous stage (host, fp32) as a device tensor in the activation dtype, kept in `a`
  // until the backward (the layers keep views of it).
  kernels::Tensor stage_input(const float* input, int64_t rows, Activations& a);
  void hook_at(const char* name) {
    if (ready_hook_) ready_hook_(tensor(name).offset);
  }

  T5Config config_;
  Stage stage_;
  // What the stage's layers imply (see Stage above).
  bool encoder_lookup_ = false, decoder_lookup_ = false, encoder_norm_held_ = false, head_held_ = false;
  std::unique_ptr<layers::Embedding> embedding_;
  // This stage's encoder and decoder layers; full recomputation chunks each stack (Megatron's two
  // ParallelTransformers, per stage).
  layers::TransformerStack encoder_, decoder_;
  std::vector<size_t> encoder_first_, decoder_first_;  // table index of each layer's first tensor
  std::unique_ptr<layers::LayerNorm> encoder_norm_, decoder_norm_;
  std::unique_ptr<layers::LmHead> head_;

  std::vector<std::unique_ptr<Activations>> slots_;
  kernels::Buffer logits_, stage_out_buf_;                              // scratch of one forward
  kernels::Tensor stage_out_, input_grad_;                              // the stage's fp32 output, input gradient
  kernels::Buffer d_all_, d_dec_out_, d_memory_, d_output_, d_output_f32_, d_input_, d_input_f32_;  // of one backward
  layers::TransformerStack::Saved encode_saved_;                        // inference: the encoder's activations
  kernels::Buffer decode_tokens_, decode_positions_, decode_memory_;    // a decode session's encoder output
  int decode_B_ = 0, decode_pos_ = 0;
};

}  // namespace lmforge::model
