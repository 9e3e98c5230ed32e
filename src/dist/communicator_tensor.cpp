// defines: Communicator's tensor entry points (device memory passed to the transport as it is where the host can
//          address it, staged through host buffers with the device's Backend elsewhere)
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"

namespace lmforge::dist {
namespace {

void check_contiguous(const kernels::Tensor& t, const char* what) {
  if (!t.contiguous())
    throw std::logic_error(std::string("Communicator::") + what + ": a strided view " + t.describe());
}

float* host_f32(const kernels::Tensor& t, const char* what) {
  check_contiguous(t, what);
  return t.f32(what);
}

size_t total(std::span<const size_t> counts) {
  size_t n = 0;
  for (const size_t c : counts) n += c;
  return n;
}

size_t piece_begin(std::span<const size_t> counts, int rank) {
  size_t at = 0;
  for (int q = 0; q < rank; q++) at += counts[(size_t)q];
  return at;
}

void check_pieces(const kernels::Tensor& t, std::span<const size_t> counts, const char* what) {
  if (total(counts) != (size_t)t.numel())
    throw std::logic_error(std::string("Communicator::") + what + ": the pieces cover " +
                           std::to_string(total(counts)) + " elements of " + t.describe());
}

// Elements [begin, begin + n) of a contiguous f32 device view copied between it and host memory.
void to_host(const kernels::Tensor& t, size_t begin, size_t n, float* host) {
  if (n > 0)
    kernels::backend_for(t.device).copy_to_host(host, t.reshaped({t.numel()}).slice0((int64_t)begin, (int64_t)n).data,
                                                n * sizeof(float));
}
void to_device(const kernels::Tensor& t, size_t begin, size_t n, const float* host) {
  if (n > 0)
    kernels::backend_for(t.device).copy_to_device(t.reshaped({t.numel()}).slice0((int64_t)begin, (int64_t)n).data,
                                                  host, n * sizeof(float));
}

size_t tensor_bytes(const kernels::Tensor& t, const char* what) {
  check_contiguous(t, what);
  return (size_t)t.numel() * kernels::dtype_size(t.dtype);
}

}  // namespace

void Communicator::reduce_scatter_sum(const kernels::Tensor& data, std::span<const size_t> counts) {
  const int handle = start_reduce_scatter_sum(data, counts);
  finish_reduce_scatter_sum(data, handle);
}

int Communicator::start_reduce_scatter_sum(const kernels::Tensor& data, std::span<const size_t> counts) {
  if (kernels::host_accessible(data.device))
    return start_reduce_scatter_sum(host_f32(data, "reduce_scatter_sum"), counts);
  check_contiguous(data, "reduce_scatter_sum");
  check_pieces(data, counts, "reduce_scatter_sum");
  // Every piece is read (this rank's piece of every rank's buffer is summed on its owner).
  std::vector<float> host((size_t)data.numel());
  to_host(data, 0, host.size(), host.data());
  const int handle = start_reduce_scatter_sum(host.data(), counts);
  if (handle == -1) {  // finished at once: only this rank's piece changed
    const size_t at = piece_begin(counts, rank());
    to_device(data, at, counts[(size_t)rank()], host.data() + at);
    return -1;
  }
  // The transport keeps the host buffer's address until finish_: the vector moves into the map, its storage stays.
  staged_[handle] = Staged{std::move(host), std::vector<size_t>(counts.begin(), counts.end())};
  return handle;
}

void Communicator::finish_reduce_scatter_sum(const kernels::Tensor& data, int handle) {
  finish_reduce_scatter_sum(handle);
  const auto it = staged_.find(handle);
  if (it == staged_.end()) return;  // host memory, or staged and finished at once
  const Staged& s = it->second;
  if (total(s.counts) != (size_t)data.numel())
    throw std::logic_error("Communicator::finish_reduce_scatter_sum: not the tensor its start was given");
  const size_t at = piece_begin(s.counts, rank());
  to_device(data, at, s.counts[(size_t)rank()], s.host.data() + at);  // only this rank's piece changed
  staged_.erase(it);
}

void Communicator::all_gather(const kernels::Tensor& data, std::span<const size_t> counts) {
  if (kernels::host_accessible(data.device)) return all_gather(host_f32(data, "all_gather"), counts);
  check_contiguous(data, "all_gather");
  check_pieces(data, counts, "all_gather");
  std::vector<float> host((size_t)data.numel());
  const size_t at = piece_begin(counts, rank());
  to_host(data, at, counts[(size_t)rank()], host.data() + at);  // only this rank's piece is read
  all_gather(host.data(), counts);
  to_device(data, 0, host.size(), host.data());
}

void Communicator::all_reduce_sum(const kernels::Tensor& data) {
  if (kernels::host_accessible(data.device))
    return all_reduce_sum(host_f32(data, "all_reduce_sum"), (size_t)data.numel());
  check_contiguous(data, "all_reduce_sum");
  std::vector<float> host((size_t)data.numel());
  to_host(data, 0, host.size(), host.data());
  all_reduce_sum(host.data(), host.size());
  to_device(data, 0, host.size(), host.data());
}

void Communicator::broadcast(const kernels::Tensor& data, int root) {
  const size_t bytes = tensor_bytes(data, "broadcast");
  if (kernels::host_accessible(data.device)) return broadcast(data.data, bytes, root);
  kernels::Backend& backend = kernels::backend_for(data.device);
  std::vector<char> host(bytes);
  if (rank() == root && bytes > 0) backend.copy_to_host(host.data(), data.data, bytes);
  broadcast(host.data(), bytes, root);
  if (rank() != root && bytes > 0) backend.copy_to_device(data.data, host.data(), bytes);
}

void Communicator::send(const kernels::Tensor& data, int dest) {
  const size_t bytes = tensor_bytes(data, "send");
  if (kernels::host_accessible(data.device)) return send(data.data, bytes, dest);
  std::vector<char> host(bytes);
  if (bytes > 0) kernels::backend_for(data.device).copy_to_host(host.data(), data.data, bytes);
  send(host.data(), bytes, dest);
}

void Communicator::recv(const kernels::Tensor& data, int source) {
  const size_t bytes = tensor_bytes(data, "recv");
  if (kernels::host_accessible(data.device)) return recv(data.data, bytes, source);
  std::vector<char> host(bytes);
  recv(host.data(), bytes, source);
  if (bytes > 0) kernels::backend_for(data.device).copy_to_device(data.data, host.data(), bytes);
}

}  // namespace lmforge::dist
