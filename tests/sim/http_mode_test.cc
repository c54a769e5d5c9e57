// HTTP mode against a real pdc-extender (the built binary, spawned on
// 127.0.0.1 port 0 with a temporary embedded file store): every answer is
// well-formed, pdc over HTTP decides exactly what the in-process pdc
// decides, the sweep's load generator places every pod in both phases, and
// the extender stops cleanly.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/cluster.h"
#include "sim/extender_process.h"
#include "sim/http_report.h"
#include "sim/http_stats.h"
#include "sim/policy.h"
#include "sim/scenario.h"
#include "sim/simulation.h"
#include "sim/sweep.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::sim {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ExtenderProcess> Spawn(const std::vector<DeviceClass>& classes, bool spread) {
  ExtenderProcessOptions o;
  o.binary = PDC_EXTENDER_BIN;
  o.device_classes = classes;
  o.spread = spread;
  o.worker_threads = 2;
  absl::StatusOr<std::unique_ptr<ExtenderProcess>> p = ExtenderProcess::Start(o);
  EXPECT_OK(p.status());
  return p.ok() ? *std::move(p) : nullptr;
}

struct HttpCase {
  const char* scenario;
  bool node_list;
  bool single_node;  // kube-scheduler then never calls prioritize.
};

class HttpModeTest : public ::testing::TestWithParam<HttpCase> {};

TEST_P(HttpModeTest, PdcOverHttpEqualsInProcess) {
  ASSERT_OK_AND_ASSIGN(
      Scenario s,
      LoadScenarioFile(std::string(PDC_SIM_SCENARIO_DIR) + "/" + GetParam().scenario));
  std::unique_ptr<ExtenderProcess> ext =
      Spawn(Cluster::Build(s).DeviceClasses(s), s.scheduler.pdc_spread);
  ASSERT_NE(ext, nullptr);
  EXPECT_THAT(ext->url(), HasSubstr("http://127.0.0.1:"));
  HttpModeOptions http;
  http.url = ext->url();
  http.node_list = GetParam().node_list;
  HttpStats stats;
  RunOptions o;
  o.policies = {"pdc", "pdc-http"};
  o.trace = true;
  o.http = &http;
  o.http_stats = &stats;
  ASSERT_OK_AND_ASSIGN(RunSummary run, RunScenario(s, o));
  ASSERT_OK_AND_ASSIGN(int exit_status, ext->Stop());
  EXPECT_EQ(exit_status, 0);

  EXPECT_EQ(stats.malformed_total(), 0u) << ::testing::PrintToString(stats.malformed_examples());
  ASSERT_EQ(run.policies.size(), 2u);
  const PolicyMetrics& in = run.policies[0];
  const PolicyMetrics& over = run.policies[1];
  EXPECT_GT(in.restarts, 10u);
  EXPECT_EQ(over.same_device, in.same_device);
  EXPECT_EQ(over.trace, in.trace);
  HttpComparison c = CompareHttpWithInProcess(run);
  EXPECT_TRUE(c.identical) << c.text;
  // Every verb kube-scheduler and pdc-node use was exercised and timed.
  std::vector<std::string> verbs;
  for (const VerbSummary& v : stats.Summaries()) verbs.push_back(v.verb);
  for (const char* v : {"filter", "bind", "inventory", "allocations", "handoff", "release"}) {
    EXPECT_THAT(verbs, ::testing::Contains(v));
  }
  if (GetParam().single_node) {
    EXPECT_THAT(verbs, ::testing::Not(::testing::Contains("prioritize")));
  } else {
    EXPECT_THAT(verbs, ::testing::Contains("prioritize"));
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, HttpModeTest,
                         ::testing::Values(HttpCase{"demo.yaml", false, false},
                                           HttpCase{"demo.yaml", true, false},
                                           HttpCase{"kubevirtci-2nvme.yaml", false, true},
                                           HttpCase{"node-failure.yaml", false, false}));

TEST(HttpModeTest, ComparisonSpotsADifference) {
  RunSummary run;
  PolicyMetrics a, b;
  a.policy = "pdc";
  b.policy = "pdc-http";
  a.trace = {"1 vm-1 node-a 0000:3b:00.0"};
  b.trace = {"1 vm-1 node-b 0000:3b:00.0"};
  run.policies = {a, b};
  HttpComparison c = CompareHttpWithInProcess(run);
  EXPECT_FALSE(c.identical);
  EXPECT_THAT(c.text, HasSubstr("node-b"));
}

TEST(SweepTest, SmallStepPlacesEveryPodTwice) {
  std::unique_ptr<ExtenderProcess> ext =
      Spawn({DeviceClass{::pdc::testing::kNvme,
                         {::pdc::testing::QemuNvmeSelector()}}},
            false);
  ASSERT_NE(ext, nullptr);
  SweepOptions o;
  o.pods = 40;
  o.binders = 3;
  // Every node offered (12 nodes are below kube-scheduler's sampling floor
  // of 100 anyway); the pinned restarts of the default are what the
  // 5000- and 10000-node sweeps in bench/README.md run.
  o.percentage = 100;
  ASSERT_OK_AND_ASSIGN(SweepStep step, RunSweepStep(o, ext->url(), 12, "t-"));
  ASSERT_OK_AND_ASSIGN(int exit_status, ext->Stop());
  EXPECT_EQ(exit_status, 0);
  EXPECT_EQ(step.malformed, 0u) << ::testing::PrintToString(step.malformed_examples);
  ASSERT_EQ(step.phases.size(), 2u);
  for (const SweepPhase& p : step.phases) {
    EXPECT_EQ(p.pods_placed, 40) << p.name;
    EXPECT_EQ(p.unplaced, 0) << p.name;
  }
  EXPECT_THAT(FormatSweepTable({step}), HasSubstr("restart"));
}

}  // namespace
}  // namespace pdc::sim

namespace pdc::sim {
namespace {

TEST(ExtenderProcessTest, StartFailuresSayWhy) {
  ExtenderProcessOptions o;
  o.binary = "/nonexistent/pdc-extender";
  EXPECT_THAT(ExtenderProcess::Start(o).status(),
              ::pdc::testing::StatusIs(absl::StatusCode::kNotFound, HasSubstr("not executable")));
  // A program that exits at once instead of listening.
  o.binary = "/bin/false";
  EXPECT_THAT(ExtenderProcess::Start(o).status(),
              ::pdc::testing::StatusIs(absl::StatusCode::kUnavailable,
                                       HasSubstr("exited before listening")));
}

}  // namespace
}  // namespace pdc::sim
