// defines: bench_data_io: LineReader throughput over given files (plain/gz/zst/xz), one line per file:
//          "<path> <seconds> <lines> <decoded bytes> <MB/s decoded>". The peers run beside it in
//          bench/data/run_data_io_bench.sh.
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "data/line_reader.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_data_io FILE...\n");
    return 2;
  }
  try {
    for (int i = 1; i < argc; ++i) {
      const auto start = std::chrono::steady_clock::now();
      auto reader = lmforge::data::LineReader::open(argv[i]);
      lmforge::data::LineBlock block;
      uint64_t lines = 0, bytes = 0;
      while (reader->next_block(block, 4u << 20)) {  // prep's block size order of magnitude
        lines += block.line_count;
        bytes += block.bytes.size();
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s %.3f %llu %llu %.1f\n", argv[i], s, static_cast<unsigned long long>(lines),
                  static_cast<unsigned long long>(bytes), bytes / s / 1e6);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data_io: %s\n", e.what());
    return 1;
  }
  return 0;
}
