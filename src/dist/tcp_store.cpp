// defines: TcpStoreServer, TcpStoreClient, parse_tcp_init_method()
//
// Wire format: on accepting a connection the server sends kStoreBanner (4 raw bytes); then frames of
// [u32 length][payload]; a payload is one op byte then fields, each [u32 length][bytes].
// Requests: H rank world (hello), S key value, G timeout_ms key, W timeout_ms key... Replies: K [value], T (timed
// out) missing-key..., E reason. The server answers a timed-out wait itself, so the client's own deadline (a
// margin later) only fires when the server is gone or stopped.
#include "dist/tcp_store.h"

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

#include "util/error.h"

namespace lmforge::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kJoined[] = "lmforge/joined/";
// How much longer than a request's own timeout the client waits for the server's answer.
constexpr std::chrono::milliseconds kAnswerMargin{5000};

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_field(std::string& out, const std::string& s) {
  put_u32(out, (uint32_t)s.size());
  out += s;
}

struct Reader {
  const std::string& s;
  size_t pos = 1;  // after the op byte
  bool done() const { return pos >= s.size(); }
  uint32_t u32() {
    if (pos + 4 > s.size()) throw Error("tcp store: truncated message");
    uint32_t v;
    std::memcpy(&v, s.data() + pos, 4);
    pos += 4;
    return v;
  }
  std::string field() {
    const uint32_t n = u32();
    if (pos + n > s.size()) throw Error("tcp store: truncated message");
    std::string out = s.substr(pos, n);
    pos += n;
    return out;
  }
};

// false: the peer closed the connection or the deadline passed (`timed_out` tells which); throws on other errors.
bool read_exact(int fd, char* buf, size_t n, Clock::time_point deadline, bool& timed_out) {
  timed_out = false;
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return timed_out = true, false;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, (int)std::min<long long>(left, 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(std::string("tcp store: poll: ") + std::strerror(errno));
    if (r == 0) continue;
    const ssize_t got = ::recv(fd, buf, n, 0);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;  // ECONNRESET and the like: the peer is gone
    }
    buf += got;
    n -= (size_t)got;
  }
  return true;
}

bool read_frame(int fd, std::string& out, Clock::time_point deadline, bool& timed_out) {
  uint32_t n = 0;
  if (!read_exact(fd, reinterpret_cast<char*>(&n), 4, deadline, timed_out)) return false;
  if (n > (1u << 30)) throw Error("tcp store: a message of " + std::to_string(n) + " bytes (not an lmforge peer?)");
  out.resize(n);
  return read_exact(fd, out.data(), n, deadline, timed_out);
}

bool write_frame(int fd, const std::string& payload) {
  std::string frame;
  put_u32(frame, (uint32_t)payload.size());
  frame += payload;
  for (size_t off = 0; off < frame.size();) {
    // MSG_NOSIGNAL: a closed peer is an error code here, not a SIGPIPE that kills the process without a reason.
    const ssize_t put = ::send(fd, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    off += (size_t)put;
  }
  return true;
}

std::string address_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof host);
    port = ntohs(in->sin6_port);
  }
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0) h = h.substr(7);  // an IPv4 peer of the dual-stack listener
  return h + ":" + std::to_string(port);
}

long long ms(std::chrono::milliseconds d) { return (long long)d.count(); }

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", (double)d.count() / 1000.0);
  return buf;
}

}  // namespace

Endpoint parse_tcp_init_method(const std::string& url) {
  const std::string usage = "--distributed-init-method must be tcp://HOST:PORT (e.g. tcp://10.0.0.1:29500), got '" +
                            url + "'";
  if (url.rfind("tcp://", 0) != 0) throw Error(usage);
  std::string rest = url.substr(6);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  Endpoint e;
  size_t colon;
  if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') throw Error(usage);
    e.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos) throw Error(usage);
    e.host = rest.substr(0, colon);
  }
  const std::string port = rest.substr(colon + 1);
  if (e.host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535)
    throw Error(usage);
  e.port = std::stoi(port);
  return e;
}

// ---- server --------------------------------------------------------------------------------------------------------

TcpStoreServer::TcpStoreServer(int port, int world_size) : world_size_(world_size) {
  listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error(std::string("tcp store: socket: ") + std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {  // one dual-stack socket serves IPv4 and IPv6 peers
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons((uint16_t)port);
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons((uint16_t)port);
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(listen_fd_, 128) != 0) {
    const int err = errno;
    const std::string reason = std::strerror(err);
    ::close(listen_fd_);
    if (err == EADDRINUSE)
      throw PortInUse("rank 0 cannot listen on port " + std::to_string(port) + " for the rendezvous: " + reason +
                      " (another job or process holds the port: choose another)");
    throw Error("rank 0 cannot listen on port " + std::to_string(port) + " for the rendezvous: " + reason +
                (errno == EADDRINUSE ? " (another job or process holds the port: choose another)" : ""));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw Error(std::string("tcp store: pipe: ") + std::strerror(errno));
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // ends the blocked reads of the serving threads
  }
  changed_.notify_all();
  (void)!::write(wake_[1], "x", 1);
  acceptor_.join();
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TcpStoreServer::accept_loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

// Checks a hello; "" when the rank may join (then `rank` is set), else the job's fatal reason (already sent to it).
std::string TcpStoreServer::hello(int fd, int& rank) {
  bool timed_out;
  std::string msg;
  if (!read_frame(fd, msg, Clock::now() + std::chrono::minutes(10), timed_out)) return "-";
  if (msg.empty() || msg[0] != 'H') return "-";  // not an lmforge rank: drop the connection, keep the job
  Reader r{msg};
  const int their_rank = (int)r.u32(), their_world = (int)r.u32();
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len);
  const std::string from = address_of(peer);
  std::lock_guard<std::mutex> lock(mutex_);
  if (their_world != world_size_)
    fatal_ = "world size mismatch: rank " + std::to_string(their_rank) + " (" + from + ") says the world size is " +
             std::to_string(their_world) + " but rank 0 says " + std::to_string(world_size_) +
             " (--distributed-world-size / WORLD_SIZE must be the same on every rank)";
  else if (their_rank < 0 || their_rank >= world_size_)
    fatal_ = "rank " + std::to_string(their_rank) + " (" + from + ") is not below the world size " +
             std::to_string(world_size_);
  else if (ranks_.count(their_rank))
    fatal_ = "duplicate rank: rank " + std::to_string(their_rank) + " joined twice (from " + ranks_[their_rank] +
             " and from " + from + "): give every process its own --distributed-rank / RANK";
  if (!fatal_.empty()) {
    // The refused rank hears its reason before the waiting ranks are woken: rank 0 may end (and close every
    // connection) as soon as it hears.
    write_frame(fd, "E" + fatal_);
    changed_.notify_all();
    return fatal_;
  }
  ranks_[their_rank] = from;
  data_[kJoined + std::to_string(their_rank)] = from;
  rank = their_rank;
  changed_.notify_all();
  return "";
}

void TcpStoreServer::serve(int fd) {
  int rank = -1;
  try {
    if (::send(fd, kStoreBanner, 4, MSG_NOSIGNAL) != 4) return;
    const std::string refused = hello(fd, rank);
    if (refused == "-") return;
    if (!refused.empty()) return;  // hello() has answered
    write_frame(fd, "K");
    for (;;) {
      std::string msg;
      bool timed_out;
      if (!read_frame(fd, msg, Clock::time_point::max(), timed_out) || msg.empty()) break;
      Reader r{msg};
      std::string reply;
      std::unique_lock<std::mutex> lock(mutex_);
      if (msg[0] == 'S') {
        const std::string key = r.field();
        data_[key] = r.field();
        changed_.notify_all();
        reply = fatal_.empty() ? "K" : "E" + fatal_;
      } else if (msg[0] == 'G' || msg[0] == 'W') {
        const auto timeout = std::chrono::milliseconds(r.u32());
        std::vector<std::string> keys;
        while (!r.done()) keys.push_back(r.field());
        auto ready = [&] {
          if (stopping_ || !fatal_.empty()) return true;
          return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data_.count(k) > 0; });
        };
        changed_.wait_for(lock, timeout, ready);
        if (!fatal_.empty()) {
          reply = "E" + fatal_;
        } else if (stopping_) {
          reply = "Erank 0's rendezvous server is shutting down";
        } else if (!ready()) {
          reply = "T";
          for (const auto& k : keys)
            if (!data_.count(k)) put_field(reply, k);
        } else {
          reply = "K";
          if (msg[0] == 'G') put_field(reply, data_[keys.at(0)]);
        }
      } else {
        reply = "Eunknown request";
      }
      lock.unlock();
      if (!write_frame(fd, reply)) break;
    }
  } catch (const std::exception&) {
    // A malformed message ends this connection only; its rank will see the connection close.
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank >= 0) ranks_.erase(rank);
}

// ---- client --------------------------------------------------------------------------------------------------------

TcpStoreClient::TcpStoreClient(const Endpoint& server, int rank, int world_size, std::chrono::milliseconds timeout)
    : server_(server), rank_(rank), world_size_(world_size), timeout_(timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string last = "no attempt";
  const std::string where = "tcp://" + server.str();
  while (fd_ < 0) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int gai = ::getaddrinfo(server.host.c_str(), std::to_string(server.port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve ") + server.host + ": " + ::gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) continue;
        // Non-blocking connect bounded by the deadline: a blocking one to an unreachable host takes minutes.
        int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
          rc = ::poll(&p, 1, (int)std::clamp<long long>(ms(left), 1, 2000)) == 1 ? 0 : -1;
          int err = rc == 0 ? 0 : ETIMEDOUT;
          socklen_t len = sizeof err;
          if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          errno = err;
          rc = err == 0 ? 0 : -1;
        }
        if (rc == 0) {
          ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
          fd_ = fd;
        } else {
          last = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline)
      throw Error("rendezvous at " + where + " timed out after " + seconds_text(timeout) +
                  ": could not connect to rank 0 (" + last + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_storage self{};
  socklen_t len = sizeof self;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&self), &len);
  local_address_ = address_of(self);
  local_address_ = local_address_.substr(0, local_address_.rfind(':'));
  // Anything but lmforge's banner: the address is some other service (a PyTorch launcher's TCPStore never speaks
  // first, so it shows as a timeout).
  char banner[4] = {};
  bool timed_out = false;
  const bool got = read_exact(fd_, banner, 4, std::min(deadline, Clock::now() + std::chrono::seconds(30)), timed_out);
  if (!got || std::memcmp(banner, kStoreBanner, 4) != 0)
    throw Error("rendezvous at " + where + ": the address answers but is not an lmforge rank 0 (" +
                (got ? "it sent something else" : timed_out ? "it said nothing" : "it closed the connection") +
                "; a PyTorch launcher's store? start with torchrun's environment instead of " + where +
                ", or choose another port)");
  std::string msg = "H";
  put_u32(msg, (uint32_t)rank);
  put_u32(msg, (uint32_t)world_size);
  request(msg, timeout);
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TcpStoreClient::request(const std::string& message, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string where = "rendezvous at tcp://" + server_.str();
  if (!write_frame(fd_, message)) throw Error(where + ": lost the connection to rank 0 (did it end?)");
  std::string reply;
  bool timed_out;
  if (!read_frame(fd_, reply, Clock::now() + timeout + kAnswerMargin, timed_out))
    throw Error(where + (timed_out ? ": rank 0 did not answer within " + seconds_text(timeout + kAnswerMargin) +
                                         " (stopped or overloaded?)"
                                   : ": lost the connection to rank 0 (did it end?)"));
  if (reply.empty()) throw Error(where + ": empty answer");
  if (reply[0] == 'E') throw Error(where + ": " + reply.substr(1));
  return reply;
}

void TcpStoreClient::set(const std::string& key, const std::string& value) {
  std::string msg = "S";
  put_field(msg, key);
  put_field(msg, value);
  request(msg, timeout_);
}

std::string TcpStoreClient::get(const std::string& key) { return get(key, timeout_); }

std::string TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::string msg = "G";
  put_u32(msg, (uint32_t)ms(timeout));
  put_field(msg, key);
  const std::string reply = request(msg, timeout);
  if (reply[0] == 'T')
    throw Error("rendezvous at tcp://" + server_.str() + " timed out after " + seconds_text(timeout) +
                " waiting for key '" + key + "'");
  Reader r{reply};
  return r.field();
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::string msg = "W";
  put_u32(msg, (uint32_t)ms(timeout));
  for (const auto& k : keys) put_field(msg, k);
  const std::string reply = request(msg, timeout);
  if (reply[0] == 'T') {
    Reader r{reply};
    std::string missing;
    while (!r.done()) missing += (missing.empty() ? "'" : ", '") + r.field() + "'";
    throw Error("rendezvous at tcp://" + server_.str() + " timed out after " + seconds_text(timeout) +
                " waiting for " + missing);
  }
}

void TcpStoreClient::wait_for_all_ranks() {
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; r++) keys.push_back(kJoined + std::to_string(r));
  std::string msg = "W";
  put_u32(msg, (uint32_t)ms(timeout_));
  for (const auto& k : keys) put_field(msg, k);
  const std::string reply = request(msg, timeout_);
  if (reply[0] != 'T') return;
  Reader r{reply};
  std::string missing;
  int count = 0;
  while (!r.done()) {
    missing += (missing.empty() ? "" : ", ") + r.field().substr(sizeof kJoined - 1);
    count++;
  }
  throw Error("rendezvous at tcp://" + server_.str() + " timed out after " + seconds_text(timeout_) + ": " +
              (count == 1 ? "rank " : "ranks ") + missing + " of " + std::to_string(world_size_) +
              " never joined (not started, wrong address, or a firewall?)");
}

}  // namespace lmforge::dist
