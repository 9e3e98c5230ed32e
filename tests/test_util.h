// defines: small helpers shared by tests: a temporary directory, whole-file reads, running a command, loss_lines()
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lmforge::testing {

inline std::string shared_path(const std::string& relative) { return std::string(LMFORGE_SHARED_DIR) + "/" + relative; }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lmforge-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + path);
}

struct CommandResult {
  int status = -1;  // exit code, or -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr merged into stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The lines of a training log whose numbers must agree between runs of the same training: the loss, learning-rate
// and grad-norm part of iteration lines (from "| learning rate:" on; the time varies) and the evaluation lines.
inline std::vector<std::string> loss_lines(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t p = line.find("| learning rate:");
    if (line.rfind(" iteration ", 0) == 0 && p != std::string::npos) out.push_back(line.substr(p));
    if (line.find("validation loss at") != std::string::npos) out.push_back(line);
  }
  return out;
}

// A TCP port on the loopback interface that was free a moment ago (bound to port 0, read back, closed): for
// rendezvous and launcher tests that would otherwise collide on a fixed port when ctest runs them side by side.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace lmforge::testing
