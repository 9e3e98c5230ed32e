// defines: lmforge::model::TransformerConfig (the transformer fields every model config shares, after Megatron-core's
//          TransformerConfig; GPTConfig, BertConfig and T5Config derive from it and add their own)
#pragma once
#include "layers/recompute.h"
#include "model/language_model.h"

namespace lmforge::model {

// The fields of a transformer that do not depend on the family, named as Megatron's arguments. The layer count and
// the sequence length are not here: GPT and BERT have one stack (num_layers, seq_length), T5 two (encoder_ and
// decoder_num_layers, encoder_ and decoder_seq_length). A family's config sets its own defaults where they differ
// (GPT-2: 1024 positions, a 50257-token vocabulary) and checks the fields in its validate() (ConfigCheck).
struct TransformerConfig {
  int hidden = 768;         // --hidden-size: model width C
  int heads = 12;           // --num-attention-heads; must divide hidden
  int ffn_hidden = 0;       // --ffn-hidden-size: inner width of the MLP; 0: 4·hidden
  int max_positions = 512;  // --max-position-embeddings: rows of the position table; >= every sequence length
  // The tokenizer's vocabulary (for BERT and T5 including the [BOS]/[EOS] Megatron's BertWordPiece tokenizers append,
  // and T5's sentinels). The embedding/LM-head table has padded_vocab_size() rows: vocab_size rounded up to a
  // multiple of make_vocab_size_divisible_by (--make-vocab-size-divisible-by; 1 = no padding). As in Megatron the
  // padded columns are ordinary logits and TAKE PART IN THE SOFTMAX (they are never targets, so training drives them
  // down); a checkpoint therefore describes a model with padded_vocab_size() outputs (HF config vocab_size = padded
  // size). Unlike Megatron the padding does NOT grow with the tensor-parallel size (Megatron pads to a multiple of
  // divisible_by × T), so a checkpoint has the same shapes under every layout; T must divide the padded size.
  int vocab_size = 0;
  int make_vocab_size_divisible_by = 128;
  float layernorm_eps = 1e-5f;  // --norm-epsilon / --layernorm-epsilon: every LayerNorm (original BERT: 1e-12)
  float init_std = 0.02f;       // --init-method-std: N(0, init_std); output projections use init_std / sqrt(2·layers)
  // Megatron's --hidden-dropout (after the embedding and on each branch before its residual add) and
  // --attention-dropout (on the attention probabilities); 0.1 each by default, as Megatron. Applied only in
  // training forwards (a ForwardStep with training set).
  float hidden_dropout = 0.1f;
  float attention_dropout = 0.1f;
  // Megatron's activation recomputation (--recompute-activations / --recompute-granularity / --recompute-method /
  // --recompute-num-layers, --checkpoint-activations): see layers::Recompute. What is not kept from the forward
  // pass is computed again in the backward, bit for bit the same, so losses and gradients do not change.
  layers::Recompute recompute;

  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int padded_vocab_size() const { return model::padded_vocab_size(vocab_size, make_vocab_size_divisible_by); }
};

}  // namespace lmforge::model
