// defines: JsonNumberAt, json_number_out_of_range() — where a JSON text holds a number that a reader limited to
//          64-bit integers and doubles (simdjson) refuses, though JSON (and Python's json) allow it: 2^64 + 4, 1e400
#pragma once
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace lmforge {

struct JsonNumberAt {
  std::string key;      // the dotted path of the value ("zero_optimization.stage", "optimizer.params.betas[1]")
  std::string literal;  // the number as written
  bool integer = true;  // no fraction and no exponent: out of -2^63 .. 2^64-1; else beyond the doubles
};

namespace json_scan_detail {

// A recursive-descent walk over JSON text (no values kept), stopping at the first number out of range. Malformed
// text ends the walk without a finding (the parser's own error then stands).
struct Walker {
  std::string_view s;
  size_t i = 0;
  std::optional<JsonNumberAt> found;
  bool failed = false;

  void space() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  }
  bool string(std::string* out) {
    if (i >= s.size() || s[i] != '"') return false;
    for (i++; i < s.size(); i++) {
      if (s[i] == '\\') {
        if (out) out->push_back(s[i + 1 < s.size() ? i + 1 : i]);
        i++;
      } else if (s[i] == '"') {
        i++;
        return true;
      } else if (out) {
        out->push_back(s[i]);
      }
    }
    return false;
  }
  // An integer literal beyond 64 bits: more digits than the limit, or as many and larger.
  static bool integer_out_of_range(std::string_view digits, bool negative) {
    const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    return digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit);
  }
  void number(const std::string& key) {
    const size_t begin = i;
    bool integer = true;
    if (s[i] == '-') i++;
    while (i < s.size() && (std::isdigit((unsigned char)s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                            s[i] == '+' || s[i] == '-')) {
      if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') integer = false;
      i++;
    }
    const std::string literal(s.substr(begin, i - begin));
    const bool negative = literal[0] == '-';
    const bool out = integer ? integer_out_of_range(std::string_view(literal).substr(negative ? 1 : 0), negative)
                             : !std::isfinite(std::strtod(literal.c_str(), nullptr));
    if (out && !found) found = JsonNumberAt{key, literal, integer};
  }
  void value(const std::string& key) {
    space();
    if (i >= s.size() || found || failed) return void(failed = true);
    const char c = s[i];
    if (c == '{') {
      i++;
      space();
      if (i < s.size() && s[i] == '}') return void(i++);
      while (!found && !failed) {
        space();
        std::string name;
        if (!string(&name)) return void(failed = true);
        space();
        if (i >= s.size() || s[i] != ':') return void(failed = true);
        i++;
        value(key.empty() ? name : key + "." + name);
        space();
        if (i < s.size() && s[i] == ',') i++;
        else if (i < s.size() && s[i] == '}') return void(i++);
        else return void(failed = true);
      }
    } else if (c == '[') {
      i++;
      space();
      if (i < s.size() && s[i] == ']') return void(i++);
      for (int k = 0; !found && !failed; k++) {
        value(key + "[" + std::to_string(k) + "]");
        space();
        if (i < s.size() && s[i] == ',') i++;
        else if (i < s.size() && s[i] == ']') return void(i++);
        else return void(failed = true);
      }
    } else if (c == '"') {
      if (!string(nullptr)) failed = true;
    } else if (c == '-' || std::isdigit((unsigned char)c)) {
      number(key);
    } else {
      while (i < s.size() && std::isalpha((unsigned char)s[i])) i++;  // true, false, null
    }
  }
};

}  // namespace json_scan_detail

// The first number of `json` outside what simdjson reads (integers -2^63 .. 2^64-1, finite doubles), with its key;
// nullopt when there is none (or the text is malformed before one is reached).
inline std::optional<JsonNumberAt> json_number_out_of_range(std::string_view json) {
  json_scan_detail::Walker w;
  w.s = json;
  w.value("");
  return w.found;
}

}  // namespace lmforge
