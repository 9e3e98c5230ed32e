// defines: bench_optim — one optimizer step (global-norm clipping + AdamW) over GPT-2 124M's parameter tensors;
// bench/kernels/run_optim_bench.sh runs it beside torch.optim.AdamW + clip_grad_norm_
// (bench/kernels/optim_bench_torch.py)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "optim/adamw.h"

using namespace lmforge;

// GPT-2 124M (vocabulary padded to 50304) as separate tensors, matrices decayed: the same list as the peer.
static std::vector<std::pair<size_t, bool>> gpt2_124m_tensors() {
  const size_t C = 768, V = 50304, T = 1024;
  std::vector<std::pair<size_t, bool>> t = {{V * C, true}, {T * C, true}};
  for (int l = 0; l < 12; ++l) {
    for (auto x : {std::pair<size_t, bool>{C, false}, {C, false}, {C * 3 * C, true}, {3 * C, false},
                   {C * C, true}, {C, false}, {C, false}, {C, false}, {C * 4 * C, true}, {4 * C, false},
                   {4 * C * C, true}, {C, false}})
      t.push_back(x);
  }
  t.push_back({C, false});
  t.push_back({C, false});
  return t;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  const auto shapes = gpt2_124m_tensors();
  size_t total = 0;
  for (const auto& s : shapes) total += s.first;
  std::vector<float> params(total), grads(total);
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (float& x : params) x = d(rng);
  std::vector<optim::ParamSpan> spans;
  size_t off = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    spans.push_back({std::string("t").append(std::to_string(i)), params.data() + off, grads.data() + off, shapes[i].first,
                     shapes[i].second});
    off += shapes[i].first;
  }
  optim::AdamW adam(spans, optim::AdamWConfig{0.9, 0.95, 1e-8});
  std::vector<double> times;
  double norm = 0.0;
  for (int s = 0; s < steps + 1; ++s) {  // step 0 touches m and v for the first time
    for (size_t i = 0; i < total; i += 1) grads[i] = d(rng);
    const auto t0 = std::chrono::steady_clock::now();
    norm = optim::clip_grad_norm(spans, 1.0);
    adam.step(6e-4, 0.1);
    const auto t1 = std::chrono::steady_clock::now();
    if (s > 0) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  // Bytes moved: norm reads g; clipping reads and writes g; AdamW reads p, g, m, v and writes p, m, v.
  const double bytes = static_cast<double>(total) * 4.0 * (1 + 2 + 7);
  std::printf("lmforge adamw+clip: %.2fM params, median %.1f ms/step over %d steps, %.1f GB/s (norm %.3f)\n",
              total / 1e6, med * 1e3, steps, bytes / med / 1e9, norm);
}
