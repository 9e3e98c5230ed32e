// defines: bench_hf_tokenizer: lmforge's throughput on any tokenizer.json (PretrainedFromHF) over a JSONL corpus,
// with the id digest and dump of bench_tokenizer so bench/run_hf_tokenizer_bench.sh can check HF's ids are the same.
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

namespace {

using namespace lmforge;

std::vector<std::string> read_texts(const std::string& path, const std::string& key) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path).get(json)) throw Error(path + ": cannot read");
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document_stream docs;
  if (parser.iterate_many(json, 1 << 26).get(docs)) throw Error(path + ": not JSON lines");
  std::vector<std::string> texts;
  for (auto doc : docs) {
    std::string_view text;
    if (doc[key].get_string().get(text)) throw Error(path + ": document " + std::to_string(texts.size() + 1) +
                                                     " has no string field \"" + key + "\"");
    texts.emplace_back(text);
  }
  return texts;
}

struct RunResult {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system CPU of the whole process over the run: robust to a busy machine
  size_t tokens = 0;
  uint32_t digest = 0;
};

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// FNV-1a over the ids with 0xFFFFFFFF after each document (the node peers compute the same).
uint32_t fnv(uint32_t h, uint32_t v) { return (h ^ v) * 16777619u; }

RunResult run(const text::Tokenizer& tok, const std::vector<std::string>& texts, unsigned threads,
              std::vector<std::vector<int32_t>>* keep) {
  struct Span {
    uint32_t worker;
    size_t offset, size;
  };
  std::vector<Span> spans(texts.size());
  std::vector<std::vector<int32_t>> out(threads);
  std::atomic<size_t> next{0};
  constexpr size_t kChunk = 32;  // documents a worker claims at a time
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&](unsigned w) {
    auto encoder = tok.make_encoder();
    // A local vector, moved out at the end: the headers of out[0] and out[1] share a cache line, and updating
    // them on every token from two threads would be false sharing.
    // Room for ~1 token per 2 bytes (GPT-2 on text: 2-4 bytes per token) so the vector is not regrown.
    std::vector<int32_t> ids;
    ids.reserve(bytes / 2 / threads + 1024);
    while (true) {
      const size_t first = next.fetch_add(kChunk);
      if (first >= texts.size()) break;
      for (size_t d = first; d < std::min(texts.size(), first + kChunk); ++d) {
        const size_t before = ids.size();
        encoder->encode(texts[d], ids);
        spans[d] = Span{w, before, ids.size() - before};
      }
    }
    out[w] = std::move(ids);
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < threads; ++w) pool.emplace_back(work, w);
    for (auto& t : pool) t.join();
  }
  const auto t1 = std::chrono::steady_clock::now();
  RunResult r;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  uint32_t h = 2166136261u;
  for (const Span& s : spans) {
    const int32_t* ids = out[s.worker].data() + s.offset;
    for (size_t i = 0; i < s.size; ++i) h = fnv(h, uint32_t(ids[i]));
    h = fnv(h, 0xFFFFFFFFu);
    r.tokens += s.size;
    if (keep) keep->emplace_back(ids, ids + s.size);
  }
  r.digest = h;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenizer.json throughput (lmforge side of bench/run_hf_tokenizer_bench.sh)"};
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
