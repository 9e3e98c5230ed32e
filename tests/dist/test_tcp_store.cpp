// The rendezvous store: set/get/wait between ranks, the tcp:// URL, and each error a misconfigured job can hit
// (timeout naming the missing ranks, duplicate rank, world-size mismatch, nobody listening, rank 0 gone), every
// one reported within its timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "dist/tcp_store.h"
#include "util/error.h"

namespace {

using namespace lmforge::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

TEST(TcpStore, SetGetAndWaitBetweenRanks) {
  TcpStoreServer server(0, 2);
  const Endpoint at{"127.0.0.1", server.port()};
  TcpStoreClient rank0(at, 0, 2, 5000ms), rank1(at, 1, 2, 5000ms);
  rank0.wait_for_all_ranks();
  rank0.set("a", std::string("x\0y", 3));
  EXPECT_EQ(rank1.get("a"), std::string("x\0y", 3));
  // A get waits for a key set later by another rank.
  auto later = std::async(std::launch::async, [&] { return rank1.get("b"); });
  std::this_thread::sleep_for(100ms);
  rank0.set("b", "late");
  EXPECT_EQ(later.get(), "late");
  rank1.wait({"a", "b"}, 1000ms);
  EXPECT_EQ(rank0.local_address(), "127.0.0.1");
}

TEST(TcpStore, WaitTimesOutNamingTheMissingKey) {
  TcpStoreServer server(0, 1);
  TcpStoreClient c({"127.0.0.1", server.port()}, 0, 1, 5000ms);
  c.set("here", "1");
  const auto start = Clock::now();
  const std::string e = error_of([&] { c.wait({"here", "missing"}, 300ms); });
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_GE(seconds_since(start), 0.29);
  EXPECT_NE(e.find("timed out after 0.3 s waiting for 'missing'"), std::string::npos) << e;
  EXPECT_EQ(e.find("'here'"), std::string::npos) << e;
}

TEST(TcpStore, RendezvousTimeoutListsTheRanksThatNeverJoined) {
  TcpStoreServer server(0, 4);
  const Endpoint at{"127.0.0.1", server.port()};
  TcpStoreClient rank0(at, 0, 4, 400ms), rank2(at, 2, 4, 400ms);
  const auto start = Clock::now();
  const std::string e = error_of([&] { rank0.wait_for_all_ranks(); });
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_NE(e.find("rendezvous at tcp://127.0.0.1:" + std::to_string(server.port()) +
                   " timed out after 0.4 s: ranks 1, 3 of 4 never joined"),
            std::string::npos)
      << e;
}

TEST(TcpStore, DuplicateRankFailsTheNewcomerAndTheWaitingRanks) {
  TcpStoreServer server(0, 3);
  const Endpoint at{"127.0.0.1", server.port()};
  TcpStoreClient rank0(at, 0, 3, 10000ms), rank1(at, 1, 3, 10000ms);
  auto waiting = std::async(std::launch::async, [&] { return error_of([&] { rank0.wait_for_all_ranks(); }); });
  std::this_thread::sleep_for(100ms);
  const auto start = Clock::now();
  const std::string e = error_of([&] { TcpStoreClient again(at, 1, 3, 10000ms); });
  EXPECT_NE(e.find("duplicate rank: rank 1 joined twice (from 127.0.0.1:"), std::string::npos) << e;
  const std::string w = waiting.get();
  EXPECT_LT(seconds_since(start), 3.0) << "rank 0 waited for its timeout instead of failing at once";
  EXPECT_NE(w.find("duplicate rank: rank 1 joined twice"), std::string::npos) << w;
}

TEST(TcpStore, WorldSizeMismatchIsReportedToBothSides) {
  TcpStoreServer server(0, 2);
  const Endpoint at{"127.0.0.1", server.port()};
  TcpStoreClient rank0(at, 0, 2, 10000ms);
  auto waiting = std::async(std::launch::async, [&] { return error_of([&] { rank0.wait_for_all_ranks(); }); });
  const std::string e = error_of([&] { TcpStoreClient rank1(at, 1, 3, 10000ms); });
  EXPECT_NE(e.find("world size mismatch: rank 1 (127.0.0.1:"), std::string::npos) << e;
  EXPECT_NE(e.find("says the world size is 3 but rank 0 says 2"), std::string::npos) << e;
  EXPECT_NE(waiting.get().find("world size mismatch"), std::string::npos);
  // A rank beyond the world is refused too.
  TcpStoreServer other(0, 2);
  const std::string big = error_of([&] { TcpStoreClient rank5({"127.0.0.1", other.port()}, 5, 2, 10000ms); });
  EXPECT_NE(big.find("rank 5 (127.0.0.1:"), std::string::npos) << big;
  EXPECT_NE(big.find("is not below the world size 2"), std::string::npos) << big;
}

TEST(TcpStore, NobodyListeningTimesOutWithTheReason) {
  int port;
  {
    TcpStoreServer probe(0, 1);  // a port that was free a moment ago and is closed now
    port = probe.port();
  }
  const auto start = Clock::now();
  const std::string e = error_of([&] { TcpStoreClient c({"127.0.0.1", port}, 1, 2, 500ms); });
  EXPECT_GE(seconds_since(start), 0.45);
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_NE(e.find("rendezvous at tcp://127.0.0.1:" + std::to_string(port) +
                   " timed out after 0.5 s: could not connect to rank 0 (Connection refused)"),
            std::string::npos)
      << e;
}

TEST(TcpStore, ClientStartedBeforeRankZeroConnectsOnceItListens) {
  int port;
  {
    TcpStoreServer probe(0, 1);
    port = probe.port();
  }
  auto rank1 = std::async(std::launch::async, [&] {
    TcpStoreClient c({"127.0.0.1", port}, 1, 2, 5000ms);
    return c.get("hello");
  });
  std::this_thread::sleep_for(300ms);
  TcpStoreServer server(port, 2);
  TcpStoreClient rank0({"127.0.0.1", port}, 0, 2, 5000ms);
  rank0.set("hello", "world");
  EXPECT_EQ(rank1.get(), "world");
}

TEST(TcpStore, LostServerIsAnErrorNotAHang) {
  auto server = std::make_unique<TcpStoreServer>(0, 2);
  TcpStoreClient c({"127.0.0.1", server->port()}, 1, 2, 20000ms);
  auto waiting = std::async(std::launch::async, [&] { return error_of([&] { c.get("never"); }); });
  std::this_thread::sleep_for(100ms);
  const auto start = Clock::now();
  server.reset();
  const std::string e = waiting.get();
  EXPECT_LT(seconds_since(start), 3.0);
  EXPECT_NE(e.find("rendezvous at tcp://127.0.0.1:"), std::string::npos) << e;
  EXPECT_TRUE(e.find("shutting down") != std::string::npos || e.find("lost the connection") != std::string::npos) << e;
}

TEST(TcpStore, PortInUseIsAClearError) {
  TcpStoreServer first(0, 1);
  const std::string e = error_of([&] { TcpStoreServer second(first.port(), 1); });
  EXPECT_NE(e.find("rank 0 cannot listen on port " + std::to_string(first.port()) +
                   " for the rendezvous: Address already in use (another job or process holds the port"),
            std::string::npos)
      << e;
}

TEST(TcpInitMethod, ParsesHostAndPortAndRefusesTheRest) {
  Endpoint e = parse_tcp_init_method("tcp://10.0.0.1:11111");
  EXPECT_EQ(e.host, "10.0.0.1");
  EXPECT_EQ(e.port, 11111);
  e = parse_tcp_init_method("tcp://node-3.cluster:29500/");
  EXPECT_EQ(e.host, "node-3.cluster");
  EXPECT_EQ(e.port, 29500);
  e = parse_tcp_init_method("tcp://[fe80::1]:80");
  EXPECT_EQ(e.host, "fe80::1");
  EXPECT_EQ(e.port, 80);
  for (const char* bad : {"env://", "tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:70000", "tcp://h:8x",
                          "file:///tmp/x", "10.0.0.1:80"}) {
    const std::string msg = error_of([&] { parse_tcp_init_method(bad); });
    EXPECT_NE(msg.find("--distributed-init-method must be tcp://HOST:PORT"), std::string::npos) << bad << ": " << msg;
  }
}

}  // namespace
