// defines: StoreProtocol, probe_store() (what answers at an address: lmforge's store, PyTorch's c10d TCPStore as
//          torch 1.x or torch 2.x speaks it, or nothing), TorchStoreClient (a rank's connection to the TCPStore a
//          PyTorch launcher holds), RendezvousOptions, Rendezvous, join_rendezvous() (the store a start asks for)
//
// torch.distributed.launch and torchrun (static rendezvous: --master_addr/--master_port) hold MASTER_PORT
// themselves: their agent serves a c10d TCPStore there and tells the workers so with TORCHELASTIC_USE_AGENT_STORE=True.
// lmforge's rank 0 then cannot listen on that port; every rank joins the agent's store as a client instead and the
// ranks meet there exactly as they would at lmforge's own store (keys under a prefix of their own).
//
// PyTorch's wire protocol (torch/csrc/distributed/c10d/TCPStore.cpp, TCPStoreBackend.cpp, TCPStoreLibUvBackend.cpp):
// a request is one query-type byte, then its arguments; a string or byte vector is a u64 length and the bytes, a
// count is a u64, an ADD amount an i64, all little-endian (the machine's order). Answers: GET a byte vector, ADD the
// new i64, CHECK one byte (0 ready, 1 not ready), GETNUMKEYS an i64; SET has no answer.
//   torch 1.x:  SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6
//   torch 2.x:  VALIDATE 0 (then the u32 0x3C85F7CE; sent once, first, on every connection: a 2.x server ignores or
//               closes a connection that does not), SET 1, COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7
// Waiting polls CHECK rather than using WAIT, so a timed-out wait leaves nothing pending on the server (torch 1.x has
// no CANCEL_WAIT) and the error can name the keys still missing.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/tcp_store.h"

namespace lmforge::dist {

enum class StoreProtocol {
  Nothing,  // no one listens (connection refused, or no connection within the time given)
  Unknown,  // something listens but answers neither as lmforge's store nor as PyTorch's TCPStore
  Lmforge,  // lmforge's own store (it sends kStoreBanner first)
  Torch1,   // PyTorch 1.x TCPStore
  Torch2,   // PyTorch 2.x TCPStore (validation first)
};
std::string to_string(StoreProtocol p);

// One look at `at`. The probes are messages every kind of server handles without harm: first torch 2.x's
// validation followed by GETNUMKEYS (a torch 1.x server reads it as a SET of an impossibly long key and closes the
// connection at once; lmforge's store sends its banner and drops it), then, on a new connection, torch 1.x's
// GETNUMKEYS. Each answer is awaited at most `answer_within`.
StoreProtocol probe_store(const Endpoint& at, std::chrono::milliseconds answer_within);

class TorchStoreClient final : public RendezvousClient {
 public:
  // Connects (retrying while nothing listens yet, up to `timeout`), validating first under torch 2.x. Keys are
  // stored under `key_prefix`.
  TorchStoreClient(const Endpoint& server, StoreProtocol protocol, std::string key_prefix, int rank, int world_size,
                   std::chrono::milliseconds timeout);
  ~TorchStoreClient() override;
  TorchStoreClient(const TorchStoreClient&) = delete;
  TorchStoreClient& operator=(const TorchStoreClient&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  // Claims the rank (a second process claiming it is refused), publishes the world size, waits for every rank and
  // refuses a rank whose world size differs.
  void wait_for_all_ranks() override;
  std::string local_address() const override { return local_address_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  int64_t add(const std::string& key, int64_t amount);
  bool check(const std::vector<std::string>& keys);

 private:
  // Sends a request (the protocol's query byte for `op`, then `args`) and reads `answer_bytes` of fixed answer
  // (0: none); a GET's vector is read by get_raw.
  std::string call(int op, const std::string& args, size_t answer_bytes);
  std::string get_raw(const std::string& full_key);
  bool check_raw(const std::vector<std::string>& full_keys);
  void wait_raw(const std::vector<std::string>& full_keys, std::chrono::milliseconds timeout, const std::string& what);
  [[noreturn]] void lost(const std::string& doing) const;

  Endpoint server_;
  StoreProtocol protocol_;
  std::string prefix_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::string local_address_;
  std::mutex mutex_;
};

// How a start's ranks meet (RankInfo::store, GlooOptions::store).
struct RendezvousOptions {
  Endpoint endpoint;
  StoreRole role = StoreRole::Own;
  std::string key_prefix;  // for a launcher's store: this job's keys (torchelastic's run id and restart count)
  int rank = 0, world_size = 1;
  std::chrono::milliseconds timeout{600000};
};

struct Rendezvous {
  std::unique_ptr<TcpStoreServer> server;  // rank 0 of a job meeting at lmforge's own store
  std::unique_ptr<RendezvousClient> client;
};

// Own: rank 0 serves lmforge's store, every rank connects to it. Launcher: every rank joins the PyTorch store at the
// endpoint. Detect (a RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT start without TORCHELASTIC_USE_AGENT_STORE): rank 0
// listens unless the port is held by a PyTorch store, which every rank then joins; the other ranks join whatever
// answers there.
Rendezvous join_rendezvous(const RendezvousOptions& options);

}  // namespace lmforge::dist
