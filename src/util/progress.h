// defines: ProgressLine: a rate-limited progress line on stderr (rate, ETA), rewritten in place on a terminal
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lmforge {

std::string format_count(uint64_t n);          // 1234567 -> "1,234,567"
std::string format_duration(double seconds);  // 75.2 -> "1:15", 3725 -> "1:02:05"

class ProgressLine {
 public:
  // interval_seconds < 0 picks 1 s on a terminal and 10 s otherwise (logs stay readable).
  explicit ProgressLine(double interval_seconds = -1, FILE* out = stderr);
  // True when a line is due; the caller then builds its text and calls print().
  bool due();
  void print(const std::string& text);
  // Ends an in-place line with a newline so later output starts on a fresh line.
  void finish();
  double elapsed_seconds() const;

 private:
  using Clock = std::chrono::steady_clock;
  FILE* out_;
  bool terminal_;
  double interval_;
  Clock::time_point start_, last_;
  bool printed_ = false;
};

}  // namespace lmforge
