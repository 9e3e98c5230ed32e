// defines: JsonDocumentParser: one loose-JSON line to the text(s) of the requested keys, with Megatron's reading
// of values (a string is one sequence, a list of strings is a list of pre-split sentences) and lmforge's repair
// of malformed text (invalid UTF-8 and lone surrogate escapes become U+FFFD, counted). Numbers and literals that
// Python's json accepts but simdjson does not (1e400, integers beyond 64 bits, NaN, Infinity, -Infinity) do not
// make a line invalid: only the keys' strings are read, so they are parsed as 0 (numbers_normalized()).
#pragma once
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::prep {

struct ParsedDocument {
  // texts[k] holds the sentences of json key k (one entry for a plain string). Views stay valid until the next
  // parse() on the same parser.
  std::vector<std::vector<std::string_view>> texts;
  std::vector<uint8_t> is_list;          // per key: the value was a list (pre-split sentences), not a string
  size_t invalid_utf8_replaced = 0;      // ill-formed UTF-8 subsequences replaced by U+FFFD
  size_t lone_surrogates_replaced = 0;   // \uD800-\uDFFF escapes without a partner replaced by U+FFFD
};

class JsonDocumentParser {
 public:
  explicit JsonDocumentParser(std::vector<std::string> keys);
  // Parses one line (without its '\n'). The bytes after `line` up to line.data() + padded_capacity must be
  // readable (simdjson reads ahead in 64-byte blocks). Returns an empty string on success, else the reason the
  // line is invalid ("not valid JSON: ...", "missing key \"text\"", "value of \"text\" is a number, not a string").
  std::string parse(std::string_view line, size_t readable_after, ParsedDocument& doc);

 private:
  std::string parse_repaired(std::string_view json, ParsedDocument& doc);
  std::string parse_normalized(std::string_view json, std::string error, ParsedDocument& doc);
  std::string extract(const simdjson::dom::element& root, ParsedDocument& doc);

  std::vector<std::string> keys_;
  simdjson::dom::parser parser_;
  std::string repaired_, repaired2_, normalized_;
};

// Copies `json` to `out` with every JSON number outside strings (by JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?
// ([eE][+-]?[0-9]+)?) and every NaN, Infinity, -Infinity (Python's extensions) replaced by 0; anything else,
// malformed numbers included, is copied unchanged. True when something was replaced.
bool numbers_normalized(std::string_view json, std::string& out);

}  // namespace lmforge::prep
