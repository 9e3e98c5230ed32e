// defines: helpers shared by the libFuzzer targets: input_file() (the input bytes as a file, for readers that
//          take a path), without leaving files behind between runs
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace lmforge::fuzz {

// Writes [data, data+size) to "<TMPDIR or /tmp>/lmforge-fuzz-<pid><suffix>" and returns the path (one file per
// process and suffix, overwritten by each run, removed by the caller's FileGuard).
inline std::string input_file(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/lmforge-fuzz-" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

struct FileGuard {
  std::string path;
  ~FileGuard() { std::remove(path.c_str()); }
};

}  // namespace lmforge::fuzz
