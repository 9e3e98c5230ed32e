// defines: lmforge::dist::Communicator (the collectives training needs: all-reduce, reduce-scatter, all-gather,
//          broadcast, barrier, abort; on host memory and on device tensors), CommStats, even_split(), make_local_communicator(), make_mpi_communicator(),
//          make_gloo_communicator()
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/tcp_store.h"
#include "kernels/tensor.h"

namespace lmforge::dist {

// Bytes this rank handed to the transport, per kind of collective (what a step costs on the wire: a rank's own
// piece, which stays local, is not counted).
struct CommStats {
  uint64_t reduce_scatter_bytes = 0;
  uint64_t all_gather_bytes = 0;
  uint64_t all_reduce_bytes = 0;  // small double all-reduces (losses, norms)
  uint64_t broadcast_bytes = 0;
  uint64_t sent_bytes = 0;  // point to point
  uint64_t total() const {
    return reduce_scatter_bytes + all_gather_bytes + all_reduce_bytes + broadcast_bytes + sent_bytes;
  }
};

// A group of ranks and the collectives between them. Every collective must be called by every rank of the group
// in the same order. Sums are DETERMINISTIC: each element is summed in rank order ((x0 + x1) + x2) + ... on the
// rank that owns it and then copied, so every rank holds bitwise the same result and a run is reproducible
// (MPI_Allreduce may associate differently per element, per rank count or per message size).
//
// Pieces: a buffer of n elements is cut into size() consecutive pieces, counts[r] elements for rank r
// (even_split() gives the usual cut); reduce_scatter/all_gather work in place on the whole buffer.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "local", "mpi", "gloo"

  // Afterwards piece rank() of data holds the rank-ordered sum of every rank's piece rank(); the other pieces are
  // left as they were.
  virtual void reduce_scatter_sum(float* data, std::span<const size_t> counts) = 0;
  // reduce_scatter_sum in two halves, so the exchange can run while the caller computes: start_ returns a handle
  // (data must stay untouched until finish_), progress() lets the transport move data (MPI moves non-blocking
  // messages only inside its calls), finish_ waits and sums in rank order. The result equals reduce_scatter_sum.
  // The defaults do everything in start_.
  virtual int start_reduce_scatter_sum(float* data, std::span<const size_t> counts) {
    reduce_scatter_sum(data, counts);
    return -1;
  }
  virtual void progress() {}
  virtual void finish_reduce_scatter_sum(int handle) { (void)handle; }
  // Afterwards every piece r holds rank r's piece r.
  virtual void all_gather(float* data, std::span<const size_t> counts) = 0;
  // reduce_scatter_sum + all_gather over an even split: every rank holds the same rank-ordered sums.
  void all_reduce_sum(float* data, size_t n);
  // Small reductions (loss sums, squared norms): rank-ordered sums, identical on every rank.
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Point to point (blocking): `bytes` from this rank to `dest`, matched by dest's recv from this rank, in order.
  // Gathering a tensor's pieces on one rank this way keeps every other rank free of receive buffers.
  virtual void send(const void* data, size_t bytes, int dest) = 0;
  virtual void recv(void* data, size_t bytes, int source) = 0;
  // Non-blocking send (pipeline activations, so a stage computes while its output travels): starts sending `bytes`
  // to `dest`, matched in order with send() by dest's recv(), and returns a handle; `data` must stay untouched until
  // send_done(handle) returns true or wait_send(handle) returns. The default sends at once (blocking) and returns -1.
  virtual int isend(const void* data, size_t bytes, int dest) {
    send(data, bytes, dest);
    return -1;
  }
  virtual bool send_done(int handle) { return (void)handle, true; }
  virtual void wait_send(int handle) { (void)handle; }
  virtual void barrier() = 0;

  // ---- the same collectives on device tensors (Marian's and Megatron's communicators take the device's buffers) --
  // Each takes a contiguous view of device memory (f32 for the sums, any dtype for broadcast and point to point) and
  // means exactly what its host counterpart above means. Memory the host can address (the CPU device,
  // kernels::host_accessible) goes to the transport as it is, so results and bytes on the wire are those of the
  // host calls; any other device's memory is staged through host buffers with its Backend's copies (the transports
  // here, MPI and Gloo over TCP, read host memory only): only the pieces a collective reads are copied out and only
  // the pieces it writes copied back, so the device holds bitwise what the host call leaves in host memory.
  void reduce_scatter_sum(const kernels::Tensor& data, std::span<const size_t> counts);
  // start_/finish_ as above; pass finish_ the tensor given to start_ (a staged start copies its result back there).
  int start_reduce_scatter_sum(const kernels::Tensor& data, std::span<const size_t> counts);
  void finish_reduce_scatter_sum(const kernels::Tensor& data, int handle);
  void all_gather(const kernels::Tensor& data, std::span<const size_t> counts);
  // An even split of data's numel, as all_reduce_sum(float*, n).
  void all_reduce_sum(const kernels::Tensor& data);
  void broadcast(const kernels::Tensor& data, int root);
  void send(const kernels::Tensor& data, int dest);
  void recv(const kernels::Tensor& data, int source);

  // The ranks with the same color form a new group, ordered by key (then by rank). Collective over this group.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Prints "<prefix>: error: rank r of n (host): reason" to stderr and ends the whole job with `code` (mpirun then
  // exits non-zero at once, other ranks stuck in a collective included). Never returns.
  [[noreturn]] virtual void abort(const std::string& prefix, const std::string& reason, int code) = 0;

  const CommStats& stats() const { return stats_; }

 protected:
  CommStats stats_;

 private:
  // Host copies of device tensors whose reduce-scatter is in flight (start_ → finish_), by handle.
  struct Staged {
    std::vector<float> host;
    std::vector<size_t> counts;
  };
  std::map<int, Staged> staged_;
};

// n elements cut into `parts` consecutive pieces whose sizes differ by at most one (the first n % parts get one
// more).
std::vector<size_t> even_split(size_t n, int parts);

// One process: every collective is the identity (a sum over one rank).
std::unique_ptr<Communicator> make_local_communicator();
// MPI_COMM_WORLD (MPI must already be initialised, e.g. by an MpiSession, on this thread; MPI_THREAD_FUNNELED).
// Every wait of every collective and transfer (and of split() communicators) is bounded by `timeout`
// (--distributed-timeout-minutes, Megatron's default 10 minutes); past it the call throws an Error naming the
// operation and, for a transfer, the peer's world rank.
std::unique_ptr<Communicator> make_mpi_communicator(std::chrono::milliseconds timeout = std::chrono::minutes(10));

struct GlooOptions {
  Endpoint rendezvous;  // rank 0 listens at its port; every rank connects to it
  int rank = 0, world_size = 1;
  std::chrono::milliseconds timeout{600000};  // bounds the rendezvous and every wait of every collective
  // Who holds the store at `rendezvous` (join_rendezvous, dist/torch_store.h); with a launcher's store, this job's
  // keys go under store_prefix.
  StoreRole store = StoreRole::Own;
  std::string store_prefix{};
};
// The world over Gloo's TCP transport, met at a TCP store rendezvous (communicator_gloo.cpp). Errors (rendezvous
// timeout, duplicate rank, world-size mismatch, Gloo failing to connect) are lmforge::Error.
std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& options);

}  // namespace lmforge::dist
