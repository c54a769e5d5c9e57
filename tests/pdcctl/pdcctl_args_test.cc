#include "pdcctl/pdcctl_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::pdcctl {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

TEST(PdcctlArgsTest, ParsesCommands) {
  ASSERT_OK_AND_ASSIGN(Command get, ParseArgs({"get", "claims"}, std::nullopt));
  EXPECT_EQ(get.verb, Verb::kGet);
  EXPECT_EQ(get.kind, Kind::kClaims);
  EXPECT_EQ(get.ns, "default");
  EXPECT_EQ(get.server, "http://127.0.0.1:8888");
  EXPECT_EQ(get.output, Output::kTable);

  ASSERT_OK_AND_ASSIGN(
      Command all, ParseArgs({"-A", "get", "pdc", "-o", "json"}, std::nullopt));
  EXPECT_TRUE(all.all_namespaces);
  EXPECT_EQ(all.kind, Kind::kClaims);
  EXPECT_EQ(all.output, Output::kJson);

  ASSERT_OK_AND_ASSIGN(
      Command create,
      ParseArgs({"create", "claim", "nvme-data", "-n", "vms", "--resource",
                 "devices.kubevirt.io/nvme", "--count=2", "--node", "node-a",
                 "--serial=SN1", "--address", "0000:3b:00.0",
                 "--reclaim-policy", "Delete", "--token-file", "/t"},
                std::nullopt));
  EXPECT_EQ(create.verb, Verb::kCreate);
  EXPECT_EQ(create.name, "nvme-data");
  EXPECT_EQ(create.ns, "vms");
  EXPECT_EQ(create.resource, "devices.kubevirt.io/nvme");
  EXPECT_EQ(create.count, 2);
  EXPECT_EQ(create.node, "node-a");
  EXPECT_EQ(create.serial, "SN1");
  EXPECT_EQ(create.address, PciAddress::Parse("0000:3b:00.0").value());
  EXPECT_EQ(create.reclaim_policy, ReclaimPolicy::kDelete);
  EXPECT_EQ(create.token_file, "/t");

  ASSERT_OK_AND_ASSIGN(
      Command del,
      ParseArgs({"delete", "claim", "x", "--force"}, std::nullopt));
  EXPECT_EQ(del.verb, Verb::kDelete);
  EXPECT_TRUE(del.force);

  ASSERT_OK_AND_ASSIGN(Command help,
                       ParseArgs({"get", "--help"}, std::nullopt));
  EXPECT_EQ(help.verb, Verb::kHelp);
}

TEST(PdcctlArgsTest, ParsesReleaseDevice) {
  ASSERT_OK_AND_ASSIGN(Command c,
                       ParseArgs({"release", "device", "node-a", "0000:3b:00.0"}, std::nullopt));
  EXPECT_EQ(c.verb, Verb::kRelease);
  EXPECT_EQ(c.kind, Kind::kDevices);
  EXPECT_EQ(c.node, "node-a");
  EXPECT_EQ(c.address, PciAddress::Parse("0000:3b:00.0").value());
  EXPECT_EQ(c.name, "");
}

TEST(PdcctlArgsTest, ParsesHandOverAndAbandonErase) {
  ASSERT_OK_AND_ASSIGN(
      Command to, ParseArgs({"release", "device", "node-a", "0000:3b:00.0", "--to", "ns-b/restore"},
                            std::nullopt));
  ASSERT_TRUE(to.hand_over_to.has_value());
  EXPECT_EQ(*to.hand_over_to, (ClaimKey{"ns-b", "restore"}));
  EXPECT_FALSE(to.abandon_erase);
  ASSERT_OK_AND_ASSIGN(
      Command end, ParseArgs({"release", "device", "node-a", "0000:3b:00.0", "--abandon-erase"},
                             std::nullopt));
  EXPECT_TRUE(end.abandon_erase);
  EXPECT_FALSE(end.hand_over_to.has_value());
  const std::vector<std::vector<std::string>> bad = {
      {"release", "device", "node-a", "0000:3b:00.0", "--to", "no-slash"},
      {"release", "device", "node-a", "0000:3b:00.0", "--to", "/x"},
      {"release", "claim", "c", "--abandon-erase"},
      {"get", "devices", "--to", "a/b"},
      {"release", "device", "node-a", "0000:3b:00.0", "--to", "a/b", "--abandon-erase"},
  };
  for (const std::vector<std::string>& args : bad) {
    EXPECT_THAT(ParseArgs(args, std::nullopt), StatusIs(absl::StatusCode::kInvalidArgument))
        << args.back();
  }
}

TEST(PdcctlArgsTest, ServerComesFromFlagThenEnvironmentThenDefault) {
  ASSERT_OK_AND_ASSIGN(Command env,
                       ParseArgs({"get", "nodes"}, std::string("http://e:1")));
  EXPECT_EQ(env.server, "http://e:1");
  ASSERT_OK_AND_ASSIGN(Command flag,
                       ParseArgs({"get", "nodes", "--server=http://f:2"},
                                 std::string("http://e:1")));
  EXPECT_EQ(flag.server, "http://f:2");
  ASSERT_OK_AND_ASSIGN(Command empty_env,
                       ParseArgs({"get", "nodes"}, std::string("")));
  EXPECT_EQ(empty_env.server, "http://127.0.0.1:8888");
}

TEST(PdcctlArgsTest, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string want;
  };
  const Case cases[] = {
      {{}, "missing command"},
      {{"list", "claims"}, "unknown command \"list\""},
      {{"get"}, "get needs a resource type"},
      {{"get", "pods"}, "unknown resource type \"pods\""},
      {{"describe", "claim"}, "describe claim needs a NAME"},
      {{"delete", "node", "a"}, "delete works on claims only"},
      {{"create", "claim", "x"}, "create claim needs --resource"},
      {{"create", "claim", "x", "--resource", "r", "--count", "0"},
       "--count must be a whole number >= 1"},
      {{"create", "claim", "x", "--resource", "r", "--reclaim-policy",
        "retain"},
       "--reclaim-policy must be Retain or Delete"},
      {{"create", "claim", "x", "--resource", "r", "--address", "0000:3b:00"},
       "--address: "},
      {{"get", "claims", "-o", "yaml"}, "--output must be table or json"},
      {{"get", "claims", "--bogus"}, "unknown flag --bogus"},
      {{"get", "claims", "-n"}, "flag -n needs a value"},
      {{"get", "nodes", "-A"},
       "-A/--all-namespaces only works with \"get claims\" and \"get draclaims\""},
      {{"get", "claims", "--resource", "r"},
       "--resource only works with create"},
      {{"get", "claims", "--force"}, "--force only works with delete"},
      {{"delete", "claim", "x", "--pod-uid", "u"},
       "--pod-uid only works with release"},
      {{"get", "claims", "a/b"}, "\"a/b\" is not a valid name"},
      {{"get", "claims", "a", "b"}, "unexpected argument \"b\""},
      {{"get", "devices", "x"}, "get devices takes no name"},
      {{"get", "handoffs", "x"}, "get handoffs takes no name"},
      {{"delete", "handoff", "--node", "n"}, "delete handoff needs the POD_UID"},
      {{"delete", "handoff", "uid-1"}, "delete handoff needs --node NODE"},
      {{"delete", "handoff", "uid-1", "--node", "a/b"}, "\"a/b\" is not a valid node name"},
      {{"release", "handoff", "uid-1"}, "release works on claims and devices only"},
      {{"release", "device", "node-a"}, "release device needs the NODE and the device's PCI"},
      {{"release", "device", "node-a", "3b:00"}, "\"3b:00\" is not a PCI address"},
      {{"release", "device", "node-a", "0000:3b:00.0", "x"}, "unexpected argument \"x\""},
      {{"release", "device", "a/b", "0000:3b:00.0"}, "\"a/b\" is not a valid node name"},
      {{"release", "device", "node-a", "0000:3b:00.0", "--node", "n"},
       "release device takes the node as NODE"},
      {{"release", "device", "node-a", "0000:3b:00.0", "--pod-uid", "u"},
       "--pod-uid only works with release claim"},
      {{"get", "claims", "--timeout", "soon"}, "--timeout must be a positive"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseArgs(c.args, std::nullopt),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << ::testing::PrintToString(c.args);
  }
}

}  // namespace
}  // namespace pdc::pdcctl
