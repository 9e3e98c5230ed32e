// defines: Megatron-flavour BERT parity against the shared reference (megatron_samples/bert_model_small): its
// weights with HF MegatronBertForPreTraining names, the first 8 training samples of bert_s128 as one micro-batch,
// dropout 0; the float64 loss, lm loss, sop loss (1e-5 relative) and every parameter gradient (1e-4 relative to the
// tensor's max-abs) as Megatron computes them.
//
// Measured: loss 11.0243502 vs 11.0243503, every gradient within 2e-6 of its tensor's max-abs (the key bias, 0 in
// exact math, against the key weight's gradient scale). Checked to fail under deliberate mutations, each run once:
// the MLM head's GELU erf → tanh (gradients off by up to 4e-5 relative: caught by the 1e-5 bound below, not by the
// brief's 1e-4), the MLP's GELU tanh → erf (up to 7e-5: likewise), LayerNorm eps 1e-12 instead of 1e-5 (loss off
// by 4e-6 relative, gradients by 1.6e-2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bert_test_util.h"
#include "model/bert.h"
#include "test_util.h"

namespace lmforge::model {
namespace {

using lmforge::testing::shared_path;

BertConfig small_config() {
  BertConfig c;
  c.num_layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn_hidden = 256;
  c.seq_length = 128;
  c.max_positions = 512;
  c.vocab_size = 30524;  // bert-base-uncased + [BOS] + [EOS] → padded 30592
  c.make_vocab_size_divisible_by = 128;
  c.binary_head = true;
  c.post_layernorm = false;
  c.layernorm_eps = 1e-5f;
  c.mlp_gelu = kernels::GeluKind::TANH;  // Megatron's fused bias-GELU
  c.head_gelu = kernels::GeluKind::ERF;  // F.gelu in the LM head
  c.hidden_dropout = 0.0f;
  c.attention_dropout = 0.0f;
  return c;
}

// The first 8 samples of bert_s128's train split, as Megatron's BertDataset returned them.
struct Samples {
  int B = 8, T = 128;
  std::vector<int32_t> text, types, labels, padding, is_random;
  std::vector<float> loss_mask;
};

Samples load_samples() {
  const std::string dir = shared_path("data/sample/megatron_samples/bert_s128/train_");
  Samples s;
  s.text = testing::npy_rows_i32(dir + "text.npy", s.B);
  s.types = testing::npy_rows_i32(dir + "types.npy", s.B);
  s.labels = testing::npy_rows_i32(dir + "labels.npy", s.B);
  s.padding = testing::npy_rows_i32(dir + "padding_mask.npy", s.B);
  s.is_random = testing::npy_rows_i32(dir + "is_random.npy", s.B);
  const std::vector<int32_t> mask = testing::npy_rows_i32(dir + "loss_mask.npy", s.B);
  s.loss_mask.assign(mask.begin(), mask.end());
  return s;
}

BertInputs inputs(const Samples& s) {
  BertInputs in;
  in.B = s.B;
  in.T = s.T;
  in.tokens = s.text.data();
  in.types = s.types.data();
  in.padding = s.padding.data();
  in.labels = s.labels.data();
  in.loss_mask = s.loss_mask.data();
  in.is_random = s.is_random.data();
  return in;
}

TEST(BertMegatronParity, LossAndEveryGradientMatchMegatron) {
  const std::string dir = shared_path("data/sample/megatron_samples/bert_model_small/");
  const checkpoint::SafetensorsFile weights(dir + "model.safetensors");
  const checkpoint::SafetensorsFile ref(dir + "grads_bert_s128_train0-8.safetensors");
  Bert bert(small_config(), lmforge::kernels::cpu_backend());
  ASSERT_EQ(bert.table().size(), weights.tensors().size()) << "every reference tensor has a counterpart";
  testing::load_whole(weights, bert.table(), bert.params());
  const Samples s = load_samples();
  const BertLosses losses = bert.forward(inputs(s));
  bert.backward(1.0f);

  auto ref_scalar = [&](const std::string& name) {
    const auto bytes = ref.bytes(ref.at(name));
    double v;
    std::memcpy(&v, bytes.data(), sizeof v);
    return v;
  };
  const double ref_loss = ref_scalar("loss"), ref_lm = ref_scalar("lm_loss"), ref_sop = ref_scalar("sop_loss");
  EXPECT_NEAR(losses.lm, ref_lm, 1e-5 * std::fabs(ref_lm));
  EXPECT_NEAR(losses.sop, ref_sop, 1e-5 * std::fabs(ref_sop));
  EXPECT_NEAR(losses.total(), ref_loss, 1e-5 * std::fabs(ref_loss));

  double worst = 0.0;
  std::string worst_name;
  for (const param::Parameter& p : bert.table()) {
    const checkpoint::TensorInfo& info = ref.at("grad." + p.name);
    ASSERT_EQ(info.shape, p.shape) << p.name;
    ASSERT_EQ(info.dtype, checkpoint::DType::kF64) << p.name;
    const auto bytes = ref.bytes(info);
    std::vector<double> g(p.numel);
    std::memcpy(g.data(), bytes.data(), p.numel * sizeof(double));
    const double err = testing::relative_to_max(bert.grads() + p.offset, g.data(), p.numel,
                                                testing::gradient_floor(p.name, [&](const std::string& name) {
                                                  std::vector<double> w(ref.at("grad." + name).numel());
                                                  std::memcpy(w.data(), ref.bytes(ref.at("grad." + name)).data(),
                                                              w.size() * sizeof(double));
                                                  return w;
                                                }));
    // Measured ≤ 2e-6 on every tensor. The brief's 1e-4 would let the head's tanh-for-erf GELU through (~3e-5 at
    // these std-0.02 weights), so every tensor must meet 1e-5.
    EXPECT_LT(err, 1e-5) << p.name;
    if (err > worst) worst = err, worst_name = p.name;
  }
  std::printf("loss %.9g (ref %.9g), lm %.9g (ref %.9g), sop %.9g (ref %.9g); worst gradient error %.3g in %s\n",
              losses.total(), ref_loss, losses.lm, ref_lm, losses.sop, ref_sop, worst, worst_name.c_str());
}

}  // namespace
}  // namespace lmforge::model
