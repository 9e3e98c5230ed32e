// defines: CharClass, char_class(), decode_utf8(): the Unicode classes of GPT-2's pre-tokenizer pattern
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lmforge::text {

// The classes the pattern `'s|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` distinguishes.
// Letters are general categories L*, numbers N*, spaces the White_Space property, all as of Unicode 16
// (the tables Hugging Face tokenizers uses); everything else, including marks (M*), is kOther.
enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

namespace detail {
// Two-stage table over all code points: stage2[stage1[cp >> 8] * 256 + (cp & 255)]. Built once (thread-safe
// static initialisation) from utf8proc plus a Unicode 16 supplement; ~60 KB, so it stays in cache.
struct ClassTable {
  const uint16_t* stage1;  // 0x1100 entries
  const uint8_t* stage2;
};
ClassTable build_class_table();  // the tables live for the whole program
// Inline so the hot loop pays a guard check, not a call, per non-ASCII character.
inline const ClassTable& class_table() {
  static const ClassTable table = build_class_table();
  return table;
}
extern const uint8_t kAsciiClass[128];
}  // namespace detail

// Class of a code point (any value; above U+10FFFF is kOther).
inline CharClass char_class(uint32_t cp) {
  if (cp < 128) return static_cast<CharClass>(detail::kAsciiClass[cp]);
  if (cp > 0x10FFFF) return kOther;
  const detail::ClassTable& t = detail::class_table();
  return static_cast<CharClass>(t.stage2[static_cast<size_t>(t.stage1[cp >> 8]) * 256 + (cp & 255)]);
}

// Decodes one well-formed UTF-8 sequence (no overlongs, no surrogates, <= U+10FFFF) at p, p < end.
// Returns its length 1..4 and sets cp, or 0 when the bytes at p are not a well-formed sequence.
inline int decode_utf8(const uint8_t* p, const uint8_t* end, uint32_t& cp) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  const ptrdiff_t left = end - p;
  if (b0 < 0xC2) return 0;
  if (b0 < 0xE0) {
    if (left < 2 || (p[1] & 0xC0) != 0x80) return 0;
    cp = (uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F);
    return 2;
  }
  if (b0 < 0xF0) {
    if (left < 3) return 0;
    const uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;  // overlongs, surrogates
    if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) return 0;
    cp = (uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return 3;
  }
  if (b0 < 0xF5) {
    if (left < 4) return 0;
    const uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;  // overlongs, > U+10FFFF
    if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
    cp = (uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 4;
  }
  return 0;
}

// Class of the character at p (p < end) and its length in bytes. A byte that does not start a well-formed
// UTF-8 sequence counts as a one-byte kOther character, so malformed input is tokenized, never rejected.
inline CharClass class_at(const uint8_t* p, const uint8_t* end, int& len) {
  if (p[0] < 0x80) {
    len = 1;
    return static_cast<CharClass>(detail::kAsciiClass[p[0]]);
  }
  uint32_t cp;
  len = decode_utf8(p, end, cp);
  if (len == 0) {
    len = 1;
    return kOther;
  }
  return char_class(cp);
}

// Appends code point `cp` (a valid scalar value) to `out` as UTF-8.
void append_utf8(uint32_t cp, std::string& out);

}  // namespace lmforge::text
