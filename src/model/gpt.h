// defines: lmforge::model::GPTConfig, ParamTensor, GPT (GPT-2: parameters in Hugging Face layout, forward with
// mean cross-entropy, backward, last-position logits and key/value-cache decoding for inference)
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"

namespace lmforge::model {

// GPT-2 shapes, named as Megatron's arguments.
struct GPTConfig {
  int num_layers = 12;        // transformer blocks (HF n_layer)
  int hidden = 768;           // model width C (HF n_embd)
  int heads = 12;             // attention heads; must divide hidden (HF n_head)
  int seq_length = 1024;      // training sequence length; <= max_positions
  int max_positions = 1024;   // rows of the position table wpe (HF n_positions)
  int vocab_size = 50257;     // the tokenizer's vocabulary
  // The embedding/LM-head table has padded_vocab_size() rows: vocab_size rounded up to a multiple of this
  // (Megatron's --make-vocab-size-divisible-by; 1 = no padding). As in Megatron the padded columns are ordinary
  // logits and TAKE PART IN THE SOFTMAX (they are never targets, so training drives them down); a checkpoint
  // therefore describes a model with padded_vocab_size() outputs (HF config vocab_size = padded size).
  int make_vocab_size_divisible_by = 128;
  float init_std = 0.02f;     // N(0, init_std) init; both c_proj weights use init_std / sqrt(2·num_layers)

  int padded_vocab_size() const;
  // Throws lmforge::Error naming the first inconsistent field (heads not dividing hidden, seq_length >
  // max_positions, non-positive sizes, ...).
  void validate() const;
};

// One named parameter tensor inside the contiguous parameter (and gradient) buffer.
struct ParamTensor {
  std::string name;             // Hugging Face GPT-2 name, e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;   // Hugging Face layout: Conv1D weights are [in, out]; wte [padded_vocab, C]
  size_t offset = 0;            // in floats, from the start of params() / grads()
  size_t numel = 0;
  bool weight_decay = false;    // Megatron/nanoGPT: matrices (wte, wpe included) decay; biases and LayerNorm not
};

// GPT-2 (pre-LayerNorm, GELU tanh approximation, tied embedding/LM head, no dropout) on one Backend.
//
// Memory: parameters and their gradients are two contiguous buffers laid out by tensors() (the table order is
// Hugging Face's state_dict order; a checkpoint writer can save each entry as-is). Activations are allocated
// once for the largest (B, T) seen and reused, because re-allocating the 100 MB logits every step makes glibc
// unmap and page-fault them back each time.
//
// Pointers returned here are device memory of the backend (host memory for the CPU backend). Token and target
// arrays are host memory.
class GPT {
 public:
  explicit GPT(const GPTConfig& config, kernels::Backend& backend = kernels::cpu_backend());
  ~GPT();
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;

  const GPTConfig& config() const { return config_; }
  kernels::Backend& backend() { return backend_; }

  // Megatron's initialisation from a seeded generator (deterministic for a given seed and config): wte, wpe,
  // c_attn and c_fc weights N(0, init_std); c_proj weights N(0, init_std/sqrt(2·num_layers)); biases 0;
  // LayerNorm weight 1, bias 0. Also zeroes the gradients.
  void init_weights(uint64_t seed);

  size_t num_parameters() const { return num_params_; }
  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() { return grads_; }
  const float* grads() const { return grads_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // The table tensors() will hold for a config, without allocating a model (e.g. to check a checkpoint first).
  static std::vector<ParamTensor> parameter_table(const GPTConfig& config);
  // Throws lmforge::Error for an unknown name.
  const ParamTensor& tensor(std::string_view name) const;
  float* param(std::string_view name) { return params_ + tensor(name).offset; }
  float* grad(std::string_view name) { return grads_ + tensor(name).offset; }

  // Training forward pass over tokens/targets [B,T] (B·T ids each, row-major). Returns the mean cross-entropy
  // over all B·T positions. Throws lmforge::Error for T > max_positions or an id outside [0, vocab_size).
  float forward(const int32_t* tokens, const int32_t* targets, int B, int T);
  // Logits [B,T,padded_vocab] of the last forward(); valid until backward(), which reuses them for dlogits.
  const float* logits() const { return acts_.logits; }
  // Adds (+=) loss_scale · d(mean loss)/d(params) of the last forward() into grads(), so micro-batches
  // accumulate; loss_scale = 1/micro_batches makes the sum Megatron's average at no extra pass over the grads.
  void backward(float loss_scale = 1.0f);
  void zero_grad();
  // Called inside backward() each time the gradients from flat offset `from` to the end of grads() are final for
  // this pass (after ln_f, after each block, and with 0 at the end), so that a data-parallel reduction of them can
  // start while earlier layers are still being differentiated. Empty: none.
  void set_gradients_ready_hook(std::function<void(size_t from)> hook) { ready_hook_ = std::move(hook); }

  // Inference: logits [B, padded_vocab] of the last position of each row (no targets, no loss).
  const float* forward_logits(const int32_t* tokens, int B, int T);

  // Generation with a key/value cache: decode_begin(B) empties the cache for B rows; each decode_step(tokens[B])
  // appends one position per row and returns that position's logits [B, padded_vocab] — what forward_logits
  // over the whole prefix returns, at O(prefix) instead of O(prefix²) cost per token. At most max_positions
  // steps; the pointer is valid until the next call.
  void decode_begin(int B);
  const float* decode_step(const int32_t* tokens);
  int decode_position() const { return decode_pos_; }

  // Model FLOPs of one training step (forward + backward) on B×T tokens, as PaLM/nanoGPT count them:
  // 6·(matrix parameters incl. the LM head) + 12·layers·hidden·T per token.
  double training_flops(int B, int T) const;

 private:
  struct Layer {
    float *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
  };
  // Activation buffers for one (B,T); per-layer arrays are [num_layers] slices of one allocation.
  struct Acts {
    float* encoded = nullptr;  // [N,C]
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *attproj, *res2, *ln2, *ln2_mean, *ln2_rstd, *fch,
        *fch_gelu, *fcproj, *res3;  // per layer
    float *lnf, *lnf_mean, *lnf_rstd;
    float* logits = nullptr;   // [N,Vp], overwritten in place by dlogits in backward()
    float *losses, *lse;       // [N]
    float* last = nullptr;     // [B,C] last-position rows for forward_logits
    float* last_logits = nullptr;  // [B,Vp]
    // backward scratch
    float *d_res, *d_ln, *d_atty, *d_qkv, *d_fch_gelu, *d_fch;
  };

  Layer layer_params(float* base, int l) const;
  void ensure_activations(int B, int T);
  void check_ids(const int32_t* ids, size_t n, const char* what) const;
  void forward_body(const int32_t* tokens, int B, int T);  // up to and including ln_f

  GPTConfig config_;
  kernels::Backend& backend_;
  std::vector<ParamTensor> tensors_;
  size_t num_params_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;

  Acts acts_;
  float* acts_memory_ = nullptr;
  size_t acts_capacity_ = 0;      // floats in acts_memory_; a smaller (B,T) reuses it
  int B_ = 0, T_ = 0;
  // key/value cache and per-step buffers of decode_step()
  float* decode_memory_ = nullptr;
  size_t decode_capacity_ = 0;
  int decode_B_ = 0, decode_pos_ = 0;
  float *kcache_ = nullptr, *vcache_ = nullptr;  // [L, B, max_positions, C]
  float *dec_x_, *dec_ln_, *dec_qkv_, *dec_atty_, *dec_tmp_, *dec_fch_, *dec_scores_, *dec_mean_, *dec_rstd_,
      *dec_logits_;
  bool have_targets_ = false;     // last forward() computed a loss and backward() may run
  std::vector<int32_t> tokens_, targets_;
  std::function<void(size_t)> ready_hook_;
};

}  // namespace lmforge::model
