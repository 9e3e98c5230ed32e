// defines: libFuzzer target for the compressed-stream readers: the input is a file LineReader::open detects as
//          gzip, zstd, xz or plain by its magic bytes; corrupt or truncated streams must end in an Error, never in
//          a crash or unbounded memory (the line limit is small here)
#include <cstdint>

#include "data/line_reader.h"
#include "fuzz_util.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmforge::fuzz::FileGuard file{lmforge::fuzz::input_file(data, size, ".jsonl")};
  try {
    auto reader = lmforge::data::LineReader::open(file.path, 4096);
    lmforge::data::LineBlock block;
    size_t blocks = 0;
    while (reader->next_block(block, 1000) && ++blocks < 100000) {
    }
  } catch (const lmforge::Error&) {
  }
  return 0;
}
