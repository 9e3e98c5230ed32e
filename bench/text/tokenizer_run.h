// defines: read_texts(), run() and RunResult: the lmforge side of the tokenizer benchmarks (texts of a JSONL corpus
// in memory, 1 or N threads each with its own encoder, an FNV-1a digest of the ids that the Node peers compute too)
#pragma once
#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "text/tokenizer.h"
#include "util/error.h"

namespace lmforge::bench {


inline std::vector<std::string> read_texts(const std::string& path, const std::string& key) {
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

inline double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// FNV-1a over the ids with 0xFFFFFFFF after each document (the node peers compute the same).
inline uint32_t fnv(uint32_t h, uint32_t v) { return (h ^ v) * 16777619u; }

inline RunResult run(const text::Tokenizer& tok, const std::vector<std::string>& texts, unsigned threads,
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


}  // namespace lmforge::bench
