// defines: the JSON access and UTF-8 helpers of hf_components.h, and what hf_component_util.h declares
// (read_pattern(), single_char()), shared by the tokenizer.json stage files
#include "text/hf_component_util.h"
#include "text/hf_components.h"
#include "text/unicode_classes.h"
#include "util/error.h"

namespace lmforge::text::hf {

using simdjson::dom::element;

// ---------------------------------------------------------------------------------------------------------
// JSON and UTF-8 helpers

void Context::fail(const std::string& path, const std::string& reason) const {
  throw Error(origin + ": " + path + ": " + reason);
}

std::optional<element> opt_field(const element& e, std::string_view key) {
  element v;
  if (e.type() != simdjson::dom::element_type::OBJECT) return std::nullopt;
  if (e[key].get(v) != simdjson::SUCCESS || v.is_null()) return std::nullopt;
  return v;
}

std::string get_type(const element& e, const std::string& path, const Context& cx) {
  if (e.type() != simdjson::dom::element_type::OBJECT) cx.fail(path, "expected an object");
  return get_string(e, "type", path, cx);
}

std::string get_string(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto s = opt_string(e, key, path, cx);
  if (!s) cx.fail(path, "missing string field \"" + std::string(key) + "\"");
  return *s;
}

std::optional<std::string> opt_string(const element& e, std::string_view key, const std::string& path,
                                      const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  std::string_view s;
  if (f->get(s) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected a string");
  return std::string(s);
}

bool get_bool(const element& e, std::string_view key, bool def, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return def;
  bool b;
  if (f->get(b) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected true or false");
  return b;
}

std::optional<int64_t> opt_int(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  int64_t v;
  uint64_t u;
  if (f->get(v) == simdjson::SUCCESS) return v;
  if (f->get(u) == simdjson::SUCCESS && u <= uint64_t(INT64_MAX)) return int64_t(u);
  cx.fail(path + "." + std::string(key), "expected an integer");
}

std::optional<double> opt_double(const element& e, std::string_view key, const std::string& path,
                                 const Context& cx) {
  auto f = opt_field(e, key);
  if (!f) return std::nullopt;
  double d;
  if (f->get(d) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected a number");
  return d;
}

simdjson::dom::array get_array(const element& e, std::string_view key, const std::string& path, const Context& cx) {
  auto f = opt_field(e, key);
  simdjson::dom::array a;
  if (!f || f->get(a) != simdjson::SUCCESS) cx.fail(path + "." + std::string(key), "expected an array");
  return a;
}

uint32_t next_char(std::string_view s, size_t i, int& len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  if (*p < 0x80) {
    len = 1;
    return *p;
  }
  uint32_t cp;
  len = decode_utf8(p, reinterpret_cast<const uint8_t*>(s.data()) + s.size(), cp);
  if (len == 0) {
    len = 1;
    return 0xFFFD;
  }
  return cp;
}

Pattern read_pattern(const element& e, const std::string& path, const Context& cx) {
  auto f = opt_field(e, "pattern");
  if (!f) cx.fail(path, "missing \"pattern\"");
  Pattern p;
  if (auto s = opt_string(*f, "String", path + ".pattern", cx)) {
    p.literal = *s;
  } else if (auto r = opt_string(*f, "Regex", path + ".pattern", cx)) {
    p.regex = std::make_unique<HfRegex>(*r, cx.origin + ": " + path + ".pattern.Regex");
  } else {
    cx.fail(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

std::string single_char(const element& e, std::string_view key, const std::string& path, const Context& cx,
                        uint32_t& cp) {
  const std::string s = get_string(e, key, path, cx);
  int len = 0;
  if (s.empty() || (cp = next_char(s, 0, len), size_t(len) != s.size()))
    cx.fail(path + "." + std::string(key), "expected a single character");
  return s;
}

}  // namespace lmforge::text::hf
