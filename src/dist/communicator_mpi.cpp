// defines: make_mpi_communicator(): Communicator over an MPI communicator (Open MPI), with rank-ordered sums
//          (training's collectives; MPI itself is initialised by MpiSession, mpi_session.h)
//
// Every collective and point-to-point transfer is started non-blocking and waited for by polling MPI_Test against
// the timeout (--distributed-timeout-minutes), so a rank that stops answering (SIGSTOP, a hung read, a wedged
// node) ends the others with an Error naming the wait instead of hanging them forever; MPI's blocking calls have
// no timeout. The wait spins for its first millisecond (collectives of a training step are short) and then
// sleeps between polls, so a long wait does not hold a core at 100 %.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "dist/communicator.h"
#include "dist/mpi_check.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::dist {
namespace {

// The tag of send/recv: collectives do not use tags, and point-to-point messages between two ranks arrive in order.
constexpr int kPointToPointTag = 7;

int as_int(size_t n, const char* what) {
  if (n > (size_t)INT_MAX)
    throw Error(std::string("MPI ") + what + ": a piece of " + std::to_string(n) +
                " elements exceeds MPI's int counts (use smaller buckets)");
  return (int)n;
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool owned, std::chrono::milliseconds timeout)
      : comm_(comm), owned_(owned), timeout_(timeout) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  using Communicator::all_reduce_sum;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  // Direct exchange (MPI_Alltoallv): rank r receives every rank's piece r into a scratch row per sender and sums
  // the rows in rank order. Each rank sends the n − counts[me] elements that others own: a ring's volume.
  void reduce_scatter_sum(float* data, std::span<const size_t> counts) override {
    if (size_ == 1) return;
    const size_t mine = counts[(size_t)rank_];
    std::vector<int> scounts((size_t)size_), sdispls((size_t)size_), rcounts((size_t)size_), rdispls((size_t)size_);
    size_t offset = 0, my_offset = 0, n = 0;
    for (int r = 0; r < size_; r++) {
      if (r == rank_) my_offset = offset;
      scounts[(size_t)r] = as_int(counts[(size_t)r], "reduce-scatter");
      sdispls[(size_t)r] = as_int(offset, "reduce-scatter");
      rcounts[(size_t)r] = as_int(mine, "reduce-scatter");
      rdispls[(size_t)r] = as_int((size_t)r * mine, "reduce-scatter");
      offset += counts[(size_t)r];
    }
    n = offset;
    scratch_.resize((size_t)size_ * mine);
    MPI_Request request;
    mpi_check(MPI_Ialltoallv(data, scounts.data(), sdispls.data(), MPI_FLOAT, scratch_.data(), rcounts.data(),
                             rdispls.data(), MPI_FLOAT, comm_, &request),
              "reduce-scatter (alltoallv)");
    wait(request, "reduce-scatter", -1);
    float* out = data + my_offset;
    const float* rows = scratch_.data();
    for (size_t i = 0; i < mine; i++) out[i] = rows[i];
    for (int s = 1; s < size_; s++) {
      const float* row = rows + (size_t)s * mine;
      for (size_t i = 0; i < mine; i++) out[i] += row[i];
    }
    stats_.reduce_scatter_bytes += (n - mine) * sizeof(float);
  }

  int start_reduce_scatter_sum(float* data, std::span<const size_t> counts) override {
    if (size_ == 1) return -1;
    auto op = std::make_unique<Pending>();
    op->data = data;
    op->mine = counts[(size_t)rank_];
    op->scounts.resize((size_t)size_), op->sdispls.resize((size_t)size_), op->rcounts.resize((size_t)size_);
    op->rdispls.resize((size_t)size_);
    size_t offset = 0;
    for (int r = 0; r < size_; r++) {
      if (r == rank_) op->my_offset = offset;
      op->scounts[(size_t)r] = as_int(counts[(size_t)r], "reduce-scatter");
      op->sdispls[(size_t)r] = as_int(offset, "reduce-scatter");
      op->rcounts[(size_t)r] = as_int(op->mine, "reduce-scatter");
      op->rdispls[(size_t)r] = as_int((size_t)r * op->mine, "reduce-scatter");
      offset += counts[(size_t)r];
    }
    op->rows.resize((size_t)size_ * op->mine);
    mpi_check(MPI_Ialltoallv(data, op->scounts.data(), op->sdispls.data(), MPI_FLOAT, op->rows.data(),
                             op->rcounts.data(), op->rdispls.data(), MPI_FLOAT, comm_, &op->request),
              "reduce-scatter (ialltoallv)");
    stats_.reduce_scatter_bytes += (offset - op->mine) * sizeof(float);
    pending_.push_back(std::move(op));
    return (int)pending_.size() - 1;
  }

  void progress() override {
    for (auto& op : pending_) {
      if (!op || op->done) continue;
      int flag = 0;
      mpi_check(MPI_Test(&op->request, &flag, MPI_STATUS_IGNORE), "reduce-scatter (test)");
      op->done = flag != 0;
    }
  }

  void finish_reduce_scatter_sum(int handle) override {
    if (handle < 0) return;
    Pending& op = *pending_.at((size_t)handle);
    if (!op.done) wait(op.request, "reduce-scatter", -1);
    float* out = op.data + op.my_offset;
    const float* rows = op.rows.data();
    for (size_t i = 0; i < op.mine; i++) out[i] = rows[i];
    for (int s = 1; s < size_; s++) {
      const float* row = rows + (size_t)s * op.mine;
      for (size_t i = 0; i < op.mine; i++) out[i] += row[i];
    }
    pending_[(size_t)handle].reset();
    while (!pending_.empty() && !pending_.back()) pending_.pop_back();
  }

  void all_gather(float* data, std::span<const size_t> counts) override {
    if (size_ == 1) return;
    std::vector<int> rcounts((size_t)size_), displs((size_t)size_);
    size_t offset = 0;
    for (int r = 0; r < size_; r++) {
      rcounts[(size_t)r] = as_int(counts[(size_t)r], "all-gather");
      displs[(size_t)r] = as_int(offset, "all-gather");
      offset += counts[(size_t)r];
    }
    MPI_Request request;
    mpi_check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, rcounts.data(), displs.data(), MPI_FLOAT,
                              comm_, &request),
              "all-gather");
    wait(request, "all-gather", -1);
    // The volume a bandwidth-optimal (ring) all-gather sends from each rank: everything this rank does not own.
    stats_.all_gather_bytes += (offset - counts[(size_t)rank_]) * sizeof(float);
  }

  void all_reduce_sum(double* data, size_t n) override {
    if (size_ == 1 || n == 0) return;
    std::vector<double> all((size_t)size_ * n);
    MPI_Request request;
    mpi_check(MPI_Iallgather(data, as_int(n, "all-reduce"), MPI_DOUBLE, all.data(), (int)n, MPI_DOUBLE, comm_,
                             &request),
              "all-reduce (allgather)");
    wait(request, "all-reduce", -1);
    for (size_t i = 0; i < n; i++) {
      double sum = all[i];
      for (int r = 1; r < size_; r++) sum += all[(size_t)r * n + i];
      data[i] = sum;
    }
    stats_.all_reduce_bytes += (size_t)(size_ - 1) * n * sizeof(double);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    if (size_ == 1) return;
    for (size_t off = 0; off < bytes;) {
      const int chunk = (int)std::min<size_t>(bytes - off, (size_t)1 << 30);
      MPI_Request request;
      mpi_check(MPI_Ibcast((char*)data + off, chunk, MPI_BYTE, root, comm_, &request), "broadcast");
      wait(request, "broadcast", -1);  // a tree broadcast may wait on any rank
      off += (size_t)chunk;
    }
    if (rank_ == root) stats_.broadcast_bytes += bytes * (size_t)(size_ - 1);
  }

  void send(const void* data, size_t bytes, int dest) override {
    for (size_t off = 0; off < bytes;) {
      const int chunk = (int)std::min<size_t>(bytes - off, (size_t)1 << 30);
      MPI_Request request;
      mpi_check(MPI_Isend((const char*)data + off, chunk, MPI_BYTE, dest, kPointToPointTag, comm_, &request), "send");
      wait(request, "send", dest);
      off += (size_t)chunk;
    }
    stats_.sent_bytes += bytes;
  }

  void recv(void* data, size_t bytes, int source) override {
    for (size_t off = 0; off < bytes;) {
      const int chunk = (int)std::min<size_t>(bytes - off, (size_t)1 << 30);
      MPI_Request request;
      mpi_check(MPI_Irecv((char*)data + off, chunk, MPI_BYTE, source, kPointToPointTag, comm_, &request), "recv");
      wait(request, "recv", source);
      off += (size_t)chunk;
    }
  }

  // One MPI_Isend per GB-sized chunk; the handle is a slot of sends_ (reused once waited for).
  int isend(const void* data, size_t bytes, int dest) override {
    size_t slot = 0;
    while (slot < sends_.size() && !sends_[slot].empty()) slot++;
    if (slot == sends_.size()) sends_.emplace_back();
    std::vector<MPI_Request>& requests = sends_[slot];
    for (size_t off = 0; off < bytes || (bytes == 0 && requests.empty());) {
      const int chunk = (int)std::min<size_t>(bytes - off, (size_t)1 << 30);
      requests.push_back(MPI_REQUEST_NULL);
      mpi_check(MPI_Isend((const char*)data + off, chunk, MPI_BYTE, dest, kPointToPointTag, comm_, &requests.back()),
                "isend");
      off += (size_t)chunk;
      if (chunk == 0) break;
    }
    stats_.sent_bytes += bytes;
    return (int)slot;
  }

  bool send_done(int handle) override {
    if (handle < 0) return true;
    std::vector<MPI_Request>& requests = sends_.at((size_t)handle);
    int flag = 0;
    mpi_check(MPI_Testall((int)requests.size(), requests.data(), &flag, MPI_STATUSES_IGNORE), "isend (test)");
    if (flag) requests.clear();
    return flag != 0;
  }

  void wait_send(int handle) override {
    if (handle < 0) return;
    std::vector<MPI_Request>& requests = sends_.at((size_t)handle);
    for (MPI_Request& r : requests) wait(r, "send", -1);  // bounded by --distributed-timeout-minutes
    requests.clear();
  }

  void barrier() override {
    MPI_Request request;
    mpi_check(MPI_Ibarrier(comm_, &request), "barrier");
    wait(request, "barrier", -1);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    mpi_check(MPI_Comm_split(comm_, color, key, &sub), "comm split");
    return std::make_unique<MpiCommunicator>(sub, true, timeout_);
  }

  [[noreturn]] void abort(const std::string& prefix, const std::string& reason, int code) override {
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    int world_rank = 0, world_size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    std::fprintf(stderr, "%s: error: rank %d of %d (%s): %s\n", prefix.c_str(), world_rank, world_size, host,
                 reason.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Polls `request` until it completes or the timeout passes (then an Error naming `what` and, for a transfer
  // with one peer (`peer` >= 0, a rank of this communicator), that peer's world rank).
  void wait(MPI_Request& request, const char* what, int peer) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (;;) {
      int flag = 0;
      mpi_check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), what);
      if (flag) return;
      const auto waited = Clock::now() - start;
      if (waited >= timeout_) throw Error(timeout_message(what, peer));
      if (waited > std::chrono::milliseconds(1))
        std::this_thread::sleep_for(std::chrono::microseconds(waited > std::chrono::milliseconds(20) ? 200 : 20));
    }
  }

  std::string timeout_message(const char* what, int peer) const {
    MPI_Group group, world;
    MPI_Comm_group(comm_, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> local((size_t)size_), global((size_t)size_);
    for (int r = 0; r < size_; r++) local[(size_t)r] = r;
    MPI_Group_translate_ranks(group, size_, local.data(), world, global.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    std::string who;
    if (peer >= 0) {
      who = "rank " + std::to_string(global[(size_t)peer]);
    } else {
      for (int r = 0; r < size_; r++)
        if (r != rank_) who += (who.empty() ? "" : ", ") + std::to_string(global[(size_t)r]);
      who = (size_ == 2 ? "rank " : "at least one of ranks ") + who;
    }
    return std::string("MPI ") + what + ": nothing from " + who + " within " + minutes_text(timeout_) +
           " (--distributed-timeout-minutes): stopped, hung or overloaded?";
  }

  MPI_Comm comm_;
  bool owned_;
  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
  std::vector<float> scratch_;
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    bool done = false;
    float* data = nullptr;
    size_t mine = 0, my_offset = 0;
    std::vector<int> scounts, sdispls, rcounts, rdispls;
    std::vector<float> rows;  // one row per sender
  };
  std::vector<std::unique_ptr<Pending>> pending_;  // by handle
  std::vector<std::vector<MPI_Request>> sends_;     // isend handles: a free slot is empty
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(std::chrono::milliseconds timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw Error("make_mpi_communicator: MPI is not initialised (create an MpiSession first)");
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, false, timeout);
}

}  // namespace lmforge::dist
