// defines: config_int(), config_positive_int(), config_number(), config_string(), config_bool(), shortest_decimal()
#include "checkpoint/config_fields.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <variant>

#include "util/error.h"

namespace lmforge::checkpoint {
namespace {

bool is_null(const JsonValue& v) {
  const RawJson* raw = std::get_if<RawJson>(&v);
  return raw != nullptr && raw->text == "null";
}

[[noreturn]] void wrong_type(const std::string& key, const char* expected, const std::string& source) {
  throw Error(source + ": \"" + key + "\" must be " + expected);
}

}  // namespace

int64_t config_int(const JsonObject& o, const std::string& key, const std::string& source) {
  auto it = o.find(key);
  if (it == o.end()) throw Error(source + ": missing \"" + key + "\"");
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  wrong_type(key, "an integer", source);
}

int config_positive_int(const JsonObject& o, const std::string& key, const std::string& source) {
  const int64_t v = config_int(o, key, source);
  if (v < 1 || v > std::numeric_limits<int>::max())
    throw Error(source + ": \"" + key + "\" is " + std::to_string(v) + ", outside [1, " +
                std::to_string(std::numeric_limits<int>::max()) + "]");
  return (int)v;
}

double config_number(const JsonObject& o, const std::string& key, double fallback, const std::string& source) {
  auto it = o.find(key);
  if (it == o.end() || is_null(it->second)) return fallback;
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return (double)*v;
  wrong_type(key, "a number", source);
}

std::string config_string(const JsonObject& o, const std::string& key, const std::string& fallback,
                          const std::string& source) {
  auto it = o.find(key);
  if (it == o.end() || is_null(it->second)) return fallback;
  if (const std::string* v = std::get_if<std::string>(&it->second)) return *v;
  wrong_type(key, "a string", source);
}

bool config_bool(const JsonObject& o, const std::string& key, bool fallback, const std::string& source) {
  auto it = o.find(key);
  if (it == o.end() || is_null(it->second)) return fallback;
  if (const bool* v = std::get_if<bool>(&it->second)) return *v;
  wrong_type(key, "true or false", source);
}

double shortest_decimal(float x) {
  // Up to 9 significant digits (FLT_DECIMAL_DIG) always read back as the same float; 7 do not for every float
  // (1.17549435e-38 needs 8), so take the first precision that does.
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
    if ((float)std::strtod(buf, nullptr) == x) break;
  }
  return std::strtod(buf, nullptr);
}

}  // namespace lmforge::checkpoint
