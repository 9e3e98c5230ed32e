// defines: bench_generate — greedy decoding throughput of lmforge generate over the model's KV cache (and over the
// uncached full forward) on GPT-2 shapes with random weights; bench/generate/run_generate_bench.sh runs it beside a
// PyTorch peer
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "train/generate.h"

using namespace lmforge;

int main(int argc, char** argv) {
  int layers = 12, hidden = 768, heads = 12, prompt_len = 32, new_tokens = 128, reps = 3;
  bool uncached = false;
  for (int i = 1; i < argc; i++) {
    auto next = [&]() { return std::atoi(argv[++i]); };
    if (!std::strcmp(argv[i], "--layers"))
      layers = next();
    else if (!std::strcmp(argv[i], "--hidden"))
      hidden = next();
    else if (!std::strcmp(argv[i], "--heads"))
      heads = next();
    else if (!std::strcmp(argv[i], "--prompt"))
      prompt_len = next();
    else if (!std::strcmp(argv[i], "--new"))
      new_tokens = next();
    else if (!std::strcmp(argv[i], "--reps"))
      reps = next();
    else if (!std::strcmp(argv[i], "--uncached"))
      uncached = true;
  }
  model::GPTConfig c;
  c.num_layers = layers, c.hidden = hidden, c.heads = heads, c.max_positions = 1024, c.seq_length = 1024;
  c.vocab_size = 50257, c.make_vocab_size_divisible_by = 1;  // a Hugging Face GPT-2 as imported
  model::GPT gpt(c, lmforge::kernels::cpu_backend());
  gpt.init_weights(1);
  std::vector<int32_t> prompt(prompt_len);
  for (int i = 0; i < prompt_len; i++) prompt[i] = (i * 7919) % c.vocab_size;
  train::GenerateOptions o;
  o.sampling.greedy = true;
  o.max_new_tokens = new_tokens;
  o.use_kv_cache = !uncached;
  std::vector<double> times;
  for (int r = 0; r < reps + 1; r++) {  // the first run warms up allocations
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = train::generate(gpt, prompt, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) times.push_back(s);
    if ((int)out.size() != new_tokens) return 1;
  }
  std::sort(times.begin(), times.end());
  const double s = times[times.size() / 2];
  std::printf("lmforge %s: %d layers, hidden %d, prompt %d, %d new tokens: %.3f s, %.1f tok/s\n",
              uncached ? "uncached" : "kv-cache", layers, hidden, prompt_len, new_tokens, s, new_tokens / s);
  return 0;
}
