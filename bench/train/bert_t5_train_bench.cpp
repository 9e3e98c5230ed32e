// defines: bench_bert_t5_train — BERT-base and small-T5 training-step throughput (zero_grad + forward + backward +
// AdamW, fp32, dropout off) of lmforge's CPU models; bench/train/run_bert_t5_train_bench.sh runs it beside the
// PyTorch peer (bench/train/bert_t5_train_bench_torch.py) on the same shapes. Reports wall and CPU time (user+sys of
// the process) per step, since the machine is shared: tokens per CPU-second do not depend on how much of the 2 cores
// we got.
//   usage: bench_bert_t5_train [--model bert|t5|both] [--steps N] [--batch-bert B] [--batch-t5 B]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/omp_spin.h"
#include "model/bert.h"
#include "model/t5.h"
#include "optim/adamw.h"

using namespace lmforge;

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Timing {
  double wall = 0, cpu = 0, fwd = 0, bwd = 0, opt = 0, opt_cpu = 0;
};

// Runs steps + 1 training steps (the first warms up: first-touch of activations, BLAS buffers) and prints the
// median step's wall time and the mean CPU time per step of the timed ones.
void measure(const char* name, double tokens_per_step, double flops, int steps,
             const std::function<void()>& forward, const std::function<void()>& backward,
             const std::function<void()>& optimizer) {
  std::vector<Timing> t;
  for (int s = 0; s < steps + 1; s++) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    forward();
    const auto tf = std::chrono::steady_clock::now();
    backward();
    const auto tb = std::chrono::steady_clock::now();
    const double cb = cpu_seconds();
    optimizer();
    const auto t1 = std::chrono::steady_clock::now();
    const double c1 = cpu_seconds();
    auto sec = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    if (s > 0) t.push_back({sec(t0, t1), c1 - c0, sec(t0, tf), sec(tf, tb), sec(tb, t1), c1 - cb});
  }
  std::sort(t.begin(), t.end(), [](const Timing& a, const Timing& b) { return a.wall < b.wall; });
  const Timing& med = t[t.size() / 2];
  double cpu = 0, opt_cpu = 0;
  for (const Timing& x : t) cpu += x.cpu, opt_cpu += x.opt_cpu;
  cpu /= (double)t.size();
  opt_cpu /= (double)t.size();
  std::printf("lmforge %s: %.3f s/step wall, %.0f tok/s, %.1f GFLOP/s; %.3f cpu-s/step, %.0f tok/cpu-s; "
              "without AdamW %.0f tok/cpu-s (forward %.3f, backward %.3f, adamw %.3f s wall; adamw %.3f cpu-s)\n",
              name, med.wall, tokens_per_step / med.wall, flops / med.wall * 1e-9, cpu, tokens_per_step / cpu,
              tokens_per_step / (cpu - opt_cpu), med.fwd, med.bwd, med.opt, opt_cpu);
  std::fflush(stdout);
}

std::vector<optim::ParamSpan> spans_of(const param::ParamTable& table, float* params, float* grads) {
  std::vector<optim::ParamSpan> spans;
  for (const param::Parameter& t : table)
    spans.push_back({t.name, params + t.offset, grads + t.offset, t.numel, t.weight_decay});
  return spans;
}

// BERT-base (Megatron flavour, binary head): 12 layers, hidden 768, 12 heads, seq 128, bert-base-uncased's
// vocabulary with [BOS]/[EOS] (30524, padded to 30592); 15 % of the positions predicted, as BertDataset masks.
void bench_bert(int B, int steps) {
  model::BertConfig c;
  c.num_layers = 12, c.hidden = 768, c.heads = 12, c.seq_length = 128, c.max_positions = 512;
  c.vocab_size = 30524;
  c.hidden_dropout = 0.0f, c.attention_dropout = 0.0f;
  const int T = c.seq_length;
  model::Bert bert(c, lmforge::kernels::cpu_backend());
  bert.init_weights(1234);
  optim::AdamW adam(spans_of(bert.table(), bert.params(), bert.grads()), optim::AdamWConfig{0.9, 0.999, 1e-8});
  std::mt19937 rng(42);
  const size_t N = (size_t)B * T;
  std::vector<int32_t> tokens(N), types(N), labels(N, -1), is_random(B);
  std::vector<float> loss_mask(N, 0.0f);
  for (size_t i = 0; i < N; i++) {
    tokens[i] = (int32_t)(rng() % 30522);
    types[i] = (i % T) >= (size_t)T / 2;
    if (rng() % 100 < 15) labels[i] = tokens[i], loss_mask[i] = 1.0f;
  }
  for (auto& r : is_random) r = (int32_t)(rng() % 2);
  model::BertInputs in;
  in.B = B, in.T = T;
  in.tokens = tokens.data(), in.types = types.data(), in.labels = labels.data(), in.loss_mask = loss_mask.data();
  in.is_random = is_random.data();
  char name[64];
  std::snprintf(name, sizeof name, "bert-base B=%d T=%d", B, T);
  measure(
      name, (double)N, bert.training_flops(B, T), steps,
      [&] {
        bert.zero_grad();
        bert.forward(in);
      },
      [&] { bert.backward(); }, [&] { adam.step(1e-4, 0.01); });
}

// Megatron's small T5 of the large-batch study: 6 + 6 layers, hidden 512, 8 heads, ffn 2048, encoder 512 / decoder
// 128 tokens, bert-base-uncased + [BOS]/[EOS] + 100 sentinels (30624, padded to 30720); every decoder position
// predicted. Tokens per step: B·(512 + 128).
void bench_t5(int B, int steps) {
  model::T5Config c;
  c.encoder_num_layers = 6, c.decoder_num_layers = 6, c.hidden = 512, c.heads = 8, c.ffn_hidden = 2048;
  c.encoder_seq_length = 512, c.decoder_seq_length = 128, c.max_positions = 512;
  c.vocab_size = 30624;
  c.hidden_dropout = 0.0f, c.attention_dropout = 0.0f;
  const int Te = c.encoder_seq_length, Td = c.decoder_seq_length;
  model::T5 t5(c, lmforge::kernels::cpu_backend());
  t5.init_weights(1234);
  optim::AdamW adam(spans_of(t5.table(), t5.params(), t5.grads()), optim::AdamWConfig{0.9, 0.999, 1e-8});
  std::mt19937 rng(42);
  std::vector<int32_t> enc((size_t)B * Te), dec((size_t)B * Td), labels((size_t)B * Td);
  std::vector<float> loss_mask((size_t)B * Td, 1.0f);
  for (auto& x : enc) x = (int32_t)(1 + rng() % 30621);
  for (auto& x : dec) x = (int32_t)(1 + rng() % 30621);
  for (auto& x : labels) x = (int32_t)(1 + rng() % 30621);
  model::T5Inputs in;
  in.B = B, in.Te = Te, in.Td = Td;
  in.encoder_tokens = enc.data(), in.decoder_tokens = dec.data(), in.labels = labels.data();
  in.loss_mask = loss_mask.data();
  char name[64];
  std::snprintf(name, sizeof name, "t5-small B=%d Te=%d Td=%d", B, Te, Td);
  measure(
      name, (double)B * (Te + Td), t5.training_flops(B, Te, Td), steps,
      [&] {
        t5.zero_grad();
        t5.forward(in);
      },
      [&] { t5.backward(); }, [&] { adam.step(1e-4, 0.01); });
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::use_short_omp_spin(argv);  // as lmforge does (kernels/cpu/omp_spin.h)
  std::string which = "both";
  int steps = 3, batch_bert = 4, batch_t5 = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") which = argv[i + 1];
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--batch-bert") batch_bert = std::atoi(argv[i + 1]);
    else if (flag == "--batch-t5") batch_t5 = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1 || batch_bert < 1 || batch_t5 < 1) {
    std::fprintf(stderr, "--steps and batches must be >= 1\n");
    return 2;
  }
  if (which == "bert" || which == "both") bench_bert(batch_bert, steps);
  if (which == "t5" || which == "both") bench_t5(batch_t5, steps);
  return 0;
}
