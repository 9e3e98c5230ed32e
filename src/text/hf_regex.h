// defines: HfRegex: Oniguruma-style patterns of tokenizer.json (Split, Replace) run on PCRE2 (UTF + UCP, JIT)
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lmforge::text {

// Hugging Face compiles Split/Replace patterns with Oniguruma (Ruby syntax, UTF-8). PCRE2 agrees on the syntax
// these files use (alternation, classes, \p{..}, (?i:..), lookahead, {m,n}); where the two differ we translate:
//   - \s / \S: Oniguruma's \s is Unicode White_Space, PCRE2 10.42's (UCP) lacks U+0085, so \s becomes
//     [\t-\r\x{85}\p{Z}] (exactly White_Space) and \S its complement;
//   - ^ and $ match at line boundaries in Ruby syntax, so the pattern is compiled MULTILINE.
// Unsupported here (Error naming the pattern): \S inside a character class, \h (hex digit in Oniguruma), \R.
//   - \p{L} and \p{N} also match the Unicode 15/16 letters and numbers PCRE2 10.42's (Unicode 14) tables lack.
// Limit: other properties (\p{Lu}, scripts...) and \w follow PCRE2's Unicode 14 tables.
class HfRegex {
 public:
  // `where` names the pattern's place (JSON path) in error messages.
  HfRegex(std::string_view pattern, const std::string& where);
  ~HfRegex();
  HfRegex(const HfRegex&) = delete;
  HfRegex& operator=(const HfRegex&) = delete;

  // Non-overlapping matches [begin, end) left to right, as Oniguruma's find iterator gives them (an empty match
  // advances one character). Thread-safe (per-thread match data).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

  static std::string translate(std::string_view pattern, const std::string& where);

 private:
  void* code_ = nullptr;  // pcre2_code_8
  std::string where_;
};

}  // namespace lmforge::text
