// defines: even_split(), Communicator::all_reduce_sum(float*), the single-process communicator
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <cstdlib>

#include "dist/communicator.h"

namespace lmforge::dist {

std::vector<size_t> even_split(size_t n, int parts) {
  std::vector<size_t> counts((size_t)parts, n / (size_t)parts);
  for (size_t r = 0; r < n % (size_t)parts; r++) counts[r]++;
  return counts;
}

void Communicator::all_reduce_sum(float* data, size_t n) {
  if (size() == 1) return;
  const std::vector<size_t> counts = even_split(n, size());
  reduce_scatter_sum(data, counts);
  all_gather(data, counts);
}

namespace {

class LocalCommunicator final : public Communicator {
 public:
  using Communicator::all_reduce_sum;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  void reduce_scatter_sum(float*, std::span<const size_t>) override {}
  void all_gather(float*, std::span<const size_t>) override {}
  void all_reduce_sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  // One rank has nobody to talk to: a send or recv here is a caller bug.
  void send(const void*, size_t, int dest) override {
    throw std::logic_error("send to rank " + std::to_string(dest) + " in a one-rank group");
  }
  void recv(void*, size_t, int source) override {
    throw std::logic_error("recv from rank " + std::to_string(source) + " in a one-rank group");
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<LocalCommunicator>(); }
  [[noreturn]] void abort(const std::string& prefix, const std::string& reason, int code) override {
    std::fprintf(stderr, "%s: error: %s\n", prefix.c_str(), reason.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace lmforge::dist
