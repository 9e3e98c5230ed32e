// defines: bench_train — GPT-2 training-step throughput (forward + backward + AdamW) of lmforge's CPU model on
// the configurations of ../shared/docs/gpt2-reference-notes.md; bench/train/run_train_bench.sh runs it beside PyTorch
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/omp_spin.h"
#include "kernels/ops.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/grad_scaler.h"

using namespace lmforge;

namespace {

struct BenchConfig {
  const char* name;
  model::GPTConfig gpt;
  int B, T;
};

// CPU time (user + system, all threads) of the process so far, in seconds: on a shared machine the steadier
// measure of the work a step costs (wall time also counts waiting for a core).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Peak resident set of the process so far (Linux: ru_maxrss in KiB).
double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_maxrss / 1024.0;
}

void run(const BenchConfig& bc, int steps, kernels::DType dtype) {
  model::GPT gpt(bc.gpt, lmforge::kernels::cpu_backend());
  gpt.set_compute_dtype(dtype);
  gpt.init_weights(1234);
  std::vector<optim::ParamSpan> spans;
  const kernels::Tensor working = gpt.working_copy();  // (bf16: AdamW writes it, as the trainer's does)
  for (const param::Parameter& t : gpt.tensors()) {
    spans.push_back({t.name, gpt.params() + t.offset, gpt.grads() + t.offset, t.numel, t.weight_decay});
    if (working.present()) spans.back().working = working.slice0((int64_t)t.offset, (int64_t)t.numel);
  }
  optim::AdamW adam(spans, optim::AdamWConfig{0.9, 0.95, 1e-8});
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> tok(0, bc.gpt.vocab_size - 1);
  const size_t N = (size_t)bc.B * bc.T;
  std::vector<int32_t> tokens(N + 1);
  std::vector<double> times, fwd, bwd, opt, cpu;
  float loss = 0.0f;
  for (int s = 0; s < steps + 1; s++) {  // step 0 warms up (first-touch of activations, BLAS buffers)
    for (auto& x : tokens) x = tok(rng);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    gpt.zero_grad();
    loss = gpt.forward(tokens.data(), tokens.data() + 1, bc.B, bc.T);
    const auto tf = std::chrono::steady_clock::now();
    if (dtype == kernels::DType::F16) {
      // What the trainer does under --fp16 at a fixed scale (no overflow at 2^10 here): the backward of the scaled
      // loss, the gradients stored in fp16 before unscaling, then unscaled for the optimizer.
      const float scale = 1024.0f;
      gpt.backward(scale);
      optim::round_to_f16_storage(kernels::make_view(gpt.grads(), {(int64_t)gpt.num_parameters()}));
      optim::scale_grads(spans, 1.0f / scale);
    } else {
      gpt.backward();
    }
    const auto tb = std::chrono::steady_clock::now();
    adam.step(1e-4, 0.1);
    if (!adam.writes_working_copy()) gpt.params_updated();  // the bf16 / fp16 working copy (nothing in fp32)
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_seconds();
    if (s > 0) {
      cpu.push_back(c1 - c0);
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
              "GFLOP/s (loss %.3f, %s%s%s, peak RSS %.0f MB)\n",
              bc.name, gpt.num_parameters() / 1e6, flops / 1e9, med, steps, N / med, flops / med / 1e9, loss,
              kernels::dtype_name(dtype), bc.gpt.recompute.granularity.empty() ? "" : ", recompute ",
              bc.gpt.recompute.granularity.c_str(), peak_rss_mb());
  std::printf("lmforge %s phases (median s): zero_grad+forward %.3f, backward %.3f, AdamW %.3f\n", bc.name,
              median(fwd), median(bwd), median(opt));
  std::printf("lmforge %s cpu: median %.3f cpu-s/step -> %.0f tok/cpu-s\n", bc.name, median(cpu), N / median(cpu));
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::use_short_omp_spin(argv);  // as lmforge does (kernels/cpu/omp_spin.h)
  std::string which = "A", recompute;
  int steps = 8, seq = 0, batch = 0;
  kernels::DType dtype = kernels::DType::F32;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seq") && i + 1 < argc) seq = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) batch = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--recompute") && i + 1 < argc) recompute = argv[++i];
    else if (!std::strcmp(argv[i], "--bf16")) dtype = kernels::DType::BF16;
    else if (!std::strcmp(argv[i], "--fp16")) dtype = kernels::DType::F16;
    else {
      std::fprintf(stderr, "usage: bench_train [--config A|B|AB] [--steps N] [--bf16|--fp16] [--recompute full|selective]\n"
                           "                   [--seq T] [--batch B]\n"
                           "  A: vocab 50257, 4 layers, hidden 256, 4 heads, seq 256, batch 4\n"
                           "  B: GPT-2 124M shapes, seq 256, batch 2\n"
                           "  --seq/--batch override the configuration's (e.g. B at --seq 1024 for memory)\n"
                           "  --fp16: f16 storage, the step scaled by 2^10, gradients rounded to fp16 and unscaled as the trainer does\n"
                           "  --recompute full: one layer per chunk (uniform); selective: the attention core\n");
      return 2;
    }
  }
  std::printf("backend: %s\n", kernels::cpu_backend().info().c_str());
  model::GPTConfig a;
  a.num_layers = 4, a.hidden = 256, a.heads = 4, a.seq_length = 256, a.max_positions = 1024, a.vocab_size = 50257;
  model::GPTConfig b;  // defaults are GPT-2 124M
  b.seq_length = 256;
  for (model::GPTConfig* c : {&a, &b}) {
    c->hidden_dropout = c->attention_dropout = 0.0f;  // dropout 0 on both sides (the PyTorch peer has none)
    c->recompute.granularity = recompute;
    if (seq > 0) c->seq_length = seq;
  }
  if (which.find('A') != std::string::npos) run({"A", a, batch > 0 ? batch : 4, a.seq_length}, steps, dtype);
  if (which.find('B') != std::string::npos) run({"B", b, batch > 0 ? batch : 2, b.seq_length}, steps, dtype);
  return 0;
}
