// defines: what the tokenizer.json stage files (hf_normalizers.cpp, hf_pre_tokenizers.cpp, hf_decoders.cpp)
// share: is_whitespace(), for_each_char(), Pattern (HF's {"String": ...} / {"Regex": ...}) with read_pattern(),
// single_char(), and ReplaceNormalizer (HF's Replace decoder runs its Replace normalizer). Internal to those files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/hf_components.h"
#include "text/hf_regex.h"
#include "text/unicode_classes.h"

namespace lmforge::text::hf {

// Rust's char::is_whitespace: the White_Space property.
inline bool is_whitespace(uint32_t cp) { return char_class(cp) == kSpace; }

template <class F>
void for_each_char(std::string_view s, F&& f) {
  for (size_t i = 0; i < s.size();) {
    int len;
    const uint32_t cp = next_char(s, i, len);
    f(cp, i, len);
    i += size_t(len);
  }
}

// Either a literal string or a regex: HF's {"String": ...} / {"Regex": ...} patterns.
struct Pattern {
  std::string literal;
  std::unique_ptr<HfRegex> regex;
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& m) const {
    if (regex) {
      regex->find_all(s, m);
      return;
    }
    m.clear();
    if (literal.empty()) return;
    for (size_t at = s.find(literal); at != std::string_view::npos; at = s.find(literal, at + literal.size()))
      m.emplace_back(at, at + literal.size());
  }
};

Pattern read_pattern(const simdjson::dom::element& e, const std::string& path, const Context& cx);

// The single character of the string field `key` (its code point in `cp`); Error otherwise.
std::string single_char(const simdjson::dom::element& e, std::string_view key, const std::string& path,
                        const Context& cx, uint32_t& cp);

class ReplaceNormalizer final : public HfNormalizer {
 public:
  Pattern pattern;
  std::string content;
  void normalize(std::string& s) const override {
    std::vector<std::pair<size_t, size_t>> m;
    pattern.find_all(s, m);
    if (m.empty()) return;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : m) {
      out.append(s, prev, b - prev);
      out += content;
      prev = e;
    }
    out.append(s, prev, std::string::npos);
    s.swap(out);
  }
};

}  // namespace lmforge::text::hf
