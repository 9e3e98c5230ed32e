// defines: lmforge::layers::TransformerLayerSpec, TransformerLayer (pre- or post-LayerNorm block: self-attention,
//          optional cross-attention, MLP, hidden dropout on each branch; training forward/backward and decoding)
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "layers/attention.h"
#include "layers/dropout.h"
#include "layers/layernorm.h"
#include "layers/mlp.h"

namespace lmforge::layers {

struct TransformerLayerSpec {
  int layer = 0;                 // number (dropout streams)
  int64_t hidden = 0;
  bool pre_layernorm = true;     // GPT-2 / Megatron; false: the original BERT (LayerNorm after each residual add)
  float layernorm_eps = 1e-5f;
  // LayerNorm names: pre-LN: ln1 before attention, ln2 before the MLP, ln_cross before cross-attention; post-LN: ln1
  // after the attention residual, ln2 after the MLP residual, ln_cross after the cross-attention residual.
  std::string ln1, ln2, ln_cross;
  AttentionSpec attention;
  std::optional<AttentionSpec> cross_attention;  // decoder layers of an encoder-decoder
  MlpSpec mlp;
  float hidden_dropout = 0.0f;   // Megatron's --hidden-dropout on each branch before its residual add
};

// What a layer's forward reads besides its input x: the micro-batch's shape, the self-attention's key padding, and
// for cross-attention the encoder's output and its padding.
struct LayerInputs {
  int B = 0, T = 0;                // x is [B·T, C]
  kernels::Tensor key_padding;     // i32 [B,T], 1 real / 0 padding; absent: no padding
  kernels::Tensor memory;          // [B·Tk, C] (decoder layers of an encoder-decoder; kept until backward)
  kernels::Tensor memory_padding;  // i32 [B,Tk]; absent: no padding
  int Tk = 0;
};

// Pre-LN:  h = x + drop(attn(ln1(x)));  [h = h + drop(cross(lnc(h), memory))];  y = h + drop(mlp(ln2(h)))
// Post-LN: h = ln1(x + drop(attn(x)));  [h = lnc(h + drop(cross(h, memory)))];  y = ln2(h + drop(mlp(h)))
// The same object serves training (forward/backward), evaluation and key/value-cache decoding, at every
// tensor-parallel size.
class TransformerLayer {
 public:
  // What one forward keeps for its backward (the caller owns it, one per call in flight; an empty Saved holds
  // nothing). Its views (x, memory, the inputs' padding) must stay valid until the backward.
  struct Saved {
    int64_t N = 0;
    ForwardStep step;  // the dropout masks of the backward are this step's
    kernels::Tensor x, memory;
    // [N,C]: pre-LN: normed1, h1 (after attention), normed_cross, h2 (after cross), normed2, out; post-LN: sum1,
    // h1, sum_cross, h2, sum2, out (normed* hold the sums).
    kernels::Buffer normed1, h1, normed_cross, h2, normed2, out;
    LayerNorm::Saved ln1, ln2, ln_cross;
    Attention::Saved attention, cross;
    Mlp::Saved mlp;
  };

  TransformerLayer(ParameterStore& store, const TensorParallel& tp, Workspace& workspace, TransformerLayerSpec spec);
  ~TransformerLayer();
  kernels::Backend& backend() const { return backend_; }

  // x [B·T, C] with the rest of the micro-batch in `in`. Returns y [B·T, C], held in `saved` (valid while it is).
  kernels::Tensor forward(const kernels::Tensor& x, const LayerInputs& in, const ForwardStep& step, Saved& saved);
  // For the forward that filled `saved`: on entry d holds d(loss)/dy, on exit d(loss)/dx (in place: the residual
  // stream's gradient flows through one buffer); dmemory += d/dmemory for cross-attention (optional).
  void backward(const kernels::Tensor& d, const kernels::Tensor& dmemory, Saved& saved);

  // Decoding (pre- or post-LN): x [B,C] is the new position of every row, replaced by the layer's output for it.
  // decode_begin(B, max_len) serves layers without cross-attention; a decoder layer of an encoder-decoder takes the
  // encoder's output memory [B·Tk, C] (no padding: every key is real), whose cross-attention keys and values are
  // projected once here and reused by every decode_step.
  void decode_begin(int B, int max_len);
  void decode_begin(int B, int max_len, const kernels::Tensor& memory, int Tk);
  void decode_step(const kernels::Tensor& x, int pos);

 private:
  // out = x + drop(branch) with the branch output in `branch` (Slot::BRANCH_OUT).
  void join(const kernels::Tensor& out, const kernels::Tensor& x, const kernels::Tensor& branch,
            const Dropout& dropout, const ForwardStep& step);
  // The gradient that reaches a branch's output from d(out) of the join: d itself, or its dropout backward.
  kernels::Tensor branch_grad(const kernels::Tensor& d, const Dropout& dropout, const ForwardStep& step);

  Workspace& workspace_;
  TransformerLayerSpec spec_;
  kernels::Backend& backend_;
  std::unique_ptr<LayerNorm> ln1_, ln2_, ln_cross_;
  std::unique_ptr<Attention> attention_, cross_;
  std::unique_ptr<Mlp> mlp_;
  Dropout drop_attention_, drop_cross_, drop_mlp_;
  kernels::Buffer dec_normed_, dec_branch_;
};

}  // namespace lmforge::layers
