// defines: make_gloo_communicator(): Communicator over Gloo's TCP transport, ranks met at a TcpStore rendezvous
//
// Gloo moves the bytes (its pairs and unbound buffers: one TCP connection per pair of ranks, driven by Gloo's own
// event-loop thread, so an exchange started by start_reduce_scatter_sum progresses while the caller computes).
// The reductions are lmforge's, as in communicator_mpi.cpp: every rank receives the rows it owns from each sender
// and sums them in rank order, so a Gloo run's losses equal the MPI run's bit for bit (Gloo's own allreduce
// algorithms associate differently per algorithm and world size).
//
// Every wait is bounded by the timeout (--distributed-timeout-minutes). A peer whose process died closes its TCP
// connections, which Gloo reports to the waiting ranks at once; a stopped peer shows as a timeout. Either way the
// method throws an Error naming the operation, the peers and the reason, and the caller ends the process with
// abort() — the other ranks then see this one's connections close, and end in turn with their own reason.
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>

#include "dist/communicator.h"
#include "dist/tcp_store.h"
#include "dist/torch_store.h"
#include "util/error.h"
#include "util/strings.h"

namespace lmforge::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Unbound-buffer slots: collectives number themselves in call order (the same on every rank); point-to-point
// messages count per peer and direction, so a send and its recv meet whatever collectives run in between.
constexpr uint64_t kCollectiveSlot = uint64_t(1) << 56;
constexpr uint64_t kPointToPointSlot = uint64_t(2) << 56;

// Gloo's rendezvous speaks to any Store: this one forwards to the TCP store, under the communicator's timeout.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(RendezvousClient& client) : client_(client) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    client_.set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = client_.get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { client_.wait(keys, client_.timeout()); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override { client_.wait(keys, timeout); }

 private:
  RendezvousClient& client_;
};

// What every communicator of a process (the world and its splits) shares.
struct Job {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::unique_ptr<RendezvousClient> client;
  std::unique_ptr<StoreAdapter> store;
  std::shared_ptr<gloo::transport::Device> device;
  int world_rank = 0, world_size = 1;
  milliseconds timeout{600000};
};

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); i++) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

class GlooCommunicator final : public Communicator {
 public:
  // `members[i]`: the world rank of this group's rank i (for messages).
  GlooCommunicator(std::shared_ptr<Job> job, std::shared_ptr<gloo::rendezvous::Context> context,
                   std::vector<int> members, std::string prefix)
      : job_(std::move(job)), context_(std::move(context)), members_(std::move(members)), prefix_(std::move(prefix)),
        send_seq_((size_t)context_->size), recv_seq_((size_t)context_->size) {}
  using Communicator::all_reduce_sum;

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string name() const override { return "gloo"; }

  void reduce_scatter_sum(float* data, std::span<const size_t> counts) override {
    if (size() == 1) return;
    finish_reduce_scatter_sum(start_reduce_scatter_sum(data, counts));
  }

  // Direct exchange, as the MPI communicator's alltoallv: piece r goes to rank r, rank r keeps one row per sender.
  int start_reduce_scatter_sum(float* data, std::span<const size_t> counts) override {
    if (size() == 1) return -1;
    auto op = std::make_unique<Pending>();
    op->data = data;
    op->mine = counts[(size_t)rank()];
    size_t offset = 0;
    for (int r = 0; r < size(); r++) {
      if (r == rank()) op->my_offset = offset;
      offset += counts[(size_t)r];
    }
    op->rows.resize((size_t)size() * op->mine);
    std::copy(data + op->my_offset, data + op->my_offset + op->mine, op->rows.data() + (size_t)rank() * op->mine);
    const uint64_t slot = next_collective_slot();
    op->ex = std::make_unique<Exchange>(*this, "reduce-scatter");
    if (offset > 0) op->ex->send_buffer(data, offset * sizeof(float));
    if (!op->rows.empty()) op->ex->recv_buffer(op->rows.data(), op->rows.size() * sizeof(float));
    size_t at = 0;
    for (int r = 0; r < size(); r++) {
      const size_t n = counts[(size_t)r];
      if (r != rank() && n > 0) op->ex->send(r, slot, at * sizeof(float), n * sizeof(float));
      if (r != rank() && op->mine > 0)
        op->ex->recv(r, slot, (size_t)r * op->mine * sizeof(float), op->mine * sizeof(float));
      at += n;
    }
    stats_.reduce_scatter_bytes += (offset - op->mine) * sizeof(float);
    pending_.push_back(std::move(op));
    return (int)pending_.size() - 1;
  }

  void finish_reduce_scatter_sum(int handle) override {
    if (handle < 0) return;
    Pending& op = *pending_.at((size_t)handle);
    op.ex->wait();
    float* out = op.data + op.my_offset;
    const float* rows = op.rows.data();
    for (size_t i = 0; i < op.mine; i++) out[i] = rows[i];
    for (int s = 1; s < size(); s++) {
      const float* row = rows + (size_t)s * op.mine;
      for (size_t i = 0; i < op.mine; i++) out[i] += row[i];
    }
    pending_[(size_t)handle].reset();
    while (!pending_.empty() && !pending_.back()) pending_.pop_back();
  }

  void all_gather(float* data, std::span<const size_t> counts) override {
    if (size() == 1) return;
    std::vector<size_t> offsets((size_t)size());
    size_t n = 0;
    for (int r = 0; r < size(); r++) offsets[(size_t)r] = n, n += counts[(size_t)r];
    if (n == 0) return;
    const size_t mine = counts[(size_t)rank()];
    Exchange ex(*this, "all-gather");
    ex.send_buffer(data, n * sizeof(float));
    ex.recv_buffer(data, n * sizeof(float));
    const uint64_t slot = next_collective_slot();
    for (int r = 0; r < size(); r++) {
      if (r == rank()) continue;
      if (mine > 0) ex.send(r, slot, offsets[(size_t)rank()] * sizeof(float), mine * sizeof(float));
      if (counts[(size_t)r] > 0)
        ex.recv(r, slot, offsets[(size_t)r] * sizeof(float), counts[(size_t)r] * sizeof(float));
    }
    ex.wait();
    // Counted as the MPI communicator counts it (a ring's volume), so the per-step figures compare.
    stats_.all_gather_bytes += (n - mine) * sizeof(float);
  }

  void all_reduce_sum(double* data, size_t n) override {
    if (size() == 1 || n == 0) return;
    std::vector<double> all((size_t)size() * n);
    gather_all(data, n * sizeof(double), all.data(), "all-reduce");
    for (size_t i = 0; i < n; i++) {
      double sum = all[i];
      for (int r = 1; r < size(); r++) sum += all[(size_t)r * n + i];
      data[i] = sum;
    }
    stats_.all_reduce_bytes += (size_t)(size() - 1) * n * sizeof(double);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    if (size() == 1 || bytes == 0) return;
    Exchange ex(*this, "broadcast");
    const uint64_t slot = next_collective_slot();
    if (rank() == root) {
      ex.send_buffer(data, bytes);
      for (int r = 0; r < size(); r++)
        if (r != root) ex.send(r, slot, 0, bytes);
      stats_.broadcast_bytes += bytes * (size_t)(size() - 1);
    } else {
      ex.recv_buffer(data, bytes);
      ex.recv(root, slot, 0, bytes);
    }
    ex.wait();
  }

  // An empty message is no message on either side (Gloo refuses zero-byte operations).
  void send(const void* data, size_t bytes, int dest) override {
    if (bytes == 0) return;
    Exchange ex(*this, "send");
    ex.send_buffer(const_cast<void*>(data), bytes);
    ex.send(dest, kPointToPointSlot | send_seq_.at((size_t)dest)++, 0, bytes);
    ex.wait();
    stats_.sent_bytes += bytes;
  }

  void recv(void* data, size_t bytes, int source) override {
    if (bytes == 0) return;
    Exchange ex(*this, "recv");
    ex.recv_buffer(data, bytes);
    ex.recv(source, kPointToPointSlot | recv_seq_.at((size_t)source)++, 0, bytes);
    ex.wait();
  }

  // Gloo's unbound-buffer send is asynchronous already: the Exchange is kept until wait_send. Gloo has no test
  // for a send, so send_done only reports sends already waited for.
  int isend(const void* data, size_t bytes, int dest) override {
    if (bytes == 0) return -1;
    size_t slot = 0;
    while (slot < isends_.size() && isends_[slot]) slot++;
    if (slot == isends_.size()) isends_.emplace_back();
    isends_[slot] = std::make_unique<Exchange>(*this, "send");
    isends_[slot]->send_buffer(const_cast<void*>(data), bytes);
    isends_[slot]->send(dest, kPointToPointSlot | send_seq_.at((size_t)dest)++, 0, bytes);
    stats_.sent_bytes += bytes;
    return (int)slot;
  }
  bool send_done(int handle) override { return handle < 0 || !isends_.at((size_t)handle); }
  void wait_send(int handle) override {
    if (handle < 0 || !isends_.at((size_t)handle)) return;
    isends_[(size_t)handle]->wait();
    isends_[(size_t)handle].reset();
  }

  void barrier() override {
    char token = 1;
    std::vector<char> all((size_t)size());
    if (size() > 1) gather_all(&token, 1, all.data(), "barrier");
  }

  // As MPI_Comm_split: everyone learns everyone's (color, key); each new group meets at the store under its own
  // prefix and Gloo connects its ranks afresh.
  std::unique_ptr<Communicator> split(int color, int key) override {
    const int64_t mine[2] = {color, key};
    std::vector<int64_t> all((size_t)size() * 2);
    if (size() > 1)
      gather_all(mine, sizeof mine, all.data(), "split");
    else
      std::copy(mine, mine + 2, all.begin());
    std::vector<int> group;
    for (int r = 0; r < size(); r++)
      if (all[(size_t)r * 2] == color) group.push_back(r);
    std::stable_sort(group.begin(), group.end(),
                     [&](int a, int b) { return all[(size_t)a * 2 + 1] < all[(size_t)b * 2 + 1]; });
    const int new_rank = (int)(std::find(group.begin(), group.end(), rank()) - group.begin());
    std::vector<int> members;
    for (int r : group) members.push_back(members_[(size_t)r]);
    const std::string prefix = prefix_ + "/split" + std::to_string(splits_++) + "/color" + std::to_string(color);
    auto context = std::make_shared<gloo::rendezvous::Context>(new_rank, (int)group.size());
    context->setTimeout(job_->timeout);
    try {
      gloo::rendezvous::PrefixStore store(prefix, *job_->store);
      context->connectFullMesh(store, job_->device);
    } catch (const std::exception& e) {
      throw Error("split (color " + std::to_string(color) + "): connecting the new group failed: " + e.what());
    }
    return std::make_unique<GlooCommunicator>(job_, std::move(context), std::move(members), prefix);
  }

  [[noreturn]] void abort(const std::string& prefix, const std::string& reason, int code) override {
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "%s: error: rank %d of %d (%s): %s\n", prefix.c_str(), job_->world_rank, job_->world_size,
                 host, reason.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    // No MPI_Abort to end the others: exiting closes this rank's connections, which every peer's next (or current)
    // wait reports at once.
    std::_Exit(code);
  }

 private:
  // The sends and receives of one operation, waited for together under the timeout. Each message has its own
  // unbound buffer over its bytes, so a failed wait knows which peers it was still waiting for. Errors name the
  // operation, those peers and whether the time ran out or a connection closed.
  class Exchange {
   public:
    Exchange(GlooCommunicator& comm, const char* what) : comm_(comm), what_(what) {}
    ~Exchange() {
      // Operations still pending only when wait() threw, and the process is about to end: Gloo's loop thread may
      // still write into these buffers, so they are left to the exit rather than freed under it.
      for (auto& op : recvs_)
        if (op.buffer) (void)op.buffer.release();
      for (auto& op : sends_)
        if (op.buffer) (void)op.buffer.release();
    }
    // Where the offsets of send() and recv() count from.
    void send_buffer(void* p, size_t) { send_base_ = static_cast<char*>(p); }
    void recv_buffer(void* p, size_t) { recv_base_ = static_cast<char*>(p); }
    void send(int peer, uint64_t slot, size_t offset, size_t bytes) {
      guard([&] {
        sends_.push_back({peer, comm_.context_->createUnboundBuffer(send_base_ + offset, bytes)});
        sends_.back().buffer->send(peer, slot);
      }, {peer});
    }
    void recv(int peer, uint64_t slot, size_t offset, size_t bytes) {
      guard([&] {
        recvs_.push_back({peer, comm_.context_->createUnboundBuffer(recv_base_ + offset, bytes)});
        recvs_.back().buffer->recv(peer, slot);
      }, {peer});
    }
    void wait() {
      const auto deadline = deadline_ = Clock::now() + comm_.job_->timeout;
      for (size_t i = 0; i < recvs_.size(); i++) {
        std::vector<int> waiting;
        for (size_t j = i; j < recvs_.size(); j++) waiting.push_back(recvs_[j].peer);
        guard([&] {
          if (!recvs_[i].buffer->waitRecv(left(deadline))) throw gloo::IoException("receive aborted");
        }, waiting);
        recvs_[i].buffer.reset();
      }
      for (auto& op : sends_) {
        guard([&] {
          if (!op.buffer->waitSend(left(deadline))) throw gloo::IoException("send aborted");
        }, {op.peer});
        op.buffer.reset();
      }
    }

   private:
    struct Op {
      int peer;
      std::unique_ptr<gloo::transport::UnboundBuffer> buffer;  // null once complete
    };
    static milliseconds left(Clock::time_point deadline) {
      return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    }
    template <class F>
    void guard(F f, const std::vector<int>& peers) {
      try {
        f();
      } catch (const std::exception& e) {
        std::vector<int> world;
        for (int p : peers) world.push_back(comm_.members_[(size_t)p]);
        const bool timed_out = Clock::now() >= deadline_ - milliseconds(50);
        std::string who = world.empty() ? "a peer" : rank_list(world);
        throw Error(std::string(what_) + ": " +
                    (timed_out ? "nothing from " + who + " within " + minutes_text(comm_.job_->timeout) +
                                     " (--distributed-timeout-minutes): stopped, hung or overloaded?"
                               : "lost the connection to " + who + " (its process ended?)") +
                    " [gloo: " + e.what() + "]");
      }
    }

    GlooCommunicator& comm_;
    const char* what_;
    char* send_base_ = nullptr;
    char* recv_base_ = nullptr;
    std::vector<Op> sends_, recvs_;
    Clock::time_point deadline_ = Clock::time_point::max();  // set by wait()
  };

  std::vector<std::unique_ptr<Exchange>> isends_;  // isend handles (null: free)

  uint64_t next_collective_slot() { return kCollectiveSlot | collectives_++; }

  // Every rank's `bytes` (this rank's are `mine`) into all[rank * bytes].
  void gather_all(const void* mine, size_t bytes, void* all, const char* what) {
    char* out = static_cast<char*>(all);
    std::memcpy(out + (size_t)rank() * bytes, mine, bytes);
    Exchange ex(*this, what);
    ex.send_buffer(out, (size_t)size() * bytes);
    ex.recv_buffer(out, (size_t)size() * bytes);
    const uint64_t slot = next_collective_slot();
    for (int r = 0; r < size(); r++) {
      if (r == rank()) continue;
      ex.send(r, slot, (size_t)rank() * bytes, bytes);
      ex.recv(r, slot, (size_t)r * bytes, bytes);
    }
    ex.wait();
  }

  struct Pending {
    float* data = nullptr;
    size_t mine = 0, my_offset = 0;
    std::vector<float> rows;  // one row per sender
    std::unique_ptr<Exchange> ex;
  };

  std::shared_ptr<Job> job_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::vector<int> members_;
  std::string prefix_;
  uint64_t collectives_ = 0;
  int splits_ = 0;
  std::vector<uint64_t> send_seq_, recv_seq_;
  std::vector<std::unique_ptr<Pending>> pending_;  // by handle
};

// Gloo's event-loop thread (one per transport device) checks every incoming message against the receive posted for
// it and throws gloo::EnforceNotMet when the message is larger: ranks running collectives of different shapes
// (their settings or data differ; the trainer compares the settings first, train/settings_agreement.h). No code
// of lmforge runs on that thread to catch it, and the default terminate handler aborts (exit 134 and a core, no
// reason a user can act on). A Gloo exception that reaches std::terminate therefore ends the process the way the
// communicator's own errors do: a message naming host, process and reason, exit 1 (the peers then see the
// connections close and end with their own reason). Any other exception keeps the default (a message and abort).
[[noreturn]] void end_on_transport_exception() noexcept {
  std::string what, meaning;
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const gloo::EnforceNotMet& g) {  // Gloo's failed checks (not a gloo::Exception)
      what = g.what();
      meaning = "a message did not fit the receive posted for it, so the ranks are running different collectives "
                "(do their settings or data differ?)";
    } catch (const gloo::Exception& g) {
      what = g.what();
      meaning = "its connection to a peer failed";
    } catch (...) {
    }
  }
  if (meaning.empty()) {
#ifdef __GLIBCXX__
    __gnu_cxx::__verbose_terminate_handler();  // the default: names the exception and aborts
#endif
    std::abort();
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "lmforge: error: process %d (%s): the Gloo transport failed on its event-loop thread: %s "
               "[gloo: %s]\n", (int)::getpid(), host, meaning.c_str(), what.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(1);
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const GlooOptions& options) {
  std::set_terminate(end_on_transport_exception);
  // Gloo writes to its sockets from its loop thread without MSG_NOSIGNAL: a peer that died while this rank was
  // sending would end this process silently with SIGPIPE. Ignored, the write fails with EPIPE, Gloo fails the
  // pending operation, and this rank ends with its rank and the reason like any other lost connection.
  std::signal(SIGPIPE, SIG_IGN);
  auto job = std::make_shared<Job>();
  job->world_rank = options.rank;
  job->world_size = options.world_size;
  job->timeout = options.timeout;
  // Rank 0 serves lmforge's store in this process and also talks to it as a client, like every other rank; or every
  // rank joins the store of the PyTorch launcher that started it.
  Rendezvous meeting = join_rendezvous(
      {options.rendezvous, options.store, options.store_prefix, options.rank, options.world_size, options.timeout});
  job->server = std::move(meeting.server);
  job->client = std::move(meeting.client);
  job->client->wait_for_all_ranks();
  job->store = std::make_unique<StoreAdapter>(*job->client);
  gloo::transport::tcp::attr attr;
  // Gloo listens on, and tells the peers, the address of the interface that reaches rank 0 (the rendezvous
  // connection's own end), unless GLOO_SOCKET_IFNAME names an interface as for PyTorch's Gloo backend.
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  if (iface && *iface)
    attr.iface = iface;
  else
    attr.hostname = job->client->local_address();
  try {
    job->device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw Error("cannot open Gloo's TCP transport on " + (attr.iface.empty() ? attr.hostname : attr.iface) + ": " +
                e.what());
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
  context->setTimeout(options.timeout);
  try {
    context->connectFullMesh(*job->store, job->device);
  } catch (const std::exception& e) {
    throw Error(std::string("connecting the ranks over Gloo failed: ") + e.what());
  }
  std::vector<int> members((size_t)options.world_size);
  std::iota(members.begin(), members.end(), 0);
  return std::make_unique<GlooCommunicator>(std::move(job), std::move(context), std::move(members), "world");
}

}  // namespace lmforge::dist
