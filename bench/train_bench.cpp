// defines: bench_train — GPT-2 training-step throughput (forward + backward + AdamW) of lmforge's CPU model on
// the configurations of docs/gpt2-reference-notes.md; bench/run_train_bench.sh runs it beside PyTorch
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "optim/adamw.h"

using namespace lmforge;

namespace {

struct BenchConfig {
  const char* name;
  model::GPTConfig gpt;
  int B, T;
};

void run(const BenchConfig& bc, int steps) {
  model::GPT gpt(bc.gpt);
  gpt.init_weights(1234);
  std::vector<optim::ParamSpan> spans;
  for (const param::Parameter& t : gpt.tensors())
    spans.push_back({t.name, gpt.params() + t.offset, gpt.grads() + t.offset, t.numel, t.weight_decay});
  optim::AdamW adam(spans, optim::AdamWConfig{0.9, 0.95, 1e-8});
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> tok(0, bc.gpt.vocab_size - 1);
  const size_t N = (size_t)bc.B * bc.T;
  std::vector<int32_t> tokens(N + 1);
  std::vector<double> times, fwd, bwd, opt;
  float loss = 0.0f;
  for (int s = 0; s < steps + 1; s++) {  // step 0 warms up (first-touch of activations, BLAS buffers)
    for (auto& x : tokens) x = tok(rng);
    const auto t0 = std::chrono::steady_clock::now();
    gpt.zero_grad();
    loss = gpt.forward(tokens.data(), tokens.data() + 1, bc.B, bc.T);
    const auto tf = std::chrono::steady_clock::now();
    gpt.backward();
    const auto tb = std::chrono::steady_clock::now();
    adam.step(1e-4, 0.1);
    const auto t1 = std::chrono::steady_clock::now();
    if (s > 0) {
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
      fwd.push_back(std::chrono::duration<double>(tf - t0).count());
      bwd.push_back(std::chrono::duration<double>(tb - tf).count());
      opt.push_back(std::chrono::duration<double>(t1 - tb).count());
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double med = median(times);
  const double flops = gpt.training_flops(bc.B, bc.T);
  std::printf("lmforge %s: params %.2fM, %.1f GFLOP/step, median %.3f s/step over %d steps -> %.0f tok/s, %.1f "
              "GFLOP/s (loss %.3f)\n",
              bc.name, gpt.num_parameters() / 1e6, flops / 1e9, med, steps, N / med, flops / med / 1e9, loss);
  std::printf("lmforge %s phases (median s): zero_grad+forward %.3f, backward %.3f, AdamW %.3f\n", bc.name,
              median(fwd), median(bwd), median(opt));
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "A";
  int steps = 8;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_train [--config A|B|AB] [--steps N]\n"
                           "  A: vocab 50257, 4 layers, hidden 256, 4 heads, seq 256, batch 4\n"
                           "  B: GPT-2 124M shapes, seq 256, batch 2\n");
      return 2;
    }
  }
  std::printf("backend: %s\n", kernels::cpu_backend().info().c_str());
  model::GPTConfig a;
  a.num_layers = 4, a.hidden = 256, a.heads = 4, a.seq_length = 256, a.max_positions = 1024, a.vocab_size = 50257;
  model::GPTConfig b;  // defaults are GPT-2 124M
  b.seq_length = 256;
  if (which.find('A') != std::string::npos) run({"A", a, 4, 256}, steps);
  if (which.find('B') != std::string::npos) run({"B", b, 2, 256}, steps);
  return 0;
}
