// The Gloo communicator with its ranks as threads of one process: every collective against a serial reference
// (sums bitwise equal to the rank-ordered sum), split into groups, point to point, the asynchronous reduce-scatter,
// and the errors of a peer that is gone (at once) or silent (after the timeout).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include "dist/communicator.h"
#include "util/error.h"

namespace {

using namespace lmforge::dist;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int free_port() {
  TcpStoreServer probe(0, 1);
  return probe.port();
}

// Runs body(comm) on `n` ranks (threads) of one Gloo world; returns each rank's error message ("" when none).
std::vector<std::string> on_ranks(int n, std::chrono::milliseconds timeout,
                                  const std::function<void(Communicator&)>& body) {
  const int port = free_port();
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < n; r++)
    ranks.push_back(std::async(std::launch::async, [=] {
      try {
        auto comm = make_gloo_communicator({{"127.0.0.1", port}, r, n, timeout});
        body(*comm);
        return std::string();
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    }));
  std::vector<std::string> out;
  for (auto& f : ranks) out.push_back(f.get());
  return out;
}

// Values whose float sum depends on the order of association.
float value(int rank, size_t i) { return (float)std::ldexp(1.0 + 0.37 * (double)i, (int)((rank * 7 + i) % 40) - 20); }

TEST(GlooCommunicator, CollectivesMatchTheRankOrderedSerialResults) {
  const int n = 3;
  const size_t len = 1001;
  const auto errors = on_ranks(n, 20000ms, [&](Communicator& comm) {
    const int me = comm.rank();
    ASSERT_EQ(comm.size(), n);
    EXPECT_EQ(comm.name(), "gloo");
    std::vector<float> want(len);
    for (size_t i = 0; i < len; i++) {
      float s = value(0, i);
      for (int r = 1; r < n; r++) s += value(r, i);
      want[i] = s;
    }
    // reduce-scatter over an uneven cut (a zero-length piece included), then all-gather: the whole sum.
    const std::vector<size_t> counts = {600, 0, 401};
    std::vector<float> data(len);
    for (size_t i = 0; i < len; i++) data[i] = value(me, i);
    comm.reduce_scatter_sum(data.data(), counts);
    size_t off = me == 0 ? 0 : me == 1 ? 600 : 600;
    for (size_t i = 0; i < counts[(size_t)me]; i++) ASSERT_EQ(data[off + i], want[off + i]) << "rank " << me << " " << i;
    comm.all_gather(data.data(), counts);
    for (size_t i = 0; i < len; i++) ASSERT_EQ(data[i], want[i]) << i;
    // The asynchronous form gives the same, with two exchanges in flight at once.
    std::vector<float> a(len), b(len);
    for (size_t i = 0; i < len; i++) a[i] = b[i] = value(me, i);
    const auto even = even_split(len, n);
    const int ha = comm.start_reduce_scatter_sum(a.data(), even);
    const int hb = comm.start_reduce_scatter_sum(b.data(), even);
    comm.progress();
    comm.finish_reduce_scatter_sum(hb);
    comm.finish_reduce_scatter_sum(ha);
    comm.all_gather(a.data(), even);
    comm.all_gather(b.data(), even);
    EXPECT_EQ(a, want);
    EXPECT_EQ(b, want);
    // Float all-reduce and double all-reduce in rank order.
    std::vector<float> f(len);
    for (size_t i = 0; i < len; i++) f[i] = value(me, i);
    comm.all_reduce_sum(f.data(), len);
    EXPECT_EQ(f, want);
    double d[2] = {0.1 * (me + 1), 1e16 * (me == 0 ? 1 : me == 1 ? -1 : 0) + 1.0};
    comm.all_reduce_sum(d, 2);
    EXPECT_EQ(d[0], (0.1 + 0.2) + 0.30000000000000004);
    EXPECT_EQ(d[1], ((1e16 + 1.0) + (-1e16 + 1.0)) + 1.0);
    // Broadcast from a non-zero root.
    std::vector<char> bytes(5000, me == 2 ? 'x' : '?');
    comm.broadcast(bytes.data(), bytes.size(), 2);
    EXPECT_EQ(bytes, std::vector<char>(5000, 'x'));
    // Point to point: two messages from every rank to rank 0, received in order per sender.
    if (me != 0) {
      int m1 = me * 10, m2 = me * 10 + 1;
      comm.send(&m1, sizeof m1, 0);
      comm.send(&m2, sizeof m2, 0);
    } else {
      for (int s = 2; s >= 1; s--) {
        int x = 0, y = 0;
        comm.recv(&x, sizeof x, s);
        comm.recv(&y, sizeof y, s);
        EXPECT_EQ(x, s * 10);
        EXPECT_EQ(y, s * 10 + 1);
      }
    }
    comm.barrier();
    EXPECT_GT(comm.stats().reduce_scatter_bytes, 0u);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[(size_t)r], "") << "rank " << r;
}

TEST(GlooCommunicator, SplitMakesGroupsOrderedByKey) {
  const int n = 4;
  const auto errors = on_ranks(n, 20000ms, [&](Communicator& comm) {
    const int me = comm.rank();
    // Colors 0 (ranks 0, 2) and 1 (ranks 1, 3); keys reverse the order inside a group.
    auto group = comm.split(me % 2, -me);
    ASSERT_EQ(group->size(), 2);
    EXPECT_EQ(group->rank(), me < 2 ? 1 : 0);
    double x = me;
    group->all_reduce_sum(&x, 1);
    EXPECT_EQ(x, me % 2 == 0 ? 2.0 : 4.0);
    // A split of a split, and the world still works afterwards.
    auto single = group->split(group->rank(), 0);
    EXPECT_EQ(single->size(), 1);
    double y = 1;
    comm.all_reduce_sum(&y, 1);
    EXPECT_EQ(y, 4.0);
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[(size_t)r], "") << "rank " << r;
}

TEST(GlooCommunicator, PeerThatIsGoneFailsTheOthersAtOnce) {
  const auto start = Clock::now();
  const auto errors = on_ranks(2, 60000ms, [&](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 1) return;  // rank 1's connections close as its communicator is destroyed
    std::this_thread::sleep_for(200ms);
    double x = 1;
    comm.all_reduce_sum(&x, 1);
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("all-reduce: lost the connection to rank 1"), std::string::npos) << errors[0];
}

TEST(GlooCommunicator, SilentPeerFailsTheOthersAfterTheTimeout) {
  const auto start = Clock::now();
  const auto errors = on_ranks(2, 1500ms, [&](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(4000ms);  // alive, connected, silent
      return;
    }
    std::vector<float> v(10, 1.0f);
    comm.all_reduce_sum(v.data(), v.size());
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 15.0);
  EXPECT_NE(errors[0].find("reduce-scatter: nothing from rank 1 within 0.025 min (1.5 s) "
                           "(--distributed-timeout-minutes)"),
            std::string::npos)
      << errors[0];
}

// Ranks whose transfers disagree in size: Gloo's own event-loop thread finds the message larger than the receive
// and throws there, where no caller can catch it. The process ends with exit 1 and a message saying what the
// mismatch means (before: std::terminate's abort, exit 134).
TEST(GlooCommunicator, TransferLargerThanItsReceiveEndsTheProcessWithAnErrorNotAnAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        on_ranks(2, 20000ms, [](Communicator& comm) {
          if (comm.rank() == 0) {
            std::vector<char> big(4096, 'x');
            comm.send(big.data(), big.size(), 1);
          } else {
            std::vector<char> small(16);
            comm.recv(small.data(), small.size(), 0);
          }
          comm.barrier();
        });
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(1),
      "lmforge: error: process [0-9]+ \\([^)]*\\): the Gloo transport failed on its event-loop thread: a message did "
      "not fit the receive posted for it, so the ranks are running different collectives \\(do their settings or "
      "data differ\\?\\) \\[gloo: .*op.preamble.length <= op.nbytes");
}

TEST(GlooCommunicator, RendezvousErrorsComeFromTheStore) {
  const auto errors = on_ranks(1, 300ms, [](Communicator&) {});
  EXPECT_EQ(errors[0], "");  // a world of one needs nobody
  const int port = free_port();
  const auto start = Clock::now();
  std::string e;
  try {
    make_gloo_communicator({{"127.0.0.1", port}, 0, 2, 500ms});
  } catch (const lmforge::Error& x) {
    e = x.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_NE(e.find("timed out after 0.5 s: rank 1 of 2 never joined"), std::string::npos) << e;
}

}  // namespace
