// defines: bench_hf_tokenizer: lmforge's throughput on any tokenizer.json (PretrainedFromHF) over a JSONL corpus,
// with the id digest and dump of bench_tokenizer so bench/text/run_hf_tokenizer_bench.sh can check HF's ids are the
// same.
//
// Texts are read into memory first (JSON parsing is not timed); each run builds fresh encoders (empty word
// caches) so every repeat pays the same cold-cache cost. Prints one "RESULT" line per thread count.
#include <simdjson.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "text/hf_tokenizer_json.h"
#include "util/error.h"
#include "tokenizer_run.h"

using namespace lmforge;
using namespace lmforge::bench;

int main(int argc, char** argv) {
  CLI::App app{"tokenizer.json throughput (lmforge side of bench/text/run_hf_tokenizer_bench.sh)"};
  std::string input, ids_out, key = "text", tokenizer_json, label = "lmforge";
  std::vector<unsigned> thread_counts{1};
  int repeat = 3;
  bool generic = false;
  app.add_option("--input", input, "JSON lines corpus")->required();
  app.add_option("--json-key", key, "Field holding the text")->capture_default_str();
  app.add_option("--tokenizer-json", tokenizer_json, "Hugging Face tokenizer.json")->required();
  app.add_flag("--generic", generic, "Run the generic pipeline even where a tuned fast path applies");
  app.add_option("--label", label, "side= name in the RESULT line")->capture_default_str();
  app.add_option("--threads", thread_counts, "Thread counts to run")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs per thread count; the fastest is reported")->capture_default_str();
  app.add_option("--ids-out", ids_out, "Write the ids (int32 little-endian, -1 after each document)");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto texts = read_texts(input, key);
    size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();
    text::HfTokenizerOptions options;
    options.fast_paths = !generic;
    const auto tok = text::load_hf_tokenizer(tokenizer_json, options);
    for (unsigned threads : thread_counts) {
      RunResult best;
      for (int i = 0; i < std::max(1, repeat); ++i) {
        std::vector<std::vector<int32_t>> kept;
        const bool dump = !ids_out.empty() && i == 0 && threads == thread_counts.front();
        RunResult r = run(*tok, texts, threads, dump ? &kept : nullptr);
        if (i > 0 && r.digest != best.digest) throw Error("ids differ between runs");
        if (i == 0 || r.seconds < best.seconds) best = r;
        if (dump) {
          std::ofstream f(ids_out, std::ios::binary);
          for (const auto& ids : kept) {
            f.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * sizeof(int32_t)));
            const int32_t sep = -1;
            f.write(reinterpret_cast<const char*>(&sep), sizeof sep);
          }
          if (!f) throw Error(ids_out + ": cannot write");
        }
      }
      std::printf(
          "RESULT side=%s threads=%u bytes=%zu seconds=%.4f mbps=%.2f cpu_seconds=%.4f cpu_mbps=%.2f tokens=%zu "
          "mtokps=%.3f digest=%08x\n",
          label.c_str(), threads, bytes, best.seconds, bytes / best.seconds / 1e6, best.cpu_seconds,
          bytes / best.cpu_seconds / 1e6, best.tokens, best.tokens / best.seconds / 1e6, best.digest);
      std::fflush(stdout);
    }
  } catch (const lmforge::Error& e) {
    std::fprintf(stderr, "bench_hf_tokenizer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
