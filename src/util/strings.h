// defines: small text helpers several modules share: errno_text(), python_strip(), int_text(), seconds_since(),
//          minutes_text()
#pragma once
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace lmforge {

// The text of the current errno, for messages that name a failed system call.
inline std::string errno_text() { return std::strerror(errno); }

// Python's str.strip() for ASCII whitespace (what a command line or a vocab.txt line can carry).
inline std::string python_strip(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// An integer as decimal text (every integer type through int64_t, so messages print the same for each).
inline std::string int_text(int64_t v) { return std::to_string(v); }

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A timeout as "10 min (600 s)", "0.5 min (30 s)".
inline std::string minutes_text(std::chrono::milliseconds d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g min (%.3g s)", (double)d.count() / 60000.0, (double)d.count() / 1000.0);
  return buf;
}

}  // namespace lmforge
