// defines: bench_sentence_splitter: lmforge's ICU sentence splitter over the "text" of a JSON-lines file, timed;
// writes each document's sentences as a JSON list per line so bench/text/run_sentence_split_bench.sh can compare them
// with NLTK punkt's (bench/text/peers/punkt_split_peer.py)
//   usage: bench_sentence_splitter INPUT.jsonl OUTPUT.jsonl [--keep-newlines]
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset_stats.h"
#include "text/sentence_splitter.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s INPUT.jsonl OUTPUT.jsonl [--keep-newlines]\n", argv[0]);
    return 2;
  }
  const bool keep = argc > 3 && std::strcmp(argv[3], "--keep-newlines") == 0;
  std::vector<std::string> texts;
  {
    std::ifstream in(argv[1]);
    simdjson::dom::parser parser;
    for (std::string line; std::getline(in, line);) {
      std::string_view text;
      if (parser.parse(line)["text"].get(text)) return std::fprintf(stderr, "bad line\n"), 1;
      texts.emplace_back(text);
    }
  }
  lmforge::text::SentenceSplitter splitter({"english", keep});
  std::vector<std::vector<std::string_view>> out(texts.size());
  size_t bytes = 0, sentences = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i) {
    splitter.split(texts[i], out[i]);
    bytes += texts[i].size();
    sentences += out[i].size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream o(argv[2]);
  for (const auto& doc : out) {
    o << '[';
    for (size_t k = 0; k < doc.size(); ++k) o << (k ? ", " : "") << lmforge::json_quote(std::string(doc[k]));
    o << "]\n";
  }
  std::printf("lmforge ICU splitter: %zu docs, %zu sentences, %.3f s, %.2f MB/s (one thread)\n", texts.size(),
              sentences, s, bytes / s / 1e6);
  return 0;
}
