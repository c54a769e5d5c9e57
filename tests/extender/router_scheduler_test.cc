// The kube-scheduler verbs through the Router, no sockets: requests shaped
// exactly as kube-scheduler marshals them for a real virt-launcher pod, in
// both nodeCacheCapable modes, answers compared with golden JSON.
#include <string>
#include <vector>

#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kNotReportingC[] =
    R"("node-c":"no pdc node driver has reported devices from this node")";
constexpr char kBoundToB[] =
    "claim default/vm1-nvme is bound to node node-b (a persistent device claim "
    "keeps its node)";

class RouterSchedulerTest : public ExtenderFixture {
 protected:
  // filter + prioritize + bind of `vm` with pod `uid` on `node`.
  void Schedule(const std::string& vm, const std::string& uid,
                const std::string& node) {
    const std::string pod = VirtLauncherPod(vm, uid);
    ASSERT_EQ(Post("/scheduler/filter", NamesArgs(pod, {"node-a", "node-b"})).status, 200);
    HttpResponse b = Post("/scheduler/bind", BindArgs(vm, uid, node));
    ASSERT_EQ(b.status, 200);
    ASSERT_EQ(b.body, R"({"Error":""})");
  }
};

TEST_F(RouterSchedulerTest, FilterNodeNamesGolden) {
  TwoNodes();
  HttpResponse r = Post("/scheduler/filter",
                        NamesArgs(VirtLauncherPod("vm1", "uid-1"),
                                  {"node-a", "node-b", "node-c"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, absl::StrCat(
                        R"({"Nodes":null,"NodeNames":["node-a","node-b"],"FailedNodes":{)",
                        kNotReportingC,
                        R"(},"FailedAndUnresolvableNodes":{},"Error":""})"));
}

TEST_F(RouterSchedulerTest, FilterNodeListEchoesInputNodes) {
  TwoNodes();
  HttpResponse r = Post("/scheduler/filter",
                        ListArgs(VirtLauncherPod("vm1", "uid-1"),
                                 {"node-a", "node-c"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, absl::StrCat(R"({"Nodes":{"metadata":{},"items":[)",
                                 NodeObject("node-a"),
                                 R"(]},"NodeNames":null,"FailedNodes":{)",
                                 kNotReportingC,
                                 R"(},"FailedAndUnresolvableNodes":{},"Error":""})"));
}

TEST_F(RouterSchedulerTest, PrioritizeGolden) {
  TwoNodes();
  HttpResponse r = Post("/scheduler/prioritize",
                        NamesArgs(VirtLauncherPod("vm1", "uid-1"),
                                  {"node-a", "node-b", "node-c"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body,
            R"([{"Host":"node-a","Score":6},{"Host":"node-b","Score":6},{"Host":"node-c","Score":0}])");
}

TEST_F(RouterSchedulerTest, RestartedVmOnlyFitsItsNodeInBothModes) {
  TwoNodes();
  Schedule("vm1", "uid-1", "node-b");
  // The VM stops and starts: a new virt-launcher pod with a new UID.
  const std::string pod2 = VirtLauncherPod("vm1", "uid-2");
  const std::string unresolvable_a =
      absl::StrCat(R"("node-a":")", kBoundToB, "\"");
  HttpResponse names = Post("/scheduler/filter", NamesArgs(pod2, {"node-a", "node-b"}));
  EXPECT_EQ(names.body,
            absl::StrCat(R"({"Nodes":null,"NodeNames":["node-b"],"FailedNodes":{},)",
                         R"("FailedAndUnresolvableNodes":{)", unresolvable_a,
                         R"(},"Error":""})"));
  HttpResponse list = Post("/scheduler/filter", ListArgs(pod2, {"node-a", "node-b"}));
  EXPECT_EQ(list.body,
            absl::StrCat(R"({"Nodes":{"metadata":{},"items":[)", NodeObject("node-b"),
                         R"(]},"NodeNames":null,"FailedNodes":{},)",
                         R"("FailedAndUnresolvableNodes":{)", unresolvable_a,
                         R"(},"Error":""})"));
  HttpResponse prio = Post("/scheduler/prioritize", NamesArgs(pod2, {"node-a", "node-b"}));
  EXPECT_EQ(prio.body,
            R"([{"Host":"node-a","Score":0},{"Host":"node-b","Score":10}])");
  HttpResponse bind = Post("/scheduler/bind", BindArgs("vm1", "uid-2", "node-b"));
  EXPECT_EQ(bind.body, R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  ASSERT_TRUE(c.status.reserved_for.has_value());
  EXPECT_EQ(c.status.reserved_for->pod_uid, "uid-2");
}

TEST_F(RouterSchedulerTest, BoundClaimSurvivesAllocatorRestart) {
  TwoNodes();
  Schedule("vm1", "uid-1", "node-b");
  Open();  // Recover from the same store.
  // Until the drivers report again, a restarted extender cannot vouch for
  // the node, but the claim already rules node-a out for good.
  HttpResponse before = Post("/scheduler/filter",
                             NamesArgs(VirtLauncherPod("vm1", "uid-3"), {"node-a", "node-b"}));
  EXPECT_THAT(before.body, HasSubstr("has not reported since pdc-extender started"));
  EXPECT_THAT(before.body, HasSubstr(kBoundToB));
  TwoNodes();  // Heartbeats.
  HttpResponse r = Post("/scheduler/filter",
                        NamesArgs(VirtLauncherPod("vm1", "uid-3"), {"node-a", "node-b"}));
  EXPECT_THAT(r.body, HasSubstr(R"("NodeNames":["node-b"])"));
  EXPECT_THAT(r.body, HasSubstr(kBoundToB));
}

TEST_F(RouterSchedulerTest, LowerCaseKeysAreReadAndCapitalisedOnesWritten) {
  TwoNodes();
  const std::string pod = VirtLauncherPod("vm1", "uid-1");
  HttpResponse lower = Post(
      "/scheduler/filter",
      absl::StrCat(R"({"pod":)", pod, R"(,"nodes":null,"nodenames":["node-a","node-c"]})"));
  EXPECT_EQ(lower.body, absl::StrCat(R"({"Nodes":null,"NodeNames":["node-a"],"FailedNodes":{)",
                                     kNotReportingC,
                                     R"(},"FailedAndUnresolvableNodes":{},"Error":""})"));
  HttpResponse bind = Post(
      "/scheduler/bind",
      R"({"podName":"virt-launcher-vm1-x7k2p","podNamespace":"default","podUID":"uid-1","node":"node-a"})");
  EXPECT_EQ(bind.body, R"({"Error":""})");
}

TEST_F(RouterSchedulerTest, PodWithoutManagedDevicesPassesThrough) {
  TwoNodes();
  const uint64_t before = allocator_->revision();
  const std::string pod = VirtLauncherPod("plain", "uid-p", /*nvme=*/0);
  HttpResponse r = Post("/scheduler/filter", NamesArgs(pod, {"node-a", "node-x"}));
  EXPECT_EQ(r.body,
            R"({"Nodes":null,"NodeNames":["node-a","node-x"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})");
  HttpResponse p = Post("/scheduler/prioritize", NamesArgs(pod, {"node-a", "node-x"}));
  EXPECT_EQ(p.body, R"([{"Host":"node-a","Score":0},{"Host":"node-x","Score":0}])");
  HttpResponse b = Post("/scheduler/bind", BindArgs("plain", "uid-p", "node-x"));
  EXPECT_EQ(b.body, R"({"Error":""})");
  EXPECT_EQ(allocator_->revision(), before);
}

TEST_F(RouterSchedulerTest, InsufficientIsUnresolvableAndPreemptKeepsOnlyHelpfulNodes) {
  TwoNodes();
  Schedule("vm1", "uid-1", "node-b");
  const std::string pod = VirtLauncherPod("vm3", "uid-3", 2);
  HttpResponse f = Post("/scheduler/filter", NamesArgs(pod, {"node-a", "node-b"}));
  EXPECT_EQ(f.body,
            R"({"Nodes":null,"NodeNames":["node-a"],"FailedNodes":{},"FailedAndUnresolvableNodes":{"node-b":"insufficient free devices.kubevirt.io/nvme: want 2, free 1"},"Error":""})");
  HttpResponse meta = Post(
      "/scheduler/preempt",
      absl::StrCat(R"({"Pod":)", pod,
                   R"(,"NodeNameToVictims":null,"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"v1"}],"NumPDBViolations":0},"node-b":{"Pods":[{"UID":"v2"}],"NumPDBViolations":1}}})"));
  EXPECT_EQ(meta.body,
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"v1"}],"NumPDBViolations":0}}})");
  // Not nodeCacheCapable: full victim pods in, meta victims out.
  HttpResponse full = Post(
      "/scheduler/preempt",
      absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNameToVictims":{"node-a":{"Pods":[)",
                   VirtLauncherPod("victim", "uid-victim", 0),
                   R"(],"NumPDBViolations":2}},"NodeNameToMetaVictims":null})"));
  EXPECT_EQ(full.body,
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"uid-victim"}],"NumPDBViolations":2}}})");
}

TEST_F(RouterSchedulerTest, StaleNodeIsFailedNotUnresolvable) {
  TwoNodes();
  clock_.Advance(absl::Minutes(5));
  HttpResponse r = Post("/scheduler/filter",
                        NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}));
  EXPECT_EQ(r.body,
            R"({"Nodes":null,"NodeNames":[],"FailedNodes":{"node-a":"the pdc node driver on this node has not reported for more than 1m"},"FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST_F(RouterSchedulerTest, ExplicitClaimAnnotation) {
  TwoNodes();
  ClaimSpec spec;
  spec.resource_name = kNvme;
  spec.node = "node-a";
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, spec));
  const std::string pod = VirtLauncherPod(
      "vm1", "uid-1", 1, R"(,"pdc.kubevirt.io/claims":"data")");
  HttpResponse f = Post("/scheduler/filter", NamesArgs(pod, {"node-a", "node-b"}));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "data"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);
  EXPECT_EQ(c.status.node, "node-a");
}

TEST_F(RouterSchedulerTest, InvalidClaimNameInAnnotationIsAnErrorTheUserSees) {
  TwoNodes();
  const std::string pod = VirtLauncherPod(
      "vm1", "uid-1", 1, R"(,"pdc.kubevirt.io/claims":"Data_1")");
  HttpResponse f = Post("/scheduler/filter", NamesArgs(pod, {"node-a"}));
  EXPECT_EQ(f.status, 200);
  EXPECT_THAT(f.body, HasSubstr(R"("Nodes":null,"NodeNames":null)"));
  EXPECT_THAT(f.body, HasSubstr(R"(\"Data_1\" is not a valid name)"));
}

TEST_F(RouterSchedulerTest, BindWithoutFilterOrKubernetesApiSaysWhy) {
  TwoNodes();
  HttpResponse b = Post("/scheduler/bind", BindArgs("vm9", "uid-9", "node-a"));
  EXPECT_EQ(b.status, 200);
  EXPECT_THAT(b.body, HasSubstr("no Kubernetes API is configured"));
  EXPECT_THAT(b.body, HasSubstr("default/virt-launcher-vm9-x7k2p"));
}

TEST_F(RouterSchedulerTest, LosingBindRaceIsAnError) {
  Report("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0")});
  const std::string p1 = VirtLauncherPod("vm1", "uid-1");
  const std::string p2 = VirtLauncherPod("vm2", "uid-2");
  // Both pass filter while the node has one free drive.
  EXPECT_THAT(Post("/scheduler/filter", NamesArgs(p1, {"node-a"})).body,
              HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_THAT(Post("/scheduler/filter", NamesArgs(p2, {"node-a"})).body,
              HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  HttpResponse lost = Post("/scheduler/bind", BindArgs("vm2", "uid-2", "node-a"));
  EXPECT_EQ(lost.status, 200);
  EXPECT_THAT(lost.body, HasSubstr(R"({"Error":")"));
  EXPECT_THAT(lost.body, ::testing::Not(HasSubstr(R"({"Error":""})")));
}

// Preempt answers follow kube-scheduler's contract (extender.go
// ProcessPreemption / preemption.go callExtenders): only nodes and victims
// it sent, every node kept with at least one victim and its victims in the
// order sent, one entry per node, nodes in name order.
TEST_F(RouterSchedulerTest, PreemptKeepsVictimsAsSentInNodeNameOrder) {
  TwoNodes();
  Report("node-c", {NvmeDevice("0000:3b:00.0", 12, 0, "SNC0")});
  const std::string pod = VirtLauncherPod("vm1", "uid-1");
  HttpResponse r = Post(
      "/scheduler/preempt",
      absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNameToVictims":null,"NodeNameToMetaVictims":{)",
                   R"("node-c":{"Pods":[{"UID":"c2"},{"UID":"c1"},{"UID":"c2"}],"NumPDBViolations":1},)",
                   R"("node-a":{"Pods":[{"UID":"old"}],"NumPDBViolations":0},)",
                   R"("node-b":{"Pods":[],"NumPDBViolations":0},)",
                   R"("node-x":null,)",
                   R"("node-a":{"Pods":[{"UID":"a9"},{"UID":"a1"}],"NumPDBViolations":3}}})"));
  EXPECT_EQ(r.status, 200);
  // node-a: the last of its two entries (Go's map decoding); node-b and
  // node-x: no victims, dropped (kube-scheduler rejects a node without);
  // node-c: its victims in the order sent, the repeat dropped.
  EXPECT_EQ(r.body,
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"a9"},{"UID":"a1"}],"NumPDBViolations":3},)"
            R"("node-c":{"Pods":[{"UID":"c2"},{"UID":"c1"}],"NumPDBViolations":1}}})");
}

TEST_F(RouterSchedulerTest, PreemptAnswerDoesNotDependOnInputOrder) {
  TwoNodes();
  const std::string pod = VirtLauncherPod("vm1", "uid-1");
  auto preempt = [&](const std::string& victims) {
    return Post("/scheduler/preempt",
                absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNameToMetaVictims":{)", victims, "}}"))
        .body;
  };
  const std::string ab = preempt(
      R"("node-a":{"Pods":[{"UID":"1"}],"NumPDBViolations":0},"node-b":{"Pods":[{"UID":"2"}],"NumPDBViolations":0})");
  const std::string ba = preempt(
      R"("node-b":{"Pods":[{"UID":"2"}],"NumPDBViolations":0},"node-a":{"Pods":[{"UID":"1"}],"NumPDBViolations":0})");
  EXPECT_EQ(ab, ba);
  EXPECT_EQ(ab,
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"1"}],"NumPDBViolations":0},"node-b":{"Pods":[{"UID":"2"}],"NumPDBViolations":0}}})");
}

TEST_F(RouterSchedulerTest, PreemptForAClaimHeldByAnotherVmNeedsThatVmsPodAmongVictims) {
  TwoNodes();
  Schedule("vm1", "uid-1", "node-b");
  // vm2 names vm1's claim explicitly; vm1's pod uid-1 holds it on node-b.
  const std::string pod = VirtLauncherPod("vm2", "uid-2", 1,
                                          R"(,"pdc.kubevirt.io/claims":"vm1-nvme")");
  HttpResponse f = Post("/scheduler/filter", NamesArgs(pod, {"node-b"}));
  ASSERT_THAT(f.body, HasSubstr("is in use by VM default/vm1"));
  auto preempt = [&](const std::string& victims) {
    return Post("/scheduler/preempt",
                absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNameToMetaVictims":{"node-b":{"Pods":[)",
                             victims, R"(],"NumPDBViolations":0}}})"))
        .body;
  };
  // Evicting others on node-b cannot free the claim.
  EXPECT_EQ(preempt(R"({"UID":"someone-else"})"), R"({"NodeNameToMetaVictims":{}})");
  // With vm1's pod among the victims the node stays, victims untouched.
  EXPECT_EQ(preempt(R"({"UID":"someone-else"},{"UID":"uid-1"})"),
            R"({"NodeNameToMetaVictims":{"node-b":{"Pods":[{"UID":"someone-else"},{"UID":"uid-1"}],"NumPDBViolations":0}}})");
}

TEST_F(RouterSchedulerTest, PreemptForAPodWithoutDevicesKeepsEveryNodeWithVictims) {
  TwoNodes();
  const std::string pod = VirtLauncherPod("plain", "uid-p", /*nvme=*/0);
  HttpResponse r = Post(
      "/scheduler/preempt",
      absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNameToMetaVictims":{)",
                   R"("node-z":{"Pods":[{"UID":"z"}],"NumPDBViolations":0},)",
                   R"("node-y":{"Pods":null,"NumPDBViolations":0}}})"));
  EXPECT_EQ(r.body,
            R"({"NodeNameToMetaVictims":{"node-z":{"Pods":[{"UID":"z"}],"NumPDBViolations":0}}})");
}

struct BadInput {
  std::string name;
  std::string path;
  std::string body;
  int status;
  std::string field;
  std::string message;
};

class RouterBadInputTest : public ExtenderFixture,
                           public ::testing::WithParamInterface<BadInput> {};

TEST_P(RouterBadInputTest, AnsweredWithAClearError) {
  const BadInput& t = GetParam();
  HttpResponse r = Post(t.path, t.body);
  EXPECT_EQ(r.status, t.status) << r.body;
  EXPECT_THAT(r.body, HasSubstr(absl::StrCat(R"("field":")", t.field, "\"")));
  EXPECT_THAT(r.body, HasSubstr(t.message));
}

const std::string kVm1Pod = VirtLauncherPod("vm1", "uid-1");

INSTANTIATE_TEST_SUITE_P(
    Cases, RouterBadInputTest,
    ::testing::Values(
        BadInput{"Malformed", "/scheduler/filter", R"({"Pod": {)", 400, "",
                 "malformed JSON"},
        BadInput{"Empty", "/scheduler/filter", "", 400, "", "malformed JSON"},
        BadInput{"TrailingGarbage", "/scheduler/filter",
                 R"({"Pod":{},"NodeNames":[]} x)", 400, "", "malformed JSON"},
        BadInput{"NotAnObject", "/scheduler/prioritize", "[1,2]", 400, "",
                 "must be an object"},
        BadInput{"MissingPod", "/scheduler/filter",
                 R"({"Pod":null,"Nodes":null,"NodeNames":["a"]})", 400, "Pod",
                 "is required"},
        BadInput{"NodeNamesObject", "/scheduler/filter",
                 absl::StrCat(R"({"Pod":)", kVm1Pod, R"(,"NodeNames":{}})"), 400,
                 "NodeNames", "must be an array"},
        BadInput{"NodeNameNumber", "/scheduler/filter",
                 absl::StrCat(R"({"Pod":)", kVm1Pod, R"(,"NodeNames":["a",5]})"), 400,
                 "NodeNames[1]", "must be a string"},
        BadInput{"NoNodes", "/scheduler/filter",
                 absl::StrCat(R"({"Pod":)", kVm1Pod, R"(,"Nodes":null,"NodeNames":null})"),
                 400, "NodeNames", "either NodeNames or Nodes"},
        BadInput{"NodeWithoutName", "/scheduler/filter",
                 absl::StrCat(R"({"Pod":)", kVm1Pod, R"(,"Nodes":{"items":[{"metadata":{}}]}})"),
                 400, "Nodes.items[0].metadata.name", "is required"},
        BadInput{"PodNameNumber", "/scheduler/filter",
                 R"({"Pod":{"metadata":{"name":7}},"NodeNames":[]})", 400,
                 "Pod.metadata.name", "must be a string"},
        BadInput{"LabelsArray", "/scheduler/filter",
                 R"({"Pod":{"metadata":{"name":"p","labels":[]}},"NodeNames":[]})",
                 400, "Pod.metadata.labels", "must be an object"},
        BadInput{"QuantityObject", "/scheduler/filter",
                 R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"requests":{"devices.kubevirt.io/nvme":{}}}}]}},"NodeNames":[]})",
                 400,
                 R"(Pod.spec.containers[0].resources.requests[\"devices.kubevirt.io/nvme\"])",
                 "quantity"},
        BadInput{"BindMissingNode", "/scheduler/bind",
                 R"({"PodName":"p","PodNamespace":"default","PodUID":"u"})", 400,
                 "Node", "is required"},
        BadInput{"BindUidNumber", "/scheduler/bind",
                 R"({"PodName":"p","PodNamespace":"default","PodUID":5,"Node":"n"})",
                 400, "PodUID", "must be a string"},
        BadInput{"PreemptVictimsArray", "/scheduler/preempt",
                 absl::StrCat(R"({"Pod":)", kVm1Pod, R"(,"NodeNameToMetaVictims":[]})"),
                 400, "NodeNameToMetaVictims", "must be an object"},
        BadInput{"UnknownVerb", "/scheduler/schedule", "{}", 404, "",
                 "no such endpoint: POST /scheduler/schedule"}),
    [](const ::testing::TestParamInfo<BadInput>& i) { return i.param.name; });

TEST_F(RouterSchedulerTest, VerbsOnlyAcceptPost) {
  HttpResponse r = Call("GET", "/scheduler/filter");
  EXPECT_EQ(r.status, 405);
  EXPECT_THAT(r.body, HasSubstr("method GET is not allowed"));
}

TEST_F(RouterSchedulerTest, BareVerbPathsWorkToo) {
  TwoNodes();
  HttpResponse r = Post("/filter", NamesArgs(VirtLauncherPod("vm1", "u"), {"node-a"}));
  EXPECT_THAT(r.body, HasSubstr(R"("NodeNames":["node-a"])"));
}

}  // namespace
}  // namespace pdc::extender::testing
