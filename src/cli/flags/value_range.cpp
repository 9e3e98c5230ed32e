// defines: at_least(), greater_than(), in_range() (see the header)
#include "cli/flags/value_range.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "cli/flags/aliases.h"

namespace lmforge::cli {
namespace {

// `text` as a finite number in `value` (true), or false with `why` filled in. Compared as doubles: integers are exact
// up to 2^53, far beyond any count a flag takes; the option's own conversion still refuses a fraction for an integer.
bool range_value(const std::string& text, double& value, std::string& why) {
  const char* begin = text.c_str();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  if (text.empty() || end == begin || *end != '\0' || !std::isfinite(value)) {
    why = "must be a number, got '" + text + "'";
    return false;
  }
  return true;
}

// A limit as a user writes it: 1, 0.5, 65535 (not 1.000000).
std::string limit_text(double x) { return show_number(x); }

}  // namespace

CLI::Validator at_least(int64_t min) {
  const std::string rule = min == 0 ? "must be 0 or more" : "must be at least " + std::to_string(min);
  return CLI::Validator(
      [min, rule](std::string& text) -> std::string {
        double v = 0;
        std::string why;
        if (!range_value(text, v, why)) return why;
        return v < (double)min ? rule + ", got " + text : std::string();
      },
      min == 0 ? "0 or more" : ">= " + std::to_string(min));
}

CLI::Validator greater_than(double bound) {
  const std::string rule = "must be greater than " + limit_text(bound);
  return CLI::Validator(
      [bound, rule](std::string& text) -> std::string {
        double v = 0;
        std::string why;
        if (!range_value(text, v, why)) return why;
        return v > bound ? std::string() : rule + ", got " + text;
      },
      "> " + limit_text(bound));
}

CLI::Validator in_range(double lo, double hi) {
  const std::string rule = "must be between " + limit_text(lo) + " and " + limit_text(hi);
  return CLI::Validator(
      [lo, hi, rule](std::string& text) -> std::string {
        double v = 0;
        std::string why;
        if (!range_value(text, v, why)) return why;
        return v >= lo && v <= hi ? std::string() : rule + ", got " + text;
      },
      limit_text(lo) + " to " + limit_text(hi));
}

}  // namespace lmforge::cli
