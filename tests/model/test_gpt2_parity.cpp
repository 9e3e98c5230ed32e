// defines: GPT-2 parity against an independent float64 PyTorch model (tests/model/gpt2_reference.py): logits,
// loss, every parameter gradient, and the losses of 10 AdamW steps with Megatron's weight-decay groups
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "optim/adamw.h"
#include "util/error.h"

namespace lmforge::model {
namespace {

struct Reference {
  GPTConfig config;
  int B = 0, T = 0, adam_steps = 0;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  std::vector<int32_t> tokens, targets;
  std::vector<std::vector<float>> params;    // table order
  std::vector<double> logits;
  double loss = 0;
  std::vector<std::vector<double>> grads;    // table order
  std::vector<double> adam_losses;
};

// Runs the Python reference (format documented in gpt2_reference.py) and reads its output back. ctest runs each
// test in its own process, so the output is cached in the build tree under a hash of the script's text and
// arguments: an edited script or other arguments regenerate it.
Reference make_reference(const std::string& args) {
  const std::string script = std::string(LMFORGE_SOURCE_DIR) + "/tests/model/gpt2_reference.py";
  std::ifstream src(script);
  if (!src) throw std::runtime_error("missing " + script);
  const std::string text((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
  const std::string out = std::string(LMFORGE_BINARY_DIR) + "/gpt2_reference_" +
                          std::to_string(std::hash<std::string>{}(text + "\n" + args)) + ".bin";
  if (!std::ifstream(out)) {
    const std::string tmp = out + "." + std::to_string(::getpid());
    const std::string cmd = "/usr/bin/python3 " + script + " --out " + tmp + " " + args;
    const int rc = std::system(cmd.c_str());
    if (rc != 0) throw std::runtime_error("reference script failed (rc " + std::to_string(rc) + "): " + cmd);
    std::rename(tmp.c_str(), out.c_str());
  }
  std::ifstream f(out, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + out);
  auto read = [&](void* dst, size_t bytes) {
    f.read(static_cast<char*>(dst), (std::streamsize)bytes);
    if (!f) throw std::runtime_error("reference file truncated: " + out);
  };
  int32_t h[16];
  read(h, sizeof h);
  if (h[0] != 0x32545047 || h[1] != 1) throw std::runtime_error("bad reference header");
  Reference r;
  // The reference has no dropout: compare with it off (GPTConfig defaults to Megatron's 0.1).
  r.config.hidden_dropout = 0.0f;
  r.config.attention_dropout = 0.0f;
  r.config.num_layers = h[2];
  r.config.hidden = h[3];
  r.config.heads = h[4];
  r.config.seq_length = h[5];
  r.config.max_positions = h[6];
  r.config.vocab_size = h[7];
  r.T = h[5];
  r.B = h[9];
  r.adam_steps = h[10];
  double hp[5];
  read(hp, sizeof hp);
  r.lr = hp[0], r.beta1 = hp[1], r.beta2 = hp[2], r.eps = hp[3], r.weight_decay = hp[4];
  const size_t N = (size_t)r.B * r.T;
  r.tokens.resize(N);
  r.targets.resize(N);
  read(r.tokens.data(), N * 4);
  read(r.targets.data(), N * 4);
  // The table (and so sizes) comes from the C++ model; the file must agree in padded vocab.
  GPT probe(r.config, lmforge::kernels::cpu_backend());
  if (probe.config().padded_vocab_size() != h[8]) throw std::runtime_error("padded vocab differs from reference");
  for (const lmforge::param::Parameter& t : probe.tensors()) {
    r.params.emplace_back(t.numel);
    read(r.params.back().data(), t.numel * 4);
  }
  r.logits.resize(N * h[8]);
  read(r.logits.data(), r.logits.size() * 8);
  read(&r.loss, 8);
  for (const lmforge::param::Parameter& t : probe.tensors()) {
    r.grads.emplace_back(t.numel);
    read(r.grads.back().data(), t.numel * 8);
  }
  r.adam_losses.resize(r.adam_steps);
  read(r.adam_losses.data(), r.adam_steps * 8);
  char extra;
  f.read(&extra, 1);
  if (f.gcount() != 0) throw std::runtime_error("reference file longer than expected");
  return r;
}

// max |a - ref| / max |ref|, the per-tensor relative error of the reference notes.
double rel_error(const float* a, const double* ref, size_t n) {
  double md = 0, mr = 0;
  for (size_t i = 0; i < n; i++) {
    md = std::max(md, std::fabs(a[i] - ref[i]));
    mr = std::max(mr, std::fabs(ref[i]));
  }
  return mr > 0 ? md / mr : md;
}

void load(GPT& model, const Reference& r) {
  for (size_t i = 0; i < model.tensors().size(); i++) {
    const lmforge::param::Parameter& t = model.tensors()[i];
    std::memcpy(model.params() + t.offset, r.params[i].data(), t.numel * 4);
  }
}

class Gpt2Parity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // vocab 500 -> padded 512 (padded columns in the softmax), 2 layers, hidden 64, 4 heads, T 32 of 48, B 2.
    ref_ = new Reference(make_reference("--layers 2 --hidden 64 --heads 4 --seq 32 --max-positions 48 "
                                        "--vocab 500 --divisible-by 128 --batch 2 --adam-steps 10"));
  }
  static void TearDownTestSuite() { delete ref_; }
  static Reference* ref_;
};
Reference* Gpt2Parity::ref_ = nullptr;

TEST_F(Gpt2Parity, LogitsLossAndAllGradients) {
  const Reference& r = *ref_;
  GPT model(r.config, lmforge::kernels::cpu_backend());
  ASSERT_EQ(model.config().padded_vocab_size(), 512);
  load(model, r);
  model.zero_grad();
  const float loss = model.forward(r.tokens.data(), r.targets.data(), r.B, r.T);
  EXPECT_LT(std::fabs(loss - r.loss) / std::fabs(r.loss), 1e-5) << "loss " << loss << " vs " << r.loss;
  const double logits_err = rel_error(model.logits(), r.logits.data(), r.logits.size());
  EXPECT_LT(logits_err, 1e-5);
  model.backward();
  for (size_t i = 0; i < model.tensors().size(); i++) {
    const lmforge::param::Parameter& t = model.tensors()[i];
    const double err = rel_error(model.grads() + t.offset, r.grads[i].data(), t.numel);
    EXPECT_LT(err, 1e-4) << t.name;
  }
  std::printf("loss %.9f (ref %.9f), logits rel err %.2e\n", loss, r.loss, logits_err);
}

TEST_F(Gpt2Parity, InferenceLogitsAreTheLastPositionRows) {
  const Reference& r = *ref_;
  GPT model(r.config, lmforge::kernels::cpu_backend());
  load(model, r);
  const float* last = model.forward_logits(r.tokens.data(), r.B, r.T);
  const int Vp = model.config().padded_vocab_size();
  for (int b = 0; b < r.B; b++) {
    const double* ref = r.logits.data() + ((size_t)b * r.T + r.T - 1) * Vp;
    EXPECT_LT(rel_error(last + (size_t)b * Vp, ref, Vp), 1e-5) << "row " << b;
  }
}

TEST_F(Gpt2Parity, KeyValueCacheDecodingMatchesEveryPrefix) {
  const Reference& r = *ref_;
  GPT model(r.config, lmforge::kernels::cpu_backend()), full(r.config, lmforge::kernels::cpu_backend());
  load(model, r);
  load(full, r);
  const int Vp = model.config().padded_vocab_size();
  model.decode_begin(r.B);
  std::vector<int32_t> step(r.B), prefix;
  for (int t = 0; t < r.T; t++) {
    for (int b = 0; b < r.B; b++) step[b] = r.tokens[(size_t)b * r.T + t];
    const float* got = model.decode_step(step.data());
    // forward_logits over the prefix [0, t] of every row
    prefix.clear();
    for (int b = 0; b < r.B; b++)
      for (int s = 0; s <= t; s++) prefix.push_back(r.tokens[(size_t)b * r.T + s]);
    const float* want = full.forward_logits(prefix.data(), r.B, t + 1);
    double md = 0, mr = 0;
    for (size_t i = 0; i < (size_t)r.B * Vp; i++) {
      md = std::max(md, (double)std::fabs(got[i] - want[i]));
      mr = std::max(mr, (double)std::fabs(want[i]));
    }
    EXPECT_LT(md / mr, 1e-5) << "position " << t;
    if (t == r.T - 1) {  // the full sequence's last position against PyTorch too
      for (int b = 0; b < r.B; b++) {
        const double* ref = r.logits.data() + ((size_t)b * r.T + r.T - 1) * Vp;
        EXPECT_LT(rel_error(got + (size_t)b * Vp, ref, Vp), 1e-5) << "row " << b;
      }
    }
  }
  EXPECT_EQ(model.decode_position(), r.T);
  // The cache runs up to max_positions and no further.
  while (model.decode_position() < r.config.max_positions) model.decode_step(step.data());
  EXPECT_THROW(model.decode_step(step.data()), Error);
}

TEST_F(Gpt2Parity, TenAdamWStepsMatchTorch) {
  const Reference& r = *ref_;
  ASSERT_EQ(r.adam_steps, 10);
  GPT model(r.config, lmforge::kernels::cpu_backend());
  load(model, r);
  std::vector<optim::ParamSpan> spans;
  for (const lmforge::param::Parameter& t : model.tensors())
    spans.push_back({t.name, model.params() + t.offset, model.grads() + t.offset, t.numel, t.weight_decay});
  optim::AdamW adam(spans, optim::AdamWConfig{r.beta1, r.beta2, r.eps});
  for (int k = 0; k < r.adam_steps; k++) {
    model.zero_grad();
    const float loss = model.forward(r.tokens.data(), r.targets.data(), r.B, r.T);
    model.backward();
    adam.step(r.lr, r.weight_decay);
    EXPECT_LT(std::fabs(loss - r.adam_losses[k]), 1e-4) << "step " << k;
    std::printf("step %d loss %.7f ref %.7f\n", k, loss, r.adam_losses[k]);
  }
  // The reference run must actually learn, or matching it would prove little.
  EXPECT_LT(r.adam_losses.back(), r.adam_losses.front() - 0.1);
}

}  // namespace
}  // namespace lmforge::model
