// The Communicator's tensor entry points (dist/communicator_tensor.cpp) with Gloo ranks as threads of one process:
// on the CPU device (memory passed to the transport as it is) and on the guarded test device (memory the host
// cannot touch, staged through host buffers with the Backend's copies), every collective leaves the device holding
// bitwise what the host call leaves in host memory: reduce-scatter (sync and two asynchronous ones in flight, only
// this rank's piece written), all-gather, all-reduce, broadcast of i32 ids, send and recv around a ring.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "kernels/backend.h"

namespace {

using namespace lmforge::dist;
using lmforge::kernels::Backend;
using lmforge::kernels::Buffer;
using lmforge::kernels::Device;
using lmforge::kernels::DType;
using lmforge::kernels::Tensor;
using namespace std::chrono_literals;

int free_port() {
  TcpStoreServer probe(0, 1);
  return probe.port();
}

// Runs body(comm) on `n` ranks (threads) of one Gloo world; returns each rank's error message ("" when none).
std::vector<std::string> on_ranks(int n, const std::function<void(Communicator&)>& body) {
  const int port = free_port();
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < n; r++)
    ranks.push_back(std::async(std::launch::async, [=] {
      try {
        auto comm = make_gloo_communicator({{"127.0.0.1", port}, r, n, std::chrono::milliseconds(20000)});
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

// A device buffer holding `host`, and its contents back on the host.
struct OnDevice {
  Backend& be;
  Buffer buf;
  OnDevice(Backend& backend, const std::vector<float>& host)
      : be(backend), buf(backend, DType::F32, host.size()) {
    be.copy_to_device(buf.data(), host.data(), host.size() * 4);
  }
  Tensor view() const { return buf.view({(int64_t)buf.count()}); }
  std::vector<float> host() const {
    std::vector<float> out(buf.count());
    be.copy_to_host(out.data(), buf.data(), out.size() * 4);
    return out;
  }
};

void expect_tensor_collectives_match_the_host_calls(Device device) {
  Backend& be = lmforge::kernels::backend_for(device);
  const int n = 3;
  const size_t len = 1001;
  const auto errors = on_ranks(n, [&](Communicator& comm) {
    const int me = comm.rank();
    std::vector<float> mine(len);
    for (size_t i = 0; i < len; i++) mine[i] = value(me, i);
    // reduce-scatter over an uneven cut (a zero-length piece included), then all-gather.
    const std::vector<size_t> counts = {600, 0, 401};
    std::vector<float> host = mine;
    OnDevice dev(be, mine);
    comm.reduce_scatter_sum(host.data(), counts);
    comm.reduce_scatter_sum(dev.view(), counts);
    EXPECT_EQ(dev.host(), host) << "reduce_scatter_sum, rank " << me;  // the other pieces untouched, as on the host
    comm.all_gather(host.data(), counts);
    comm.all_gather(dev.view(), counts);
    EXPECT_EQ(dev.host(), host) << "all_gather, rank " << me;
    // Two asynchronous reduce-scatters in flight, finished in the other order.
    const std::vector<size_t> even = even_split(len, n);
    std::vector<float> ha = mine, hb = mine;
    OnDevice da(be, mine), db(be, mine);
    const int a = comm.start_reduce_scatter_sum(da.view(), even);
    const int b = comm.start_reduce_scatter_sum(db.view(), even);
    comm.progress();
    comm.finish_reduce_scatter_sum(db.view(), b);
    comm.finish_reduce_scatter_sum(da.view(), a);
    comm.reduce_scatter_sum(ha.data(), even);
    comm.reduce_scatter_sum(hb.data(), even);
    EXPECT_EQ(da.host(), ha) << "start/finish_reduce_scatter_sum, rank " << me;
    EXPECT_EQ(db.host(), hb) << "start/finish_reduce_scatter_sum, rank " << me;
    // All-reduce.
    std::vector<float> sum = mine;
    OnDevice ds(be, mine);
    comm.all_reduce_sum(sum.data(), len);
    comm.all_reduce_sum(ds.view());
    EXPECT_EQ(ds.host(), sum) << "all_reduce_sum, rank " << me;
    // Broadcast of i32 ids from rank 1.
    std::vector<int32_t> ids(17);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = me == 1 ? (int32_t)(i * 31 + 5) : -1;
    Buffer dids(be, DType::I32, ids.size());
    be.copy_to_device(dids.data(), ids.data(), ids.size() * 4);
    comm.broadcast(dids.view({(int64_t)ids.size()}), 1);
    std::vector<int32_t> got(ids.size());
    be.copy_to_host(got.data(), dids.data(), got.size() * 4);
    for (size_t i = 0; i < ids.size(); i++) EXPECT_EQ(got[i], (int32_t)(i * 31 + 5)) << "broadcast, rank " << me;
    // Point to point around the ring: each rank sends its values to the next and receives the previous rank's.
    OnDevice out(be, mine), in(be, std::vector<float>(len, 0.0f));
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    if (me == 0) {
      comm.send(out.view(), next);
      comm.recv(in.view(), prev);
    } else {
      comm.recv(in.view(), prev);
      comm.send(out.view(), next);
    }
    std::vector<float> want(len);
    for (size_t i = 0; i < len; i++) want[i] = value(prev, i);
    EXPECT_EQ(in.host(), want) << "send/recv, rank " << me;
  });
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[(size_t)r], "") << "rank " << r;
}

TEST(CommunicatorTensors, OnTheCpuTheyAreTheHostCalls) { expect_tensor_collectives_match_the_host_calls(Device::CPU); }

TEST(CommunicatorTensors, OnTheGuardedDeviceTheyStageThroughTheBackend) {
  expect_tensor_collectives_match_the_host_calls(Device::GUARDED);
}

// A strided view or pieces that do not cover the tensor are refused before anything is sent.
TEST(CommunicatorTensors, RefusesStridedViewsAndMismatchedPieces) {
  auto local = make_local_communicator();
  Buffer b(lmforge::kernels::backend_for(Device::GUARDED), DType::F32, 12);
  Tensor strided = b.view({3, 2});
  strided.row_stride = 4;
  EXPECT_THROW(local->all_reduce_sum(strided), std::logic_error);
  const std::vector<size_t> short_counts = {5};
  EXPECT_THROW(local->all_gather(b.view({12}), short_counts), std::logic_error);
}

}  // namespace
