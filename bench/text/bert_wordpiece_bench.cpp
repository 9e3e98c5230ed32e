// defines: bench_bert_wordpiece: single-thread throughput of lmforge's BERT WordPiece (either flavour) on a JSONL
// corpus, with the id digest and id dump of bench/text/peers/tokenize.js so bench/text/run_bert_wordpiece_bench.sh
// can check that HF produces the very same ids.
//
//   bench_bert_wordpiece --input corpus.jsonl --vocab-file vocab.txt [--flavor megatron|hf] [--cased]
//                        [--repeat 3] [--ids-out ids.bin]
// Texts are read into memory first (JSON parsing is not timed). Prints one "RESULT" line (best of --repeat).
#include <simdjson.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "text/bert_wordpiece.h"
#include "util/error.h"

namespace {

using namespace lmforge;

std::vector<std::string> read_texts(const std::string& path) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path).get(json)) throw Error(path + ": cannot read");
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document_stream docs;
  if (parser.iterate_many(json, 1 << 26).get(docs)) throw Error(path + ": not JSON lines");
  std::vector<std::string> texts;
  for (auto doc : docs) {
    std::string_view text;
    if (doc["text"].get_string().get(text))
      throw Error(path + ": document " + std::to_string(texts.size() + 1) + " has no string field \"text\"");
    texts.emplace_back(text);
  }
  return texts;
}

// FNV-1a over ids, 0xFFFFFFFF after each document (as bench/text/peers/tokenize.js).
uint32_t digest(const std::vector<std::vector<int32_t>>& all) {
  uint32_t h = 2166136261u;
  auto step = [&](uint32_t v) { h = (h ^ v) * 16777619u; };
  for (const auto& ids : all) {
    for (int32_t id : ids) step(static_cast<uint32_t>(id));
    step(0xFFFFFFFFu);
  }
  return h;
}

int run(int argc, char** argv) {
  std::string input, vocab, ids_out, flavor = "megatron";
  int repeat = 3;
  bool cased = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("missing value for " + a);
      return argv[++i];
    };
    if (a == "--input") input = value();
    else if (a == "--vocab-file") vocab = value();
    else if (a == "--flavor") flavor = value();
    else if (a == "--repeat") repeat = std::stoi(value());
    else if (a == "--ids-out") ids_out = value();
    else if (a == "--cased") cased = true;
    else throw Error("unknown flag " + a);
  }
  if (input.empty() || vocab.empty()) throw Error("--input and --vocab-file are required");
  if (flavor != "megatron" && flavor != "hf") throw Error("--flavor must be megatron or hf");
  const auto tok = text::make_bert_wordpiece_tokenizer(
      vocab, !cased, flavor == "hf" ? text::WordPieceFlavor::kHuggingFace : text::WordPieceFlavor::kMegatron);
  const std::vector<std::string> texts = read_texts(input);
  size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();

  // Wall time is what users see; thread CPU time also shows what the code costs on a busy machine.
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  double best = 1e30, best_cpu = 1e30;
  std::vector<std::vector<int32_t>> all(texts.size());
  uint32_t first_digest = 0;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    auto enc = tok->make_encoder();
    for (auto& ids : all) ids.clear();
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    for (size_t i = 0; i < texts.size(); ++i) enc->encode(texts[i], all[i]);
    best_cpu = std::min(best_cpu, cpu_now() - c0);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const uint32_t d = digest(all);
    if (r > 0 && d != first_digest) throw Error("ids differ between runs");
    first_digest = d;
  }
  size_t tokens = 0;
  for (const auto& ids : all) tokens += ids.size();
  if (!ids_out.empty()) {
    std::ofstream out(ids_out, std::ios::binary);
    for (const auto& ids : all) {
      out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
      const int32_t sep = -1;
      out.write(reinterpret_cast<const char*>(&sep), 4);
    }
    if (!out) throw Error(ids_out + ": write failed");
  }
  std::printf("RESULT side=lmforge-%s threads=1 bytes=%zu seconds=%.4f mbps=%.2f tokens=%zu mtokps=%.3f digest=%08x "
              "cpu_mbps=%.2f\n",
              flavor.c_str(), bytes, best, bytes / best / 1e6, tokens, tokens / best / 1e6, first_digest,
              bytes / best_cpu / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_bert_wordpiece: error: %s\n", e.what());
    return 1;
  }
}
