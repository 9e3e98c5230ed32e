// defines: ProgressLine, format_count(), format_duration()
#include "util/progress.h"

#include <unistd.h>

namespace lmforge {

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string format_duration(double seconds) {
  if (seconds < 0 || seconds > 1e8) return "?";
  const auto total = static_cast<uint64_t>(seconds + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", (unsigned long long)(total / 3600),
                  (unsigned long long)(total / 60 % 60), (unsigned long long)(total % 60));
  else
    std::snprintf(buf, sizeof buf, "%llu:%02llu", (unsigned long long)(total / 60), (unsigned long long)(total % 60));
  return buf;
}

ProgressLine::ProgressLine(double interval_seconds, FILE* out)
    : out_(out), terminal_(isatty(fileno(out)) != 0), start_(Clock::now()), last_(start_) {
  interval_ = interval_seconds >= 0 ? interval_seconds : (terminal_ ? 1.0 : 10.0);
}

bool ProgressLine::due() {
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_) return false;
  last_ = now;
  return true;
}

void ProgressLine::print(const std::string& text) {
  if (terminal_)
    std::fprintf(out_, "\r\033[K%s", text.c_str());
  else
    std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
  printed_ = true;
}

void ProgressLine::finish() {
  if (terminal_ && printed_) std::fputc('\n', out_);
  printed_ = false;
}

double ProgressLine::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

}  // namespace lmforge
