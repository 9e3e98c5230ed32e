// defines: MpiSession: the few MPI operations lmforge needs (init/finalize, rank/size, small int64 messages polled
//          without blocking, broadcast of a byte string, abort), so no other module includes <mpi.h>
//
// The MPI job itself: what `prep` uses to coordinate ranks, and what must exist before training's collectives can
// be made (make_mpi_communicator() in communicator.h, implemented in communicator_mpi.cpp; both report MPI errors
// through mpi_check.h).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lmforge::dist {

// One per process, on the main thread. MPI is initialised with MPI_THREAD_FUNNELED: only the thread that created
// the session may call it (worker threads never touch MPI). The destructor finalizes MPI.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string processor_name() const;

  // Sends a small message (a few int64 values: MPI sends these eagerly, so the call returns at once).
  void send(int dest, int tag, std::span<const int64_t> values);
  // Non-blocking: if a message has arrived (from anyone, any tag), receives it and returns true.
  bool poll(int& source, int& tag, std::vector<int64_t>& values);
  // Rank `root`'s `bytes` to every rank (collective; every rank must call it).
  void broadcast(std::string& bytes, int root = 0);
  // Ends every process of the job with `code` (mpirun then exits non-zero); never returns.
  [[noreturn]] void abort(int code);

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace lmforge::dist
