// defines: RendezvousClient (what the ranks' rendezvous needs of a store), StoreRole, PortInUse, TcpStoreServer,
//          TcpStoreClient (the small key-value store a job's ranks meet at, as PyTorch's TCPStore: rank 0 listens,
//          every rank connects, keys are set once and waited for with a timeout), kStoreBanner, Endpoint,
//          parse_tcp_init_method()
//
// Debian's Gloo offers file, hash and Redis stores but no TCP one; this store is only the rendezvous (who is
// where), the collectives themselves run over Gloo's TCP transport (communicator_gloo.cpp).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"

namespace lmforge::dist {

struct Endpoint {
  // Declared constructors: as a plain aggregate inside RankInfo{} it trips GCC 12's -Wmaybe-uninitialized.
  Endpoint() {}
  Endpoint(std::string h, int p) : host(std::move(h)), port(p) {}
  std::string host;
  int port = 0;
  std::string str() const { return host + ":" + std::to_string(port); }
};

// Who holds the store a start's ranks meet at (join_rendezvous, dist/torch_store.h): lmforge's rank 0 (Own), the
// PyTorch launcher that started the ranks (Launcher: TORCHELASTIC_USE_AGENT_STORE=True), or whoever answers at the
// address (Detect: torch launchers' variables without TORCHELASTIC_USE_AGENT_STORE).
enum class StoreRole { Own, Launcher, Detect };

// "tcp://HOST:PORT" (fairseq's --distributed-init-method; HOST may be a name, an IPv4 address or [IPv6]) → Endpoint.
// Anything else is an Error saying what is accepted.
Endpoint parse_tcp_init_method(const std::string& url);

// One rank's connection to the store its job meets at: lmforge's own (TcpStoreClient) or the one a PyTorch launcher
// holds (TorchStoreClient, dist/torch_store.h). Every call is bounded by timeout(); errors are lmforge::Error naming
// the store's address and the reason.
class RendezvousClient {
 public:
  virtual ~RendezvousClient() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits (up to timeout()) for the key to be set.
  virtual std::string get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Waits until every rank of the world has joined; refuses a duplicate rank or a different world size, and the
  // error of a timeout lists the ranks that did not join.
  virtual void wait_for_all_ranks() = 0;
  // The address of this end of the connection: the interface that routes to the store, which the peers can reach.
  virtual std::string local_address() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
};

// The 4 bytes lmforge's store server sends on every connection before anything else: a client knows it reached an
// lmforge rank 0 (and not, say, a PyTorch launcher's store, which never speaks first).
inline constexpr char kStoreBanner[] = "LMF1";

// Rank 0's side: accepts one connection per rank, checks each rank's hello (rank below the world size, the same
// world size as the server's, no rank twice) and answers set/get/wait requests. A bad hello is fatal for the whole
// job: the server remembers the reason and every waiting or later request of any rank fails with it, so rank 0
// and the well-configured ranks stop at once instead of waiting for a rank that will never come.
// TcpStoreServer's error when another process holds the port (a PyTorch launcher's store may be the holder).
class PortInUse : public Error {
 public:
  using Error::Error;
};

class TcpStoreServer {
 public:
  // Listens on every interface at `port` (0: any free port, see port()); PortInUse when the port is taken.
  TcpStoreServer(int port, int world_size);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);
  std::string hello(int fd, int& rank);

  int listen_fd_ = -1, port_ = 0, world_size_ = 0;
  int wake_[2] = {-1, -1};  // written by the destructor to end accept_loop's poll
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  std::map<int, std::string> ranks_;  // connected rank → peer address
  std::string fatal_;                 // a bad hello's reason, reported to everyone
  bool stopping_ = false;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

// One rank's connection. Every call is bounded by `timeout`; errors (timeout, lost server, a fatal reason from the
// server) are lmforge::Error naming the store's address and the reason.
class TcpStoreClient final : public RendezvousClient {
 public:
  // Connects to `server` (retrying while rank 0 is not yet listening, up to `timeout`) and says hello.
  TcpStoreClient(const Endpoint& server, int rank, int world_size, std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::string& value) override;
  // Waits for the key to be set.
  std::string get(const std::string& key) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  // Waits until every rank of the world has said hello (the server checked each hello); the error of a timeout
  // lists the ranks that did not.
  void wait_for_all_ranks() override;

  std::string local_address() const override { return local_address_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const Endpoint& server() const { return server_; }

 private:
  std::string request(const std::string& message, std::chrono::milliseconds timeout);

  Endpoint server_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string local_address_;
  std::mutex mutex_;
};

}  // namespace lmforge::dist
