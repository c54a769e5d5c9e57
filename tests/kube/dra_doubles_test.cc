// The resourceclaim controller double (both behaviours) and the DRA
// scheduling double on the kube-apiserver double: what each does to a
// claim's reservedFor and allocation.
#include "tests/kube/dra_objects.h"
#include "tests/kube/kube_test_util.h"
#include "tests/testing/dra_scheduler_double.h"
#include "tests/testing/resourceclaim_controller_double.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::string_view kAllocation =
    R"({"devices":{"results":[{"request":"disk","driver":"pdc.kubevirt.io","pool":"node-a","device":"d0"}]},"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-a"]}]}]}})";

class DraDoublesTest : public KubeDoubleTest {
 protected:
  std::string NewPod(std::string_view name) {
    KubeReply r = Call("POST", Pods(), dra::PodJson(name, "c"));
    EXPECT_EQ(r.status, 201) << r.text;
    return r.Str({"metadata", "uid"});
  }
  void SetPhase(std::string_view pod, std::string_view phase) {
    KubeReply r = Call("GET", Pods(Cat("/", pod)));
    kube::SetString(r.json, {"status", "phase"}, phase, r.json.GetAllocator());
    ASSERT_EQ(Call("PUT", Pods(Cat("/", pod, "/status")), kube::ToJson(r.json)).status, 200);
  }
  // Claim "c", allocated, with the finalizer, reserved for `consumers`.
  void NewClaim(const std::vector<std::string>& consumers) {
    ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("c")).status, 201);
    ASSERT_EQ(Call("PATCH", dra::ClaimPath(ns_, "c"),
                   Cat(R"({"metadata":{"finalizers":[")", kClaimFinalizer, R"("]}})"),
                   "application/merge-patch+json")
                  .status,
              200);
    std::string list;
    for (const std::string& c : consumers) list += (list.empty() ? "" : ",") + c;
    ASSERT_EQ(Call("PATCH", dra::ClaimPath(ns_, "c/status"),
                   Cat(R"({"status":{"allocation":)", kAllocation, R"(,"reservedFor":[)", list,
                       "]}}"),
                   "application/merge-patch+json")
                  .status,
              200);
  }
  KubeReply Claim() { return Call("GET", dra::ClaimPath(ns_, "c")); }
  std::unique_ptr<ResourceClaimControllerDouble> Controller(ClaimControllerVersion v) {
    return std::move(ResourceClaimControllerDouble::Start(Url(), v)).value();
  }
};

class ClaimControllerDoubleTest
    : public DraDoublesTest,
      public ::testing::WithParamInterface<ClaimControllerVersion> {};

TEST_P(ClaimControllerDoubleTest, PrunesGoneReplacedAndDonePodsKeepsLivingOnes) {
  const std::string alive = NewPod("alive");
  const std::string done = NewPod("done");
  SetPhase("done", "Succeeded");
  const std::string replaced_old = "uid-of-an-earlier-pod";
  NewPod("replaced");
  NewClaim({dra::Consumer("", "pods", "alive", alive), dra::Consumer("", "pods", "done", done),
            dra::Consumer("", "pods", "replaced", replaced_old),
            dra::Consumer("", "pods", "deleted", "uid-deleted")});
  auto ctl = Controller(GetParam());
  ResourceClaimControllerDouble::Outcome o = ctl->SyncClaim(ns_, "c");
  ASSERT_OK(o.status);
  EXPECT_EQ(o.pruned, 3);
  EXPECT_FALSE(o.deallocated);
  KubeReply c = Claim();
  EXPECT_THAT(dra::ReservedFor(c.json), ElementsAre("pods/alive"));
  EXPECT_NE(kube::Find(c.json, {"status", "allocation"}), nullptr);
}

TEST_P(ClaimControllerDoubleTest, DeallocatesWhenItsOwnPruningEmptiesTheList) {
  NewClaim({dra::Consumer("", "pods", "gone", "uid-gone")});
  auto ctl = Controller(GetParam());
  ResourceClaimControllerDouble::Outcome o = ctl->SyncClaim(ns_, "c");
  ASSERT_OK(o.status);
  EXPECT_TRUE(o.deallocated);
  KubeReply c = Claim();
  EXPECT_EQ(kube::Find(c.json, {"status", "allocation"}), nullptr) << c.text;
  EXPECT_THAT(kube::GetStrings(c.json, {"metadata", "finalizers"}), IsEmpty());
}

TEST_P(ClaimControllerDoubleTest, LeavesAnUnreservedAllocationAlone) {
  NewClaim({});
  auto ctl = Controller(GetParam());
  ASSERT_OK(ctl->SyncClaim(ns_, "c").status);
  EXPECT_NE(kube::Find(Claim().json, {"status", "allocation"}), nullptr);
}

TEST_P(ClaimControllerDoubleTest, AVmEntryStopsOrIsKept) {
  NewClaim({dra::Consumer("kubevirt.io", "virtualmachines", "vm", "uid-vm"),
            dra::Consumer("", "pods", "gone", "uid-gone")});
  auto ctl = Controller(GetParam());
  ResourceClaimControllerDouble::Outcome o = ctl->SyncClaim(ns_, "c");
  KubeReply c = Claim();
  EXPECT_NE(kube::Find(c.json, {"status", "allocation"}), nullptr);
  if (GetParam() == ClaimControllerVersion::kVersion134) {
    EXPECT_THAT(o.status.message(), HasSubstr("unsupported ReservedFor entry"));
    EXPECT_THAT(dra::ReservedFor(c.json),
                ElementsAre("virtualmachines/vm", "pods/gone"));
  } else {
    ASSERT_OK(o.status);
    EXPECT_EQ(o.pruned, 1);
    EXPECT_FALSE(o.deallocated);
    EXPECT_THAT(dra::ReservedFor(c.json), ElementsAre("virtualmachines/vm"));
  }
}

TEST_P(ClaimControllerDoubleTest, DeletedUnusedClaimLosesAllocationAndFinalizer) {
  NewClaim({});
  ASSERT_EQ(Call("DELETE", dra::ClaimPath(ns_, "c")).status, 200);
  auto ctl = Controller(GetParam());
  ASSERT_OK(ctl->SyncClaim(ns_, "c").status);
  EXPECT_EQ(Claim().status, 404);
}

INSTANTIATE_TEST_SUITE_P(Versions, ClaimControllerDoubleTest,
                         ::testing::Values(ClaimControllerVersion::kVersion134,
                                           ClaimControllerVersion::kVersion136),
                         [](const auto& info) {
                           return info.param == ClaimControllerVersion::kVersion134
                                      ? "v134"
                                      : "v136";
                         });

class DraSchedulerDoubleTest : public DraDoublesTest {
 protected:
  std::unique_ptr<DraSchedulerDouble> Scheduler() {
    return std::move(DraSchedulerDouble::Start(
                         Url(), {{std::string(dra::kClass), std::string(dra::kDriver)}},
                         // Pools of this test's own (tests may share the double).
                         {{std::string(dra::kDriver), Cat(ns_, "-a"), "node-a", {"d0"}},
                          {std::string(dra::kDriver), Cat(ns_, "-b"), "node-b", {"d0"}}}))
        .value();
  }
};

TEST_F(DraSchedulerDoubleTest, AllocatesReservesAndBindsThenReusesTheAllocation) {
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("c")).status, 201);
  NewPod("p1");
  auto s = Scheduler();
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement p,
                       s->Schedule(ns_, "p1", "c", {"node-b", "node-a"}));
  EXPECT_TRUE(p.allocated_now);
  KubeReply c = Claim();
  std::vector<AllocatedDevice> devs = AllocatedDevices(c.json);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].node, p.node);
  EXPECT_THAT(dra::ReservedFor(c.json), ElementsAre("pods/p1"));
  EXPECT_THAT(kube::GetStrings(c.json, {"metadata", "finalizers"}), ElementsAre(kClaimFinalizer));
  EXPECT_EQ(Call("GET", Pods("/p1")).Str({"spec", "nodeName"}), p.node);
  // A second pod of the same claim: same device, same node, appended.
  NewPod("p2");
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement p2,
                       s->Schedule(ns_, "p2", "c", {"node-a", "node-b"}));
  EXPECT_FALSE(p2.allocated_now);
  EXPECT_EQ(p2.node, p.node);
  c = Claim();
  EXPECT_EQ(AllocatedDevices(c.json), devs);
  EXPECT_THAT(dra::ReservedFor(c.json), ElementsAre("pods/p1", "pods/p2"));
}

TEST_F(DraSchedulerDoubleTest, ADeviceInAnotherClaimIsNotFree) {
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("c")).status, 201);
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("c2")).status, 201);
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("c3")).status, 201);
  NewPod("p1");
  ASSERT_EQ(Call("POST", Pods(), dra::PodJson("p2", "c2")).status, 201);
  ASSERT_EQ(Call("POST", Pods(), dra::PodJson("p3", "c3")).status, 201);
  auto s = Scheduler();
  ASSERT_OK_AND_ASSIGN(auto a, s->Schedule(ns_, "p1", "c", {"node-a"}));
  EXPECT_EQ(a.node, "node-a");
  ASSERT_OK_AND_ASSIGN(auto b, s->Schedule(ns_, "p2", "c2", {"node-a", "node-b"}));
  EXPECT_EQ(b.node, "node-b");
  EXPECT_TRUE(absl::IsResourceExhausted(
      s->Schedule(ns_, "p3", "c3", {"node-a", "node-b"}).status()));
}

TEST_F(DraSchedulerDoubleTest, PostFilterDeallocatesOnlyWhatNobodyElseReserved) {
  NewClaim({dra::Consumer("kubevirt.io", "virtualmachines", "vm", "uid-vm")});
  NewPod("p1");
  auto s = Scheduler();
  bool deallocated = true;
  absl::StatusOr<DraSchedulerDouble::Placement> p =
      s->Schedule(ns_, "p1", "c", {"node-b"}, &deallocated);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  EXPECT_FALSE(deallocated);
  EXPECT_NE(kube::Find(Claim().json, {"status", "allocation"}), nullptr);
  // Without the VM entry the claim is given up.
  ASSERT_EQ(Call("PATCH", dra::ClaimPath(ns_, "c/status"), R"({"status":{"reservedFor":[]}})",
                 "application/merge-patch+json")
                .status,
            200);
  p = s->Schedule(ns_, "p1", "c", {"node-b"}, &deallocated);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  EXPECT_TRUE(deallocated);
  EXPECT_EQ(kube::Find(Claim().json, {"status", "allocation"}), nullptr);
}

TEST_F(DraSchedulerDoubleTest, RefusesSelectorsItCannotEvaluate) {
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_),
                 R"({"metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":"nvme.pdc.kubevirt.io","selectors":[{"cel":{"expression":"true"}}]}}]}}})")
                .status,
            201);
  NewPod("p1");
  EXPECT_TRUE(absl::IsUnimplemented(Scheduler()->Schedule(ns_, "p1", "c", {"node-a"}).status()));
}

}  // namespace
}  // namespace pdc::testing
