// defines: for_each_gpt2_piece(): GPT-2's pre-tokenizer regex, hand-written (first alternative wins, as a regex)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/unicode_classes.h"

namespace lmforge::text {

// Calls on_piece(const uint8_t* data, size_t size) for each match of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// in order; the pieces tile the text. The alternatives are tried in that order at each position and the first
// that matches wins (so "'sss" is "'s" + "ss", "'S" is "'" + "S"). Bytes that are not well-formed UTF-8 are
// one-byte "other" characters (they join runs of punctuation), so any byte string is split, never rejected.
template <class OnPiece>
inline void for_each_gpt2_piece(std::string_view text, OnPiece&& on_piece) {
  const uint8_t* const s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const uint8_t* const end = s + n;
  size_t i = 0;
  // Extends a run of class `cls` from j; returns the end of the run.
  auto run_end = [&](size_t j, CharClass cls) {
    while (j < n) {
      const uint8_t b = s[j];
      if (b < 0x80) {  // ASCII: no decoding
        if (detail::kAsciiClass[b] != cls) break;
        ++j;
        continue;
      }
      int len;
      if (class_at(s + j, end, len) != cls) break;
      j += len;
    }
    return j;
  };
  while (i < n) {
    const uint8_t b = s[i];
    if (b == '\'' && i + 1 < n) {  // contractions, lower case only
      const uint8_t c1 = s[i + 1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        on_piece(s + i, 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const uint8_t c2 = s[i + 2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          on_piece(s + i, 3);
          i += 3;
          continue;
        }
      }
    }
    int len;
    const CharClass cls = class_at(s + i, end, len);
    if (cls != kSpace) {  // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
      const size_t j = run_end(i + len, cls);
      on_piece(s + i, j - i);
      i = j;
      continue;
    }
    if (b == ' ' && i + 1 < n) {  // ` ?X+`: a plain space joins the run that follows it
      int len2;
      const CharClass next = class_at(s + i + 1, end, len2);
      if (next != kSpace) {
        const size_t j = run_end(i + 1 + len2, next);
        on_piece(s + i, j - i);
        i = j;
        continue;
      }
    }
    // Whitespace run [i, j). `\s+(?!\S)` backtracks one character when a non-space follows, leaving that last
    // whitespace character to the next match (` ?\p{L}+` if it is a space, else `\s+` alone). A run of one
    // character before a non-space fails `\s+(?!\S)` and is taken whole by `\s+`.
    size_t j = i + len, last = i;
    while (j < n) {
      int l;
      if (class_at(s + j, end, l) != kSpace) break;
      last = j;
      j += l;
    }
    if (j < n && last > i) j = last;
    on_piece(s + i, j - i);
    i = j;
  }
}

}  // namespace lmforge::text
