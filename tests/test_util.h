// defines: small helpers shared by tests: a temporary directory, whole-file reads, running a command, loss_lines()
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
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

// Whether a TCP port of the loopback interface can be bound now.
inline bool loopback_port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

// A TCP port on the loopback interface, free when chosen: for rendezvous and launcher tests that would otherwise
// collide on a fixed port when ctest runs them side by side. Taken below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port the kernel handed out for bind(0) could be given again to another
// test's outgoing connection before the rank that listens on it binds it (a rank 0 then failed with "Address
// already in use" while its peers waited for it). Random from the process id and the clock, so tests started
// together pick different ports; where the range leaves no room below it, the kernel's choice.
inline int free_port() {
  int ephemeral_low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> ephemeral_low;
  constexpr int kFirst = 10000;
  if (ephemeral_low > kFirst + 1000) {
    uint64_t x = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0; attempt < 200; ++attempt) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
      const int port = kFirst + static_cast<int>(x % static_cast<uint64_t>(ephemeral_low - kFirst));
      if (loopback_port_free(port)) return port;
    }
  }
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
