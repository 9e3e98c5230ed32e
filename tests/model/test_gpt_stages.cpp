// GPT pipeline stages (model::Stage) in one process: a model cut into a first stage (embedding + layer 0), a
// middle stage (layer 1) and a last stage (layers 2-3, ln_f, head, loss) starts from the whole model's weights, and
// chaining their forwards and backwards by hand reproduces the whole model's loss and gradients (which
// test_gpt2_parity checks against PyTorch): bitwise, except the tied word embedding, whose gradient is split
// between the first stage (lookup) and the last (head) and whose sum matches to rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "util/error.h"

namespace lmforge::model {
namespace {

GPTConfig config() {
  GPTConfig c;
  c.num_layers = 4;
  c.hidden = 32;
  c.heads = 4;
  c.seq_length = 12;
  c.max_positions = 16;
  c.vocab_size = 100;
  c.make_vocab_size_divisible_by = 64;
  return c;  // Megatron's dropout 0.1 on both sites
}

std::vector<float> tensor_of(GPT& m, const std::string& name, bool grad) {
  const param::Parameter& p = m.tensor(name);
  const float* base = (grad ? m.grads() : m.params()) + p.offset;
  return std::vector<float>(base, base + p.numel);
}

TEST(GptStages, ChainedStagesReproduceTheWholeModel) {
  const GPTConfig c = config();
  const int B = 2, T = c.seq_length;
  std::mt19937 rng(5);
  std::vector<int32_t> tokens((size_t)B * T), targets((size_t)B * T);
  for (auto& t : tokens) t = (int32_t)(rng() % (uint32_t)c.vocab_size);
  for (auto& t : targets) t = (int32_t)(rng() % (uint32_t)c.vocab_size);
  layers::ForwardStep step;
  step.training = true;
  step.seed = 1234;
  step.iteration = 3;
  step.micro_batch = 1;

  GPT whole(c, lmforge::kernels::cpu_backend());
  whole.init_weights(99);
  GPT first(c, kernels::cpu_backend(), nullptr, Stage{0, 1, true, false});
  GPT middle(c, kernels::cpu_backend(), nullptr, Stage{1, 1, false, false});
  GPT last(c, kernels::cpu_backend(), nullptr, Stage{2, 2, false, true});
  for (GPT* s : {&first, &middle, &last}) s->init_weights(99);

  // Each stage holds its tensors under the whole model's names, with the whole model's initial values.
  EXPECT_EQ(first.table().size(), 2u + 12u);   // wte, wpe, one layer
  EXPECT_EQ(middle.table().size(), 12u);
  EXPECT_EQ(last.table().size(), 1u + 24u + 2u);  // the wte copy, two layers, ln_f
  EXPECT_EQ(first.num_parameters() + middle.num_parameters() + last.num_parameters(),
            whole.num_parameters() + whole.tensor("transformer.wte.weight").numel);
  for (GPT* s : {&first, &middle, &last})
    for (const param::Parameter& p : s->table())
      EXPECT_EQ(tensor_of(*s, p.name, false), tensor_of(whole, p.name, false)) << p.name;

  // Two micro-batches accumulate, as a step does.
  float whole_loss = 0.0f, staged_loss = 0.0f;
  for (int k = 0; k < 2; k++) {
    step.micro_batch = (uint64_t)k;
    whole_loss = whole.forward(tokens.data(), targets.data(), B, T, &step);
    whole.backward(1.0f);
    EXPECT_EQ(first.forward_stage(tokens.data(), nullptr, nullptr, B, T, &step), 0.0f);
    middle.forward_stage(nullptr, first.stage_output().f32(), nullptr, B, T, &step);
    staged_loss = last.forward_stage(nullptr, middle.stage_output().f32(), targets.data(), B, T, &step);
    EXPECT_EQ(staged_loss, whole_loss) << "micro-batch " << k;
    last.backward_stage(nullptr, 1.0f);
    middle.backward_stage(last.input_grad().f32(), 1.0f);
    first.backward_stage(middle.input_grad().f32(), 1.0f);
  }
  ASSERT_TRUE(std::isfinite(whole_loss));

  for (GPT* s : {&first, &middle, &last})
    for (const param::Parameter& p : s->table()) {
      if (p.name == "transformer.wte.weight") continue;
      EXPECT_EQ(tensor_of(*s, p.name, true), tensor_of(whole, p.name, true)) << p.name;
    }
  const std::vector<float> want = tensor_of(whole, "transformer.wte.weight", true);
  const std::vector<float> a = tensor_of(first, "transformer.wte.weight", true);
  const std::vector<float> b = tensor_of(last, "transformer.wte.weight", true);
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); i++) {
    worst = std::max(worst, std::fabs((double)(a[i] + b[i]) - (double)want[i]));
    scale = std::max(scale, std::fabs((double)want[i]));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(worst, 1e-6 * scale) << "the tied table's gradient: lookup part + head part";
}

TEST(GptStages, AStageIsNotAWholeModel) {
  GPT first(config(), kernels::cpu_backend(), nullptr, Stage{0, 2, true, false});
  const std::vector<int32_t> tokens(12, 1);
  EXPECT_THROW(first.forward(tokens.data(), tokens.data(), 1, 12), Error);
  EXPECT_THROW(first.forward_logits(tokens.data(), 1, 12), Error);
  EXPECT_THROW(GPT(config(), kernels::cpu_backend(), nullptr, Stage{3, 2, false, true}), Error);
}

}  // namespace
}  // namespace lmforge::model
