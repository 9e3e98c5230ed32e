// defines: test helpers for runs under Open MPI: mpirun_prefix() (the flags mpirun needs as root and with more
//          ranks than cores) and NetnsPair (two "hosts" as network namespaces joined by a veth pair)
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test_util.h"

namespace lmforge::testing {

// Open MPI refuses root unless told; the tests run as root in CI. Shared memory is avoided (btl self,tcp) so
// the same flags work across namespaces; no binding, since ranks outnumber cores here.
inline std::string mpirun_prefix(int np) {
  return "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none "
         "--mca btl self,tcp -np " + std::to_string(np) + " ";
}

// Two network namespaces joined by a veth pair stand for two hosts; mpirun in the first starts ranks in both
// through an rsh agent that runs the command in the namespace owning the address, and ranks talk over TCP.
// `subnet` (e.g. 231 for 10.231.0.0/24) lets tests that run side by side use different addresses.
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
    auto r = run_command("set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + va +
                         " type veth peer name " + vb + "; ip link set " + va + " netns " + a_ + "; ip link set " +
                         vb + " netns " + b_ + "; ip -n " + a_ + " addr add " + ip_a_ + "/24 dev " + va + "; ip -n " +
                         b_ + " addr add " + ip_b_ + "/24 dev " + vb + "; for n in " + a_ + " " + b_ +
                         "; do ip -n $n link set lo up; done; ip -n " + a_ + " link set " + va + " up; ip -n " + b_ +
                         " link set " + vb + " up");
    error_ = r.status == 0 ? "" : r.output;
    agent_ = dir.file("netns-agent.sh");
    write_file(agent_, "#!/bin/sh\n# Open MPI runs: <agent> <host> <command...>\nhost=\"$1\"; shift\n"
                       "case \"$host\" in\n  " + ip_a_ + ") ns=" + a_ + " ;;\n  " + ip_b_ + ") ns=" + b_ + " ;;\n"
                       "  *) echo \"netns agent: unknown host $host\" >&2; exit 1 ;;\nesac\n"
                       "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n");
    ::chmod(agent_.c_str(), 0755);
  }
  ~NetnsPair() { run_command("ip netns del " + a_ + "; ip netns del " + b_); }
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  const std::string& error() const { return error_; }
  const std::string& host_a() const { return ip_a_; }
  const std::string& host_b() const { return ip_b_; }
  // mpirun started inside the first namespace with np_per_host ranks on each host.
  std::string mpirun(int np_per_host) const {
    const std::string n = std::to_string(np_per_host);
    return "ip netns exec " + a_ + " env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun "
           "--oversubscribe --bind-to none -np " + std::to_string(2 * np_per_host) + " --host " + ip_a_ + ":" + n +
           "," + ip_b_ + ":" + n + " --mca plm_rsh_agent " + agent_ + " --mca btl self,tcp --mca btl_tcp_if_include " +
           cidr_ + " --mca oob_tcp_if_include " + cidr_ + " ";
  }

 private:
  std::string a_, b_, agent_, error_, ip_a_, ip_b_, cidr_;
};

}  // namespace lmforge::testing
