// DeepSpeed's hostfile syntax and its include/exclude and --num_nodes/--num_gpus rules (deepspeed/launcher/runner.py).
#include <gtest/gtest.h>

#include "launch/resources.h"
#include "util/error.h"

namespace {

using lmforge::launch::Resources;
using namespace lmforge::launch;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lmforge::Error& e) {
    return e.what();
  }
  return "";
}

const Resources kTwoHosts = {{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 1, 2, 3}}};

TEST(LaunchResources, HostfileLinesAreHostAndSlots) {
  const Resources r = parse_hostfile("# our cluster\nworker-0 slots=4\n\n  worker-1   slots=4  \n", "hostfile");
  EXPECT_EQ(r, kTwoHosts);
  EXPECT_EQ(parse_hostfile("127.0.0.1 slots=2\n", "hostfile"), (Resources{{"127.0.0.1", {0, 1}}}));
}

TEST(LaunchResources, BadHostfilesNameTheLine) {
  EXPECT_NE(error_of([] { parse_hostfile("a slots=2\nb slots=x\n", "hf"); }).find("hf:2: 'b slots=x' is not a hostfile"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("a slots=2\na slots=1\n", "hf"); }).find("hf:2: host a is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hostfile("# nothing\n", "hf"); }).find("lists no host"), std::string::npos);
  EXPECT_NE(error_of([] { read_hostfile("/nonexistent/hostfile"); }).find("cannot open the hostfile"),
            std::string::npos);
}

TEST(LaunchResources, IncludeKeepsOnlyWhatItNames) {
  // DeepSpeed's own examples: -i worker-0@worker-1:0,2 and -i worker-1:0,1.
  EXPECT_EQ(filter_resources(kTwoHosts, "worker-0@worker-1:0,2", ""),
            (Resources{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {0, 2}}}));
  EXPECT_EQ(filter_resources(kTwoHosts, "worker-1:1,0", ""), (Resources{{"worker-1", {0, 1}}}));
  // Hosts stay in the hostfile's order whatever the rule's order (ranks follow it).
  EXPECT_EQ(filter_resources(kTwoHosts, "worker-1:0@worker-0:3", ""),
            (Resources{{"worker-0", {3}}, {"worker-1", {0}}}));
}

TEST(LaunchResources, ExcludeRemovesWhatItNames) {
  EXPECT_EQ(filter_resources(kTwoHosts, "", "worker-1:0"),
            (Resources{{"worker-0", {0, 1, 2, 3}}, {"worker-1", {1, 2, 3}}}));
  EXPECT_EQ(filter_resources(kTwoHosts, "", "worker-0"), (Resources{{"worker-1", {0, 1, 2, 3}}}));
}

TEST(LaunchResources, RulesDeepSpeedRefusesAreErrors) {
  EXPECT_NE(error_of([] { filter_resources(kTwoHosts, "worker-0", "worker-1"); }).find("cannot be given together"),
            std::string::npos);
  EXPECT_NE(error_of([] { filter_resources(kTwoHosts, "worker-9", ""); }).find("host 'worker-9' is not in the hostfile"),
            std::string::npos);
  EXPECT_NE(error_of([] { filter_resources(kTwoHosts, "worker-0:7", ""); }).find("host 'worker-0' has no slot 7"),
            std::string::npos);
  EXPECT_NE(error_of([] { filter_resources(kTwoHosts, "", "worker-0@worker-1"); }).find("leaves no slot"),
            std::string::npos);
}

TEST(LaunchResources, NumNodesAndNumGpusCutAsDeepSpeedDoes) {
  EXPECT_EQ(limit_resources(kTwoHosts, 1, -1), (Resources{{"worker-0", {0, 1, 2, 3}}}));
  EXPECT_EQ(limit_resources(kTwoHosts, -1, 2), (Resources{{"worker-0", {0, 1}}, {"worker-1", {0, 1}}}));
  EXPECT_EQ(limit_resources(kTwoHosts, -1, -1), kTwoHosts);
}

TEST(LaunchResources, WorldInfoRoundTrips) {
  const Resources r = {{"a", {0, 1}}, {"b", {2}}};
  EXPECT_EQ(world_info(r), "a:0,1@b:2");
  EXPECT_EQ(parse_world_info("a:0,1@b:2"), r);
}

TEST(LaunchResources, ThisMachineByLoopbackOrName) {
  EXPECT_TRUE(is_this_machine("localhost"));
  EXPECT_TRUE(is_this_machine("127.0.0.1"));
  EXPECT_TRUE(is_this_machine("::1"));
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  EXPECT_TRUE(is_this_machine(name));
  EXPECT_FALSE(is_this_machine("no-such-host.invalid"));
}

}  // namespace
