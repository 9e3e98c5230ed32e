// defines: probe_store(), TorchStoreClient, join_rendezvous()
#include "dist/torch_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace lmforge::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The operations used, as indices into the two numberings (torch_store.h).
enum Op { kSet, kGet, kAdd, kCheck, kGetNumKeys };
constexpr uint8_t kTorch1Codes[] = {0, 2, 3, 4, 6};
constexpr uint8_t kTorch2Codes[] = {1, 3, 4, 5, 7};
constexpr uint8_t kValidate = 0;
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
// How much longer than the rendezvous timeout a single answer may take before the store counts as gone.
constexpr milliseconds kTorchAnswerMargin{5000};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}
std::string validation() {
  std::string v(1, (char)kValidate);
  const uint32_t magic = kValidationMagic;
  v.append(reinterpret_cast<const char*>(&magic), 4);
  return v;
}

long long left_ms(Clock::time_point deadline) {
  return std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
}

// A connection to `at` before `deadline`, or -1 with `why` set (refused, unreachable, timed out, unresolvable).
int connect_to(const Endpoint& at, Clock::time_point deadline, std::string& why) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int gai = ::getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &res);
  if (gai != 0) {
    why = "cannot resolve " + at.host + ": " + ::gai_strerror(gai);
    return -1;
  }
  int out = -1;
  for (addrinfo* a = res; a && out < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    int err = rc == 0 ? 0 : errno;
    if (rc != 0 && err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, (int)std::clamp<long long>(left_ms(deadline), 1, 2000)) == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      out = fd;
    } else {
      why = std::strerror(err);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  return out;
}

bool send_all(int fd, const std::string& bytes) {
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t put = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    off += (size_t)put;
  }
  return true;
}

enum class ReadResult { Ok, Closed, TimedOut };

// Up to `n` bytes into `out` (appended); Ok once n arrived.
ReadResult read_bytes(int fd, std::string& out, size_t n, Clock::time_point deadline) {
  char buf[256];
  while (n > 0) {
    const long long left = left_ms(deadline);
    if (left <= 0) return ReadResult::TimedOut;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, (int)std::min<long long>(left, 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t got = ::recv(fd, buf, std::min(n, sizeof buf), 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) return ReadResult::Closed;
    out.append(buf, (size_t)got);
    n -= (size_t)got;
  }
  return ReadResult::Ok;
}

std::string address_of_self(int fd) {
  sockaddr_storage self{};
  socklen_t len = sizeof self;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len);
  char host[INET6_ADDRSTRLEN] = "?";
  if (self.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&self)->sin_addr, host, sizeof host);
  else if (self.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr, host, sizeof host);
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0) h = h.substr(7);
  return h;
}

// One probe connection: sends `request`, and tells from the first bytes back what answered (`expect` when 8 bytes,
// a GETNUMKEYS count, arrive).
StoreProtocol probe_with(const Endpoint& at, const std::string& request, StoreProtocol expect, milliseconds within) {
  std::string why;
  const int fd = connect_to(at, Clock::now() + within, why);
  if (fd < 0) return StoreProtocol::Nothing;
  StoreProtocol out = StoreProtocol::Unknown;
  if (send_all(fd, request)) {
    std::string answer;
    const auto deadline = Clock::now() + within;
    read_bytes(fd, answer, 4, deadline);
    if (answer.size() == 4 && std::memcmp(answer.data(), kStoreBanner, 4) == 0) {
      out = StoreProtocol::Lmforge;
    } else if (answer.size() == 4 && read_bytes(fd, answer, 4, deadline) == ReadResult::Ok) {
      int64_t keys;
      std::memcpy(&keys, answer.data(), 8);
      if (keys >= 0) out = expect;
    }
  }
  ::close(fd);
  return out;
}

std::string duration_text(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", (double)d.count() / 1000.0);
  return buf;
}

}  // namespace

std::string to_string(StoreProtocol p) {
  switch (p) {
    case StoreProtocol::Nothing: return "nothing listening";
    case StoreProtocol::Unknown: return "an unknown service";
    case StoreProtocol::Lmforge: return "lmforge's store";
    case StoreProtocol::Torch1: return "PyTorch 1.x's TCPStore";
    case StoreProtocol::Torch2: return "PyTorch 2.x's TCPStore";
  }
  return "?";
}

StoreProtocol probe_store(const Endpoint& at, milliseconds answer_within) {
  // torch 2.x first: validation, GETNUMKEYS, and three more GETNUMKEYS bytes, so that a torch 1.x server reads a
  // complete SET header whose key length (bytes 1-8, about 5e17) it cannot allocate, and closes the connection
  // instead of waiting for the rest of a message while its single thread serves no one else.
  std::string torch2 = validation();
  torch2.append(4, (char)kTorch2Codes[kGetNumKeys]);
  const StoreProtocol first = probe_with(at, torch2, StoreProtocol::Torch2, answer_within);
  if (first != StoreProtocol::Unknown) return first;
  const std::string torch1(1, (char)kTorch1Codes[kGetNumKeys]);
  return probe_with(at, torch1, StoreProtocol::Torch1, answer_within);
}

// ---- client --------------------------------------------------------------------------------------------------------

TorchStoreClient::TorchStoreClient(const Endpoint& server, StoreProtocol protocol, std::string key_prefix, int rank,
                                   int world_size, milliseconds timeout)
    : server_(server), protocol_(protocol), prefix_(std::move(key_prefix)), rank_(rank), world_size_(world_size),
      timeout_(timeout) {
  if (protocol != StoreProtocol::Torch1 && protocol != StoreProtocol::Torch2)
    throw Error("internal: TorchStoreClient for " + to_string(protocol));
  const auto deadline = Clock::now() + timeout;
  std::string why = "no attempt";
  while ((fd_ = connect_to(server, deadline, why)) < 0) {
    if (Clock::now() >= deadline)
      throw Error("the launcher's store at " + server.str() + " did not accept a connection within " +
                  duration_text(timeout) + " (" + why + ")");
    std::this_thread::sleep_for(milliseconds(100));
  }
  local_address_ = address_of_self(fd_);
  if (protocol == StoreProtocol::Torch2 && !send_all(fd_, validation())) lost("validating the connection");
}

TorchStoreClient::~TorchStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void TorchStoreClient::lost(const std::string& doing) const {
  throw Error("the launcher's store at " + server_.str() + " (" + to_string(protocol_) + ") closed the connection or " +
              "stopped answering while " + doing + " (did the launcher end?)");
}

std::string TorchStoreClient::call(int op, const std::string& args, size_t answer_bytes) {
  const uint8_t code = (protocol_ == StoreProtocol::Torch1 ? kTorch1Codes : kTorch2Codes)[op];
  std::string request(1, (char)code);
  request += args;
  if (!send_all(fd_, request)) lost("sending a request");
  std::string answer;
  if (answer_bytes > 0 && read_bytes(fd_, answer, answer_bytes, Clock::now() + timeout_ + kTorchAnswerMargin) !=
                              ReadResult::Ok)
    lost("waiting for an answer");
  return answer;
}

void TorchStoreClient::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string args;
  put_string(args, prefix_ + key);
  put_string(args, value);
  call(kSet, args, 0);
}

int64_t TorchStoreClient::add(const std::string& key, int64_t amount) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string args;
  put_string(args, prefix_ + key);
  args.append(reinterpret_cast<const char*>(&amount), 8);
  const std::string answer = call(kAdd, args, 8);
  int64_t v;
  std::memcpy(&v, answer.data(), 8);
  return v;
}

bool TorchStoreClient::check_raw(const std::vector<std::string>& full_keys) {
  std::string args;
  put_u64(args, full_keys.size());
  for (const auto& k : full_keys) put_string(args, k);
  const std::string answer = call(kCheck, args, 1);
  if (answer[0] != 0 && answer[0] != 1) lost("checking keys (answer " + std::to_string((int)answer[0]) + ")");
  return answer[0] == 0;
}

bool TorchStoreClient::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  return check_raw(full);
}

void TorchStoreClient::wait_raw(const std::vector<std::string>& full_keys, milliseconds timeout,
                                const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  milliseconds pause{1};
  while (!check_raw(full_keys)) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (const auto& k : full_keys)
        if (!check_raw({k})) missing += (missing.empty() ? "'" : ", '") + k.substr(prefix_.size()) + "'";
      throw Error("rendezvous at the launcher's store " + server_.str() + " timed out after " + duration_text(timeout) +
                  " waiting for " + (what.empty() ? missing : what));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(50));
  }
}

void TorchStoreClient::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  wait_raw(full, timeout, "");
}

std::string TorchStoreClient::get_raw(const std::string& full_key) {
  wait_raw({full_key}, timeout_, "");
  std::string args;
  put_string(args, full_key);
  const std::string length = call(kGet, args, 8);
  uint64_t n;
  std::memcpy(&n, length.data(), 8);
  if (n > (uint64_t(1) << 30)) lost("reading a value of " + std::to_string(n) + " bytes");
  std::string value;
  if (n > 0 && read_bytes(fd_, value, n, Clock::now() + timeout_ + kTorchAnswerMargin) != ReadResult::Ok)
    lost("reading a value");
  return value;
}

std::string TorchStoreClient::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return get_raw(prefix_ + key);
}

void TorchStoreClient::wait_for_all_ranks() {
  const std::string me = std::to_string(rank_);
  if (const int64_t claims = add("rank/" + me, 1); claims != 1)
    throw Error("duplicate rank: rank " + me + " joined the launcher's store at " + server_.str() + " " +
                std::to_string(claims) + " times: give every process its own RANK");
  set("joined/" + me, std::to_string(world_size_));
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; r++) keys.push_back(prefix_ + "joined/" + std::to_string(r));
  try {
    wait_raw(keys, timeout_, "every rank");
  } catch (const Error&) {
    std::string missing;
    int count = 0;
    for (int r = 0; r < world_size_; r++)
      if (!check_raw({keys[(size_t)r]})) missing += (count++ ? ", " : "") + std::to_string(r);
    throw Error("rendezvous at the launcher's store " + server_.str() + " timed out after " + duration_text(timeout_) +
                ": " + (count == 1 ? "rank " : "ranks ") + missing + " of " + std::to_string(world_size_) +
                " never joined");
  }
  for (int r = 0; r < world_size_; r++) {
    const std::string theirs = get_raw(keys[(size_t)r]);
    if (theirs != std::to_string(world_size_))
      throw Error("world size mismatch: rank " + std::to_string(r) + " says the world size is " + theirs +
                  " but rank " + me + " says " + std::to_string(world_size_) +
                  " (WORLD_SIZE must be the same on every rank)");
  }
}

// ---- choosing the store --------------------------------------------------------------------------------------------

Rendezvous join_rendezvous(const RendezvousOptions& o) {
  Rendezvous out;
  auto own_client = [&] {
    out.client = std::make_unique<TcpStoreClient>(o.endpoint, o.rank, o.world_size, o.timeout);
  };
  auto torch_client = [&](StoreProtocol p) {
    out.client = std::make_unique<TorchStoreClient>(o.endpoint, p, o.key_prefix, o.rank, o.world_size, o.timeout);
  };
  // Probe until something that answers is found (ranks start in any order), up to the timeout.
  auto probe_until_found = [&]() {
    const auto deadline = Clock::now() + o.timeout;
    for (;;) {
      const StoreProtocol p = probe_store(o.endpoint, std::min(o.timeout, milliseconds(2000)));
      if (p != StoreProtocol::Nothing) return p;
      if (Clock::now() >= deadline) return p;
      std::this_thread::sleep_for(milliseconds(100));
    }
  };
  switch (o.role) {
    case StoreRole::Own:
      if (o.rank == 0) out.server = std::make_unique<TcpStoreServer>(o.endpoint.port, o.world_size);
      own_client();
      break;
    case StoreRole::Launcher: {
      const StoreProtocol p = probe_until_found();
      if (p != StoreProtocol::Torch1 && p != StoreProtocol::Torch2)
        throw Error("TORCHELASTIC_USE_AGENT_STORE=True says the launcher's store is at " + o.endpoint.str() +
                    " (MASTER_ADDR:MASTER_PORT), but " + to_string(p) + " answers there (within " +
                    duration_text(o.timeout) + ")");
      torch_client(p);
      break;
    }
    case StoreRole::Detect:
      if (o.rank == 0) {
        try {
          out.server = std::make_unique<TcpStoreServer>(o.endpoint.port, o.world_size);
        } catch (const PortInUse& e) {
          const StoreProtocol p = probe_store(o.endpoint, std::min(o.timeout, milliseconds(2000)));
          if (p != StoreProtocol::Torch1 && p != StoreProtocol::Torch2) throw;
          torch_client(p);
          break;
        }
        own_client();
      } else {
        const StoreProtocol p = probe_until_found();
        if (p == StoreProtocol::Torch1 || p == StoreProtocol::Torch2)
          torch_client(p);
        else
          own_client();  // lmforge's rank 0 (or nothing yet: its errors name the reason)
      }
      break;
  }
  return out;
}

}  // namespace lmforge::dist
