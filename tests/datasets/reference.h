// defines: test helpers for tests/sampling — run the numpy reference (python3) and read its raw outputs
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace lmforge::datasets::testing {

inline std::string temp_dir(const std::string& tag) {
  const std::string dir = std::string(LMFORGE_BINARY_DIR) + "/test-tmp/sampling-" + tag + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Runs /usr/bin/python3 with the given arguments; a failure of the reference fails the test (never skips).
inline void run_python(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 " + args;
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << "reference failed: " << cmd;
}

template <typename T>
std::vector<T> read_raw(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(bool(f)) << "missing reference output " << path;
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.size() % sizeof(T), 0u) << path;
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline std::string reference_script() { return std::string(LMFORGE_SOURCE_DIR) + "/tests/datasets/megatron_gpt_reference.py"; }
inline std::string shared_prefix(const std::string& name) {
  return std::string(LMFORGE_SHARED_DIR) + "/data/sample/" + name;
}

}  // namespace lmforge::datasets::testing
