// defines: bench_sampling — GPT index building and sample reads, lmforge vs Megatron's numpy code on the same inputs
// Index building: our document_index + shuffle_index vs Megatron M23's numpy steps (RandomState.shuffle), and our
// whole build (incl. the sample index, which Megatron does in its C++ helper) for reference. Sample reads: our
// GptSampleSource vs GPTDataset.__getitem__ on numpy.memmap. The peer also checks its arrays equal ours.
// Usage: bench_sampling [sequences=2000000] [read_samples=20000]   (run from the build directory)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include "datasets/gpt_dataset.h"
#include "datasets/gpt_indices.h"
#include "datasets/numpy_random.h"

using namespace lmforge::datasets;
using clock_type = std::chrono::steady_clock;

static double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

template <typename T>
static void dump(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(T)));
}

int main(int argc, char** argv) {
  const int64_t sequences = argc > 1 ? std::atoll(argv[1]) : 2000000;
  const int64_t read_n = argc > 2 ? std::atoll(argv[2]) : 20000;
  const int32_t L = 1024;
  const uint32_t seed = 1234;
  const std::string dir = std::filesystem::temp_directory_path().string() + "/lmforge-bench-sampling-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);

  // Document lengths like a web corpus: mostly short, a long tail (1..4000 tokens, mean ≈ 500).
  std::mt19937 gen(7);
  std::vector<int32_t> sizes(static_cast<size_t>(sequences));
  int64_t tokens = 0;
  for (auto& s : sizes) {
    s = 1 + int32_t(std::min<double>(3999.0, std::exponential_distribution<double>(1.0 / 500.0)(gen)));
    tokens += s;
  }
  // Ask for 2.3 epochs' worth of samples: E = 3 with the last epoch shuffled apart.
  const int64_t n = int64_t(2.3 * double((tokens - 1) / L));

  auto t = clock_type::now();
  const EpochPlan plan = plan_epochs(tokens, L, n);
  NumpyRandomState rng(seed);
  const auto di = build_document_index(0, sequences, plan.epochs, plan.separate_final_epoch, rng);
  const double t_doc = seconds_since(t);
  t = clock_type::now();
  const auto sh = build_shuffle_index(plan.separate_final_epoch ? plan.samples_before_final_epoch : plan.total_samples,
                                      plan.total_samples, rng);
  const double t_shuffle = seconds_since(t);
  t = clock_type::now();
  const GptIndices full = build_gpt_indices(sizes, 0, sequences, n, L, seed);
  const double t_full = seconds_since(t);
  dump(dir + "/sizes.bin", sizes);
  dump(dir + "/document.bin", di);
  dump(dir + "/shuffle.bin", sh);

  // Sample reads on Megatron's own sample dataset.
  const std::string prefix = std::string(LMFORGE_SHARED_DIR) + "/data/sample/sample_gpt2_text_document";
  const int32_t read_L = 128;
  GptDatasetConfig cfg{"1", seed, read_L, dir + "/cache"};
  GptSampleSource src({prefix}, cfg, {read_n, 0, 0});
  std::vector<int32_t> tokens_buf;
  int64_t checksum = 0;
  t = clock_type::now();
  for (int64_t i = 0; i < read_n; ++i) {
    src.sample(Split::Train, i, tokens_buf);
    checksum += tokens_buf.front() + tokens_buf.back();
  }
  const double t_read = seconds_since(t);

  const std::string cmd = "/usr/bin/python3 " + std::string(LMFORGE_SOURCE_DIR) + "/bench/data/sampling_bench_numpy.py " + dir +
                          " " + std::to_string(L) + " " + std::to_string(n) + " " + std::to_string(seed) + " " + prefix +
                          " " + std::to_string(read_L) + " " + std::to_string(read_n) + " > " + dir + "/peer.json";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "peer failed: %s\n", cmd.c_str());
    return 1;
  }
  std::ifstream pf(dir + "/peer.json");
  std::string peer((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  auto field = [&](const std::string& key) {
    const size_t at = peer.find("\"" + key + "\": ");
    return at == std::string::npos ? -1.0 : std::atof(peer.c_str() + at + key.size() + 4);
  };
  const bool equal = peer.find("\"equal\": true") != std::string::npos;
  const double p_doc = field("document_index_s"), p_shuffle = field("shuffle_index_s"), p_read = field("read_s");
  const int64_t p_checksum = int64_t(field("read_checksum"));

  std::printf("GPT indices: %lld sequences, %lld tokens, L=%d, n=%lld -> E=%lld%s, %zu document_index, %lld samples\n",
              (long long)sequences, (long long)tokens, L, (long long)n, (long long)plan.epochs,
              plan.separate_final_epoch ? " (last separated)" : "", di.size(), (long long)plan.total_samples);
  std::printf("  document_index   lmforge %.3f s   numpy (Megatron) %.3f s   ratio %.2fx\n", t_doc, p_doc, p_doc / t_doc);
  std::printf("  shuffle_index    lmforge %.3f s   numpy (Megatron) %.3f s   ratio %.2fx\n", t_shuffle, p_shuffle,
              p_shuffle / t_shuffle);
  std::printf("  whole build (incl. sample_index, Megatron: C++ helper) lmforge %.3f s\n", t_full);
  std::printf("  arrays identical to numpy's: %s\n", equal ? "yes" : "NO");
  std::printf("sample reads: %lld samples of %d+1 tokens (sample_gpt2_text_document)\n", (long long)read_n, read_L);
  std::printf("  lmforge %.3f s (%.0f samples/s)   Megatron __getitem__ %.3f s (%.0f samples/s)   ratio %.1fx   checksums %s\n",
              t_read, double(read_n) / t_read, p_read, double(read_n) / p_read, p_read / t_read,
              checksum == p_checksum ? "equal" : "DIFFER");
  std::filesystem::remove_all(dir);
  return equal && checksum == p_checksum ? 0 : 1;
}
