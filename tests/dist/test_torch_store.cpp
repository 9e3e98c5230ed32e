// TorchStoreClient against a real PyTorch TCPStore (Debian's python3-torch): the probe tells it apart from lmforge's
// store and from nothing, two ranks meet there, a value set by lmforge is read by PyTorch's own client, and a rank
// joining twice is refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "dist/torch_store.h"
#include "test_util.h"
#include "util/error.h"

namespace {

using namespace lmforge::dist;
using lmforge::testing::run_command;
using namespace std::chrono_literals;

bool have_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// A PyTorch TCPStore server on a free port, as the launchers' agent holds it; ended with the test.
struct TorchServer {
  pid_t pid = -1;
  int port = 0;
  explicit TorchServer(const std::string& dir) {
    const std::string port_file = dir + "/port";
    pid = ::fork();
    if (pid == 0) {
      const std::string script =
          "import datetime, time\n"
          "from torch.distributed import TCPStore\n"
          "s = TCPStore('127.0.0.1', 0, 1, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)\n"
          "open('" + port_file + ".tmp', 'w').write(str(s.port))\n"
          "import os; os.rename('" + port_file + ".tmp', '" + port_file + "')\n"
          "time.sleep(120)\n";
      ::execl("/usr/bin/python3", "python3", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 600 && port == 0; i++) {
      std::this_thread::sleep_for(50ms);
      std::ifstream in(port_file);
      if (in) in >> port;
    }
  }
  ~TorchServer() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

int torch_major() {
  const auto r = run_command("/usr/bin/python3 -c 'import torch; print(torch.__version__.split(\".\")[0])'");
  return std::atoi(r.output.c_str());
}

TEST(TorchStore, ProbeTellsPyTorchsStoreFromLmforgesAndFromNothing) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  lmforge::testing::TempDir dir;
  TorchServer torch(dir.path());
  ASSERT_GT(torch.port, 0);
  const StoreProtocol want = torch_major() >= 2 ? StoreProtocol::Torch2 : StoreProtocol::Torch1;
  EXPECT_EQ(probe_store({"127.0.0.1", torch.port}, 2000ms), want);
  TcpStoreServer own(0, 1);
  EXPECT_EQ(probe_store({"127.0.0.1", own.port()}, 2000ms), StoreProtocol::Lmforge);
  const int closed = own.port();
  // The torch server still serves after the probes (none of them left it waiting).
  EXPECT_EQ(probe_store({"127.0.0.1", torch.port}, 2000ms), want);
  (void)closed;
}

TEST(TorchStore, TwoRanksMeetAtPyTorchsStoreAndPythonReadsTheirKeys) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  lmforge::testing::TempDir dir;
  TorchServer torch(dir.path());
  ASSERT_GT(torch.port, 0);
  const Endpoint at{"127.0.0.1", torch.port};
  const StoreProtocol p = probe_store(at, 2000ms);
  const std::string prefix = "/lmforge/test/0/";
  auto rank1 = std::async(std::launch::async, [&] {
    TorchStoreClient c(at, p, prefix, 1, 2, 20000ms);
    c.wait_for_all_ranks();
    c.set("from1", std::string("one\0bytes", 9));
    return c.get("from0");
  });
  TorchStoreClient c0(at, p, prefix, 0, 2, 20000ms);
  c0.wait_for_all_ranks();
  c0.set("from0", "zero");
  EXPECT_EQ(rank1.get(), "zero");
  EXPECT_EQ(c0.get("from1"), std::string("one\0bytes", 9));
  EXPECT_EQ(c0.local_address(), "127.0.0.1");
  // PyTorch's own client reads what lmforge wrote (its keys carry the same leading '/').
  const auto r = run_command("/usr/bin/python3 -c \"import datetime; from torch.distributed import TCPStore; "
                             "s = TCPStore('127.0.0.1', " + std::to_string(torch.port) +
                             ", 1, False, timeout=datetime.timedelta(seconds=10)); print(s.get('lmforge/test/0/from0'))\"");
  EXPECT_NE(r.output.find("b'zero'"), std::string::npos) << r.output;
  // A second process claiming rank 1 is refused; a wait for a key no one sets times out naming it.
  TorchStoreClient again(at, p, prefix, 1, 2, 2000ms);
  try {
    again.wait_for_all_ranks();
    ADD_FAILURE() << "a duplicate rank joined";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate rank: rank 1"), std::string::npos) << e.what();
  }
  try {
    c0.wait({"never"}, 300ms);
    ADD_FAILURE() << "waited for a key no one set";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for 'never'"), std::string::npos) << e.what();
  }
}

TEST(TorchStore, LmforgesClientRefusesAnAddressThatIsNotAnLmforgeRankZero) {
  if (!have_torch()) GTEST_SKIP() << "no torch for /usr/bin/python3";
  lmforge::testing::TempDir dir;
  TorchServer torch(dir.path());
  ASSERT_GT(torch.port, 0);
  try {
    TcpStoreClient c({"127.0.0.1", torch.port}, 0, 1, 3000ms);
    ADD_FAILURE() << "joined a PyTorch store with lmforge's protocol";
  } catch (const lmforge::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not an lmforge rank 0"), std::string::npos) << e.what();
  }
}

}  // namespace
