// defines: is_python_whitespace(), find_invalid_utf8(), python_strip(), python_split()
#include "text/python_str.h"

#include <cstring>

namespace lmforge::text {
namespace {

// Decodes the valid UTF-8 sequence at s[i]; returns its code point and advances i.
uint32_t decode_at(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  const int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len && i + size_t(k) < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + size_t(k)]) & 0x3F);
  i += size_t(len);
  return cp;
}

}  // namespace

bool is_python_whitespace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    // ASCII, most of most text: 16 bytes at a time while none has its high bit set.
    while (n - i >= 16) {
      uint64_t lo, hi;
      std::memcpy(&lo, p + i, 8);
      std::memcpy(&hi, p + i + 8, 8);
      if (((lo | hi) & 0x8080808080808080ull) != 0) break;
      i += 16;
    }
    if (i >= n) break;
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp, min;
    if (b >= 0xC2 && b <= 0xDF) len = 2, cp = b & 0x1F, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, cp = b & 0x0F, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, cp = b & 0x07, min = 0x10000;
    else return i;
    if (n - i < size_t(len)) return i;
    for (int k = 1; k < len; ++k) {
      if ((p[i + size_t(k)] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + size_t(k)] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return i;
    i += size_t(len);
  }
  return std::string_view::npos;
}

std::string_view python_strip(std::string_view s) {
  // [first, last): from the first to past the last non-whitespace character. Only the ends are decoded (from the
  // back, a character starts at the first byte that is not a continuation byte 10xxxxxx): a line is not scanned.
  size_t first = 0;
  while (first < s.size()) {
    size_t i = first;
    if (!is_python_whitespace(decode_at(s, i))) break;
    first = i;
  }
  if (first == s.size()) return s.substr(0, 0);
  size_t last = s.size();
  while (last > first) {
    size_t start = last - 1;
    while (start > first && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_python_whitespace(decode_at(s, i))) break;
    last = start;
  }
  return s.substr(first, last - first);
}

void python_split(std::string_view s, std::vector<std::string_view>& out) {
  size_t word = std::string_view::npos;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (is_python_whitespace(decode_at(s, i))) {
      if (word != std::string_view::npos) out.push_back(s.substr(word, at - word));
      word = std::string_view::npos;
    } else if (word == std::string_view::npos) {
      word = at;
    }
  }
  if (word != std::string_view::npos) out.push_back(s.substr(word));
}

}  // namespace lmforge::text
