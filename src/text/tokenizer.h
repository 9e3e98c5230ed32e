// defines: lmforge::text::Tokenizer (immutable, shared by threads) and TextEncoder (per-thread state)
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::text {

// Per-thread encoding state (word caches, scratch buffers). Not thread-safe: one per worker thread.
class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // Appends the ids of `text` (valid UTF-8) to `ids`. No special tokens, no EOD.
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::unique_ptr<TextEncoder> make_encoder() const = 0;
  // Text of `ids`; bytes that do not form valid UTF-8 become U+FFFD (as Python's errors='replace').
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // Unpadded vocabulary size as Megatron's tokenizer reports it (it decides the dataset dtype).
  virtual size_t vocab_size() const = 0;
  // End-of-document id appended by --append-eod; none for tokenizers that have no such token.
  virtual std::optional<int32_t> eod_id() const = 0;
  // Megatron's --tokenizer-type name, e.g. "GPT2BPETokenizer".
  virtual std::string type_name() const = 0;
};

}  // namespace lmforge::text
