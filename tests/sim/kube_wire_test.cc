// pdc-sim's kube-scheduler requests must read back through the extender's own
// decoders exactly as kube-scheduler's would, and answers kube-scheduler
// would reject must be caught.
#include "sim/kube_wire.h"

#include <string>
#include <vector>

#include "api/json_util.h"
#include "api/scheduler_wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::sim {
namespace {

namespace json = api::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::pdc::testing::StatusIs;

PodInfo SamplePod() {
  PodInfo p;
  p.ns = "prod";
  p.name = "virt-launcher-db-01-x7k2p";
  p.uid = "5d0c7e1e-uid";
  p.vm = "db-01";
  p.vmi_uid = "vmi-uid-1";
  p.resource = "devices.kubevirt.io/nvme";
  p.device_count = 2;
  p.cpu = 8;
  p.memory_gib = 32;
  p.claims = {"db-01-data"};
  return p;
}

TEST(KubeWireTest, PodReadsBackAsTheSchedulingRequest) {
  const std::string pod = VirtLauncherPodJson(SamplePod());
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(pod, &doc));
  ASSERT_OK_AND_ASSIGN(api::PodRequest r,
                       api::PodToRequest(doc, {"devices.kubevirt.io/nvme"}));
  EXPECT_FALSE(r.pass_through);
  EXPECT_EQ(r.request.ns, "prod");
  EXPECT_EQ(r.request.vm, "db-01");
  EXPECT_EQ(r.request.pod_uid, "5d0c7e1e-uid");
  EXPECT_THAT(r.request.claim_names, ElementsAre("db-01-data"));
  // kvm/tun/vhost-net are not managed: ignored; the device count is read
  // from requests (and limits).
  EXPECT_THAT(r.request.resources, ElementsAre(Pair("devices.kubevirt.io/nvme", 2)));
  // KubeVirt's markers are present for anything that reads them.
  EXPECT_THAT(pod, HasSubstr(R"("kubevirt.io":"virt-launcher")"));
  EXPECT_THAT(pod, HasSubstr(R"("kind":"VirtualMachineInstance")"));
  EXPECT_THAT(pod, HasSubstr(R"("name":"compute")"));
}

TEST(KubeWireTest, NodeNamesModeIsWhatKubeSchedulerSends) {
  const std::vector<std::string_view> names = {"node-a", "node-b"};
  const std::string args = ExtenderArgsJson(VirtLauncherPodJson(SamplePod()), names);
  EXPECT_THAT(args, HasSubstr(R"(,"Nodes":null,"NodeNames":["node-a","node-b"]})"));
  EXPECT_EQ(args.rfind("{\"Pod\":{", 0), 0u);
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(args, &doc));
  ASSERT_OK_AND_ASSIGN(api::ExtenderArgs a, api::ReadExtenderArgs(doc));
  EXPECT_FALSE(a.node_list_mode);
  EXPECT_THAT(a.node_names, ElementsAre("node-a", "node-b"));
}

TEST(KubeWireTest, NodeListModeCarriesFullNodes) {
  const std::string a = NodeJson({"node-a", 64, 256, "devices.kubevirt.io/nvme", 4});
  const std::string b = NodeJson({"node-b", 64, 256, "devices.kubevirt.io/nvme", 4});
  const std::string args = ExtenderArgsNodeListJson(VirtLauncherPodJson(SamplePod()), {&a, &b});
  EXPECT_THAT(args, HasSubstr(R"("NodeNames":null})"));
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(args, &doc));
  ASSERT_OK_AND_ASSIGN(api::ExtenderArgs parsed, api::ReadExtenderArgs(doc));
  EXPECT_TRUE(parsed.node_list_mode);
  EXPECT_THAT(parsed.node_names, ElementsAre("node-a", "node-b"));
}

TEST(KubeWireTest, BindingArgsHaveGoFieldNames) {
  const std::string b = BindingArgsJson("pod-1", "prod", "uid-1", "node-a");
  EXPECT_EQ(b, R"({"PodName":"pod-1","PodNamespace":"prod","PodUID":"uid-1","Node":"node-a"})");
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(b, &doc));
  ASSERT_OK_AND_ASSIGN(api::BindingArgs args, api::ReadBindingArgs(doc));
  EXPECT_EQ(args.node, "node-a");
}

TEST(KubeWireTest, FilterAnswerAccepted) {
  const std::vector<std::string_view> offered = {"a", "b", "c"};
  ASSERT_OK_AND_ASSIGN(
      FilterAnswer f,
      ParseFilterAnswer(R"({"Nodes":null,"NodeNames":["c","a"],"FailedNodes":{"b":"busy"},)"
                        R"("FailedAndUnresolvableNodes":{},"Error":""})",
                        offered, false));
  EXPECT_THAT(f.passed, ElementsAre(2u, 0u));
  EXPECT_THAT(f.failed, ElementsAre(1u));
  EXPECT_THAT(f.reasons, ElementsAre("busy"));
}

TEST(KubeWireTest, MalformedFilterAnswersRejected) {
  const std::vector<std::string_view> offered = {"a", "b"};
  struct Case {
    const char* body;
    const char* why;
  };
  const Case cases[] = {
      {R"({"NodeNames":["a","x"],"FailedNodes":{"b":"no"}})", "was not offered"},
      {R"({"NodeNames":["a"],"FailedNodes":{"a":"no","b":"no"}})", "more than one outcome"},
      {R"({"NodeNames":["a"]})", "has no outcome"},
      {R"({"NodeNames":"a"})", "not an array"},
      {R"({"Nodes":{"items":[]},"NodeNames":["a","b"]})", "must be null"},
      {R"({"NodeNames":["a"],"FailedNodes":{"b":7}})", "not a string"},
      {R"([1,2])", "not an object"},
      {R"({"NodeNames":["a","b"]} x)", "malformed answer"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<FilterAnswer> f = ParseFilterAnswer(c.body, offered, false);
    EXPECT_THAT(f.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.why)))
        << c.body;
  }
}

TEST(KubeWireTest, PriorityAnswerMustScoreEachOfferedNodeOnce) {
  const std::vector<std::string_view> offered = {"a", "b"};
  ASSERT_OK_AND_ASSIGN(std::vector<int> s,
                       ParsePriorityAnswer(R"([{"Host":"b","Score":3},{"Host":"a","Score":10}])",
                                           offered));
  EXPECT_THAT(s, ElementsAre(10, 3));
  EXPECT_FALSE(ParsePriorityAnswer(R"([{"Host":"a","Score":1}])", offered).ok());
  EXPECT_FALSE(
      ParsePriorityAnswer(R"([{"Host":"a","Score":1},{"Host":"a","Score":2}])", offered).ok());
  EXPECT_FALSE(
      ParsePriorityAnswer(R"([{"Host":"a","Score":11},{"Host":"b","Score":2}])", offered).ok());
}

TEST(KubeWireTest, BindAnswer) {
  ASSERT_OK_AND_ASSIGN(std::string ok, ParseBindAnswer(R"({"Error":""})"));
  EXPECT_EQ(ok, "");
  ASSERT_OK_AND_ASSIGN(std::string taken, ParseBindAnswer(R"({"Error":"taken"})"));
  EXPECT_EQ(taken, "taken");
  EXPECT_FALSE(ParseBindAnswer(R"({"Error":3})").ok());
  EXPECT_FALSE(ParseBindAnswer("nope").ok());
}

}  // namespace
}  // namespace pdc::sim
