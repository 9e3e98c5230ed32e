// defines: libFuzzer target for the JSON line path of prep: bytes cut into lines by LineBlocker (with a small
//          line limit, so the over-long path runs too), each line through JsonDocumentParser (which falls back to
//          repair and to number normalization), and numbers_normalized() on the raw bytes
#include <cstdint>
#include <cstring>
#include <string>

#include "data/line_reader.h"
#include "prep/json_document.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string normalized;
  lmforge::prep::numbers_normalized(input, normalized);

  size_t pos = 0;
  lmforge::data::LineBlocker blocker("fuzz.jsonl", 512, true);
  auto read = [&](char* dst, size_t cap) {
    const size_t n = std::min<size_t>({cap, size - pos, 37});  // short reads, as from a pipe
    std::memcpy(dst, data + pos, n);
    pos += n;
    return n;
  };
  lmforge::prep::JsonDocumentParser parser({"text", "t2"});
  lmforge::prep::ParsedDocument doc;
  lmforge::data::LineBlock block;
  try {
    while (blocker.next_block(block, 64, read)) {
      block.bytes.reserve(block.bytes.size() + 64);  // simdjson's padding, as prep keeps it
      size_t start = 0;
      for (uint64_t n = 0; n < block.line_count; ++n) {
        size_t end = block.bytes.find('\n', start);
        if (end == std::string::npos) end = block.bytes.size();
        const std::string_view line(block.bytes.data() + start, end - start);
        parser.parse(line, block.bytes.capacity() - end, doc);
        start = end + 1;
      }
    }
  } catch (const lmforge::Error&) {
    // UTF-16 input is refused: an expected outcome
  }
  return 0;
}
