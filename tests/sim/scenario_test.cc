// Scenario loading: every shipped scenario is valid, and every validation
// error names the offending field by its path.
#include "sim/scenario.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::sim {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kBase[] = R"(
name: t
cluster:
  device_classes:
    - resource: devices.kubevirt.io/nvme
      pci_ids: ["1b36:0010"]
  node_groups:
    - prefix: node-
      count: 2
      devices:
        - {resource: devices.kubevirt.io/nvme, pci_id: "1b36:0010", count: 2}
workload:
  vms:
    - {prefix: a-, count: 1, devices: {resource: devices.kubevirt.io/nvme, count: 1}}
    - {prefix: b-, count: 1, devices: {resource: devices.kubevirt.io/nvme, count: 1}}
    - {prefix: c-, count: 1, devices: {resource: devices.kubevirt.io/nvme, count: COUNT}}
)";

std::string WithCount(const std::string& count) {
  std::string s = kBase;
  s.replace(s.find("COUNT"), 5, count);
  return s;
}

TEST(ScenarioTest, ParsesAMinimalScenarioWithDefaults) {
  ASSERT_OK_AND_ASSIGN(Scenario s, ParseScenario(WithCount("2"), "t.yaml"));
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.node_groups[0].count, 2);
  EXPECT_EQ(s.vm_groups[2].device_count, 2);
  EXPECT_EQ(s.duration, 24 * kHour);
  // What deploy/ ships: adaptive sampling, restarts pinned by the webhook.
  EXPECT_EQ(s.scheduler.pdc_percentage_of_nodes_to_score, 0);
  EXPECT_TRUE(s.scheduler.pdc_node_affinity);
  EXPECT_FALSE(s.vm_groups[0].run.has_value());
}

TEST(ScenarioTest, LatencyPerNodeInNanoseconds) {
  std::string text = WithCount("1") +
                     "scheduler: {latency: {per_node: 750ns, bind: 20ms}}\n";
  ASSERT_OK_AND_ASSIGN(Scenario s, ParseScenario(text, "t.yaml"));
  EXPECT_EQ(s.scheduler.per_node_ns, 750);
  EXPECT_EQ(s.scheduler.bind, 20'000);
  text = WithCount("1") + "scheduler: {latency: {per_node: 2us}}\n";
  ASSERT_OK_AND_ASSIGN(s, ParseScenario(text, "t.yaml"));
  EXPECT_EQ(s.scheduler.per_node_ns, 2000);
}

TEST(ScenarioTest, ErrorNamesTheField) {
  EXPECT_THAT(ParseScenario(WithCount("0"), "t.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("workload.vms[2].devices.count: must be >= 1")));
}

struct BadCase {
  std::string name;
  std::string from;  // Replaced in kBase (with COUNT=1) ...
  std::string to;    // ... by this.
  std::string error;
};

class ScenarioErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ScenarioErrorTest, NamesTheField) {
  std::string text = WithCount("1");
  const BadCase& c = GetParam();
  const size_t at = text.find(c.from);
  ASSERT_NE(at, std::string::npos) << c.from;
  text.replace(at, c.from.size(), c.to);
  EXPECT_THAT(ParseScenario(text, "t.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ScenarioErrorTest,
    ::testing::Values(
        BadCase{"MissingName", "name: t", "seed: 1", "t.yaml: name: is required"},
        BadCase{"UnknownTopLevel", "name: t", "name: t\nseeds: 3", "seeds: unknown field"},
        BadCase{"BadDuration", "name: t", "name: t\nduration: 3 weeks",
                "duration: \"3 weeks\" is not a duration"},
        BadCase{"BadPciId", "pci_ids: [\"1b36:0010\"]", "pci_ids: [\"1b36-0010\"]",
                "cluster.device_classes[0].pci_ids[0]: \"1b36-0010\" is not a vendor:device"},
        BadCase{"NodeCount", "count: 2\n", "count: -1\n",
                "cluster.node_groups[0].count: must be >= 1"},
        BadCase{"UnknownResource", "{prefix: b-, count: 1, devices: {resource: devices.kubevirt.io/nvme",
                "{prefix: b-, count: 1, devices: {resource: devices.kubevirt.io/gpu",
                "workload.vms[1].devices.resource: \"devices.kubevirt.io/gpu\" is not in "
                "cluster.device_classes"},
        BadCase{"PciIdNotInClass", "pci_id: \"1b36:0010\"", "pci_id: \"8086:5845\"",
                "cluster.node_groups[0].devices[0].pci_id: is not one of its device class"},
        BadCase{"DuplicateVmPrefix", "{prefix: b-", "{prefix: a-",
                "workload.vms[1].prefix: is used by another VM group"},
        BadCase{"BadClaims", "{prefix: a-, count: 1,", "{prefix: a-, claims: shared, count: 1,",
                "workload.vms[0].claims: must be implicit or explicit"},
        BadCase{"RunWithoutStop", "{prefix: a-, count: 1,", "{prefix: a-, run: 1h, count: 1,",
                "workload.vms[0].stop: is required when run is set"},
        BadCase{"BadDistribution", "{prefix: a-, count: 1,",
                "{prefix: a-, run: {dist: normal, mean: 1h}, stop: 1m, count: 1,",
                "workload.vms[0].run.dist: must be fixed, exponential or uniform"},
        BadCase{"UniformMaxBelowMin", "{prefix: a-, count: 1,",
                "{prefix: a-, run: {dist: uniform, min: 2h, max: 1h}, stop: 1m, count: 1,",
                "workload.vms[0].run.max: must be >= min"},
        BadCase{"FailureOfUnknownNode", "name: t",
                "name: t\nevents: {node_failures: {list: [{node: node-07, at: 1h}]}}",
                "events.node_failures.list[0].node: \"node-07\" is not a node of the cluster"},
        BadCase{"PercentageRange", "name: t",
                "name: t\nscheduler: {percentage_of_nodes_to_score: 101}",
                "scheduler.percentage_of_nodes_to_score: must be <= 100"},
        BadCase{"MassRestartNeedsDown", "name: t",
                "name: t\nevents: {mass_restarts: {every: 1h}}",
                "events.mass_restarts.down: is required"},
        BadCase{"RebootWithoutStartPath", "name: t",
                "name: t\nevents: {node_reboots: [{name: r, nodes: [node-00], at: 1h}]}",
                "start_path: is required with events.node_reboots"},
        BadCase{"RebootTooLong", "name: t",
                "name: t\nstart_path: {}\nevents: {node_reboots: [{name: r, nodes: [node-00], "
                "at: 1h, down: 5m}]}",
                "events.node_reboots[0].down: must be < 5m"},
        BadCase{"RebootUnknownGroup", "name: t",
                "name: t\nstart_path: {}\nevents: {node_reboots: [{name: r, group: rack-}]}",
                "events.node_reboots[0].group: \"rack-\" is not the prefix of a node group"},
        BadCase{"RebootNeedsNodesOrGroup", "name: t",
                "name: t\nstart_path: {}\nevents: {node_reboots: [{name: r, at: 1h}]}",
                "events.node_reboots[0]: needs exactly one of nodes and group"},
        BadCase{"RebootUnknownNode", "name: t",
                "name: t\nstart_path: {}\nevents: {node_reboots: [{name: r, nodes: [x-1]}]}",
                "events.node_reboots[0].nodes[0]: \"x-1\" is not a node of the cluster"},
        BadCase{"StartPathUnknownField", "name: t", "name: t\nstart_path: {qemu: 1s}",
                "start_path.qemu: unknown field"},
        BadCase{"DraVersion", "name: t", "name: t\ndra: {kubernetes: \"1.33\"}",
                "dra.kubernetes: must be 1.34, 1.35 or 1.36"},
        BadCase{"YamlSyntax", "name: t", "name: [t", "t.yaml:"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(ScenarioTest, ParseDurationTable) {
  const std::pair<const char*, SimTime> ok[] = {
      {"0", 0},          {"250ms", 250'000}, {"30s", 30 * kSecond}, {"5m", 5 * kMinute},
      {"1.5h", 90 * kMinute}, {"2d", 48 * kHour}, {"7us", 7}};
  for (const auto& [text, want] : ok) {
    ASSERT_OK_AND_ASSIGN(SimTime got, ParseDuration(text));
    EXPECT_EQ(got, want) << text;
  }
  for (const char* bad : {"", "5", "m", "-1s", "5 m", "1e3s", "5min"}) {
    EXPECT_THAT(ParseDuration(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(ScenarioTest, FormatDuration) {
  EXPECT_EQ(FormatDuration(250'000), "250ms");
  EXPECT_EQ(FormatDuration(90 * kMinute), "1h30m");
  EXPECT_EQ(FormatDuration(3 * 24 * kHour), "3d");
}

TEST(ScenarioTest, ShippedScenariosAreValid) {
  for (const char* name :
       {"demo", "kubevirtci-2nvme", "rack-5000", "rack-15000", "node-failure", "boot-storm"}) {
    const std::string path = std::string(PDC_SIM_SCENARIO_DIR) + "/" + name + ".yaml";
    absl::StatusOr<Scenario> s = LoadScenarioFile(path);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->name, name);
  }
}

TEST(ScenarioTest, MissingFileIsNotFound) {
  EXPECT_THAT(LoadScenarioFile("/nonexistent/x.yaml"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace pdc::sim
