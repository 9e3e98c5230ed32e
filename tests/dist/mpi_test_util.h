// defines: test helpers for runs under Open MPI: mpirun_prefix() (the flags mpirun needs as root and with more
//          ranks than cores), NetnsPair (two "hosts" as network namespaces joined by a veth pair) and
//          LMFORGE_REQUIRE_NETNS (skip without the privileges to make them)
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "test_util.h"

namespace lmforge::testing {

// Open MPI refuses root unless told; the tests run as root in CI. Shared memory is avoided (btl self,tcp) so
// the same flags work across namespaces; no binding, since ranks outnumber cores here. A rank waiting in MPI
// yields its core (mpi_yield_when_idle): Open MPI does so by itself only when a job has more ranks than slots, and
// ctest runs two tests at once on 2 cores, so two 2-rank jobs busy-polled 4 processes on 2 cores (two layout tests:
// 42 s wall and 45 s of CPU, 20 s of it in the kernel, against 24 s and 26 s yielding).
inline constexpr const char* kMpiYield = "--mca mpi_yield_when_idle 1 ";
inline std::string mpirun_prefix(int np) {
  return std::string("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe ") +
         "--bind-to none " + kMpiYield + "--mca btl self,tcp -np " + std::to_string(np) + " ";
}

// Two network namespaces joined by a veth pair stand for two hosts; mpirun in the first starts ranks in both
// through an rsh agent that runs the command in the namespace owning the address, and ranks talk over TCP.
// `subnet` (e.g. 231 for 10.231.0.0/24) lets tests that run side by side use different addresses.
// Creating them needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root, or a container given them): without, not_permitted()
// tells the test to skip (LMFORGE_REQUIRE_NETNS); any other failure is an error().
class NetnsPair {
 public:
  NetnsPair(const TempDir& dir, int subnet = 231) {
    const std::string id = std::to_string(::getpid()), net = "10." + std::to_string(subnet) + ".0.";
    ip_a_ = net + "1";
    ip_b_ = net + "2";
    cidr_ = net + "0/24";
    a_ = "lmfA" + id;
    b_ = "lmfB" + id;
    const std::string va = "lmfa" + id, vb = "lmfb" + id;
    // In a subshell, so that run_command's 2>&1 captures every command's errors.
    auto r = run_command("(set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + va +
                         " type veth peer name " + vb + "; ip link set " + va + " netns " + a_ + "; ip link set " +
                         vb + " netns " + b_ + "; ip -n " + a_ + " addr add " + ip_a_ + "/24 dev " + va + "; ip -n " +
                         b_ + " addr add " + ip_b_ + "/24 dev " + vb + "; for n in " + a_ + " " + b_ +
                         "; do ip -n $n link set lo up; done; ip -n " + a_ + " link set " + va + " up; ip -n " + b_ +
                         " link set " + vb + " up)");
    error_ = r.status == 0 ? "" : r.output;
    while (!error_.empty() && error_.back() == '\n') error_.pop_back();
    not_permitted_ = r.status != 0 && (error_.find("Operation not permitted") != std::string::npos ||
                                       error_.find("Permission denied") != std::string::npos ||
                                       !has_capability(kCapNetAdmin) || !has_capability(kCapSysAdmin));
    agent_ = dir.file("netns-agent.sh");
    write_file(agent_, "#!/bin/sh\n# Open MPI runs: <agent> <host> <command...>\nhost=\"$1\"; shift\n"
                       "case \"$host\" in\n  " + ip_a_ + ") ns=" + a_ + " ;;\n  " + ip_b_ + ") ns=" + b_ + " ;;\n"
                       "  *) echo \"netns agent: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                       "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n");
    ::chmod(agent_.c_str(), 0755);
  }
  ~NetnsPair() { run_command("(ip netns del " + a_ + "; ip netns del " + b_ + ")"); }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Empty when both namespaces are up; otherwise the output of the commands that failed.
  const std::string& error() const { return error_; }
  // The failure was a refusal (EPERM/EACCES, or the process lacks CAP_NET_ADMIN or CAP_SYS_ADMIN).
  bool not_permitted() const { return not_permitted_; }
  const std::string& host_a() const { return ip_a_; }
  const std::string& host_b() const { return ip_b_; }
  // `command` run on host `host` (0: the first namespace, 1: the second) as a machine of its own would run it: in a
  // fresh UTS and PID namespace too, so it has its own hostname and its own process 1. `command` must not contain
  // double quotes.
  std::string on_host(int host, const std::string& hostname, const std::string& command) const {
    return "ip netns exec " + (host == 0 ? a_ : b_) + " unshare --uts --pid --fork --mount-proc /bin/sh -c \"hostname " +
           hostname + " && exec " + command + "\"";
  }
  // mpirun started inside the first namespace with np_per_host ranks on each host.
  std::string mpirun(int np_per_host) const {
    const std::string n = std::to_string(np_per_host);
    return "ip netns exec " + a_ + " env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
           "--oversubscribe --bind-to none " + kMpiYield + "-np " + std::to_string(2 * np_per_host) + " --host " + ip_a_ + ":" + n +
           "," + ip_b_ + ":" + n + " --mca plm_rsh_agent " + agent_ + " --mca btl self,tcp --mca btl_tcp_if_include " +
           cidr_ + " --mca oob_tcp_if_include " + cidr_ + " ";
  }

 private:
  static constexpr int kCapNetAdmin = 12, kCapSysAdmin = 21;  // linux/capability.h
  // Whether capability `cap` is in this process's effective set (/proc/self/status CapEff); true if unreadable.
  static bool has_capability(int cap) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> cap) & 1;
    return true;
  }

  std::string a_, b_, agent_, error_, ip_a_, ip_b_, cidr_;
  bool not_permitted_ = false;
};

// In a test body: skips the test when `hosts` could not be created for lack of privileges, fails it when creation
// failed for any other reason.
#define LMFORGE_REQUIRE_NETNS(hosts)                                                                           \
  do {                                                                                                         \
    if ((hosts).not_permitted())                                                                               \
      GTEST_SKIP() << "needs CAP_NET_ADMIN to create network namespaces: " << (hosts).error();                 \
    ASSERT_EQ((hosts).error(), "") << "cannot create network namespaces (this test needs `ip netns`)";         \
  } while (0)

}  // namespace lmforge::testing
