// defines: lmforge::Error (an exception whose message is meant for the user), input_location()
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace lmforge {

// Every failure a user can cause (bad flags, bad input, a corrupt file) is an Error whose message names the
// file, the line or offset, and the reason; main() prints it as "lmforge <command>: error: <message>".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<path>:<line>" as compilers print it, so editors can jump to it.
inline std::string input_location(const std::string& path, uint64_t line) {
  return path + ":" + std::to_string(line);
}

}  // namespace lmforge
