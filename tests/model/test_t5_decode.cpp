// defines: T5 decoding with caches equals the full forward: decode_begin (the encoder once, the cross-attention's
// keys/values projected once) and decode_step (one decoder position over the self-attention's key/value cache) give
// at every position the logits that forward_logits computes over the whole decoder input (and forward()'s loss
// agrees with forward_logits); several rows at once; decoding errors.
//
// Measured: max |cached − full| / max |full| = 0.6e-6 .. 1.5e-6 (different summation orders in the attention
// kernels). Checked to fail (each run once): without the cross-attention step in TransformerLayer::decode_step
// (relative difference 1.0 / 1.27) and with decode_begin_cross projecting every key/value from the memory's first
// row (0.9 / 1.18).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/t5.h"
#include "util/error.h"

namespace lmforge::model {
namespace {

T5Config small_t5(bool erf = false) {
  T5Config c;
  c.encoder_num_layers = 2;
  c.decoder_num_layers = 3;  // unequal stacks: the decoder's own count is used
  c.hidden = 48;
  c.heads = 4;
  c.ffn_hidden = 80;
  c.encoder_seq_length = 24;
  c.decoder_seq_length = 16;
  c.max_positions = 32;
  c.vocab_size = 300;
  c.make_vocab_size_divisible_by = 128;
  c.init_std = 0.3f;  // logits far from uniform: differences show
  c.hidden_dropout = 0.1f;  // inference must not apply them
  c.attention_dropout = 0.1f;
  if (erf) c.gelu = kernels::GeluKind::ERF;
  return c;
}

std::vector<int32_t> random_ids(size_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = (int32_t)(rng() % (uint32_t)vocab);
  return v;
}

// Cached logits of every decoder position vs the full forward's, for B rows.
double cached_vs_full(T5& t5, int B, int Te, int Td, uint32_t seed) {
  const T5Config& c = t5.config();
  const int Vp = c.padded_vocab_size();
  const auto enc = random_ids((size_t)B * Te, c.vocab_size, seed), dec = random_ids((size_t)B * Td, c.vocab_size, seed + 1);
  const float* full_ptr = t5.forward_logits(enc.data(), B, Te, dec.data(), Td);
  const std::vector<float> full(full_ptr, full_ptr + (size_t)B * Td * Vp);
  double worst = 0.0, scale = 0.0;
  t5.decode_begin(enc.data(), B, Te);
  for (int t = 0; t < Td; t++) {
    std::vector<int32_t> column(B);
    for (int b = 0; b < B; b++) column[b] = dec[(size_t)b * Td + t];
    const float* step = t5.decode_step(column.data());
    EXPECT_EQ(t5.decode_position(), t + 1);
    for (int b = 0; b < B; b++)
      for (int v = 0; v < Vp; v++) {
        const double want = full[((size_t)b * Td + t) * Vp + v];
        worst = std::max(worst, std::fabs((double)step[(size_t)b * Vp + v] - want));
        scale = std::max(scale, std::fabs(want));
      }
  }
  EXPECT_GT(scale, 1.0);
  return worst / scale;
}

TEST(T5Decode, CachedDecodingEqualsTheFullForward) {
  for (bool erf : {false, true}) {
    T5 t5(small_t5(erf), lmforge::kernels::cpu_backend());
    t5.init_weights(5);
    const double one = cached_vs_full(t5, 1, 13, 11, 7);
    const double three = cached_vs_full(t5, 3, 9, 16, 8);  // several rows; the decoder up to its full length
    std::printf("gelu %s: max relative logit difference %.3g (B=1), %.3g (B=3)\n", erf ? "erf" : "tanh", one, three);
    EXPECT_LT(one, 1e-5);
    EXPECT_LT(three, 1e-5);
  }
}

// forward_logits is the loss path's logits: the loss of forward() over them equals the mean cross-entropy computed
// here from forward_logits (no padding, every position predicted).
TEST(T5Decode, ForwardLogitsAreTheLossPathsLogits) {
  T5 t5(small_t5(), lmforge::kernels::cpu_backend());
  t5.init_weights(9);
  const int B = 2, Te = 10, Td = 7, Vp = t5.config().padded_vocab_size(), V = t5.config().vocab_size;
  const auto enc = random_ids((size_t)B * Te, V, 1), dec = random_ids((size_t)B * Td, V, 2),
             labels = random_ids((size_t)B * Td, V, 3);
  const float* p = t5.forward_logits(enc.data(), B, Te, dec.data(), Td);
  const std::vector<float> logits(p, p + (size_t)B * Td * Vp);
  double ce = 0.0;
  for (int n = 0; n < B * Td; n++) {
    const float* row = logits.data() + (size_t)n * Vp;
    double m = -INFINITY, s = 0.0;
    for (int v = 0; v < Vp; v++) m = std::max(m, (double)row[v]);
    for (int v = 0; v < Vp; v++) s += std::exp(row[v] - m);
    ce += m + std::log(s) - row[labels[n]];
  }
  const std::vector<float> mask((size_t)B * Td, 1.0f);
  T5Inputs in;
  in.B = B, in.Te = Te, in.Td = Td;
  in.encoder_tokens = enc.data();
  in.decoder_tokens = dec.data();
  in.labels = labels.data();
  in.loss_mask = mask.data();
  EXPECT_NEAR(t5.forward(in), ce / (B * Td), 1e-5 * ce / (B * Td));
}

TEST(T5Decode, Errors) {
  T5 t5(small_t5(), lmforge::kernels::cpu_backend());
  const std::vector<int32_t> tok = {1};
  EXPECT_THROW(t5.decode_step(tok.data()), Error);  // no decode_begin
  const std::vector<int32_t> bad = {1, 300};
  EXPECT_THROW(t5.decode_begin(bad.data(), 1, 2), Error);  // id outside the vocabulary
  const std::vector<int32_t> enc(33, 1);
  EXPECT_THROW(t5.decode_begin(enc.data(), 1, 33), Error);  // beyond max_positions
  t5.decode_begin(enc.data(), 1, 5);
  for (int t = 0; t < 32; t++) t5.decode_step(tok.data());
  EXPECT_THROW(t5.decode_step(tok.data()), Error);  // the decoder is max_positions long
  // A forward ends the decode session (the encoder's output buffer is rewritten).
  t5.forward_logits(enc.data(), 1, 4, tok.data(), 1);
  EXPECT_THROW(t5.decode_step(tok.data()), Error);
}

}  // namespace
}  // namespace lmforge::model
