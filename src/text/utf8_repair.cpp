// defines: repair_utf8(), repair_lone_surrogate_escapes()
#include "text/utf8_repair.h"

#include <cstdint>

namespace lmforge::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed sequence starting at s[i], or 0 if the bytes there are ill-formed; `subpart` gets the
// length of the maximal ill-formed prefix (at least 1) to replace by one U+FFFD. Ranges from Unicode Table 3-7.
size_t well_formed_length(const unsigned char* s, size_t n, size_t& subpart) {
  const unsigned char b0 = s[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    subpart = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < need && k < n; ++k) {
    const unsigned char b = s[k];
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need) return need;
  subpart = k;
  return 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Code unit of a "\uXXXX" escape starting at json[i] (json[i] == '\\'), or -1.
int escape_unit(std::string_view json, size_t i) {
  if (i + 6 > json.size() || json[i] != '\\' || json[i + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    const int h = hex_value(json[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

}  // namespace

size_t repair_utf8(std::string_view bytes, std::string& out) {
  out.clear();
  return append_repaired_utf8(bytes, out);
}

size_t append_repaired_utf8(std::string_view bytes, std::string& out) {
  out.reserve(out.size() + bytes.size() + 8);
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t replaced = 0, i = 0, run_start = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    size_t subpart = 0;
    const size_t len = well_formed_length(s + i, n - i, subpart);
    if (len) {
      i += len;
      continue;
    }
    out.append(bytes.data() + run_start, i - run_start);
    out.append(kReplacement);
    ++replaced;
    i += subpart;
    run_start = i;
  }
  out.append(bytes.data() + run_start, n - run_start);
  return replaced;
}

size_t repair_lone_surrogate_escapes(std::string_view json, std::string& out) {
  size_t replaced = 0, run_start = 0;
  std::string result;
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] != '\\') continue;
    if (i + 1 < json.size() && json[i + 1] != 'u') {  // any other escape: skip its character (it may be '\\')
      ++i;
      continue;
    }
    const int unit = escape_unit(json, i);
    if (unit < 0xD800 || unit > 0xDFFF) continue;
    const bool high = unit <= 0xDBFF;
    if (high) {
      const int next = escape_unit(json, i + 6);
      if (next >= 0xDC00 && next <= 0xDFFF) {  // a proper pair: keep both escapes
        i += 11;
        continue;
      }
    }
    result.append(json.data() + run_start, i - run_start);
    result.append("\\uFFFD");
    ++replaced;
    i += 5;
    run_start = i + 1;
  }
  if (replaced) {
    result.append(json.data() + run_start, json.size() - run_start);
    out = std::move(result);
  }
  return replaced;
}

}  // namespace lmforge::text
