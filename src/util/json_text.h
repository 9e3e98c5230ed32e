// defines: json_quote(), json_number() — writing JSON text by hand (the project parses JSON with simdjson)
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/error.h"

namespace lmforge {

// A JSON string literal with serde_json's escaping (what the reference safetensors writer emits): ", \ and
// control characters escaped, everything else (UTF-8 included) copied as is.
inline std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

inline std::string json_number(int64_t x) { return std::to_string(x); }
inline std::string json_number(uint64_t x) { return std::to_string(x); }

// Shortest text that parses back to the same double (std::to_chars), always with a '.' or exponent so a
// reader can tell it from an integer. JSON has no NaN or infinity.
inline std::string json_number(double x) {
  if (!std::isfinite(x)) throw Error("cannot write a non-finite number (" + std::to_string(x) + ") to JSON");
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace lmforge
