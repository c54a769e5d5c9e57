// One object's refusal fails that object's write only: kube-apiserver
// refusing a claim object's write (403 from RBAC or an admission plugin,
// 422) refuses the bind that needed it, with the apiserver's reason, and
// leaves the store healthy for every other claim; a refused write outside a
// bind is retried later and told in an Event. Against the kube-apiserver
// double's refusals (tests/testing/kube_admission.h) on a real etcd, the
// invariants (tests/kube/claim_invariants.h) checked after every step.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/kube/claim_invariants.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kRefusalsBound[] = R"({"Error":""})";

class ClaimRefusalsOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    home_ns_ = ns_;
    other_ns_ = absl::StrCat(ns_, "-b");
    invariants_ = std::make_unique<ClaimInvariants>(client_.get(), ns_);
    other_invariants_ = std::make_unique<ClaimInvariants>(client_.get(), other_ns_);
  }
  void TearDown() override {
    if (api_ != nullptr) api_->admission().Clear();
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    ns_ = other_ns_;
    DeleteAllClaims();
    ns_ = home_ns_;
    DeleteAllClaims();
  }

  void Step(const std::string& step) {
    EXPECT_THAT(invariants_->Check(), IsEmpty()) << "after step: " << step;
    EXPECT_THAT(other_invariants_->Check(), IsEmpty()) << "after step: " << step;
  }
  // Runs `f` with the fixture's namespace set to `ns`.
  template <typename F>
  void In(const std::string& ns, F f) {
    ns_ = ns;
    f();
    ns_ = home_ns_;
  }
  void StartExtenderForRefusals() {
    // No pdc-node confirms hand-offs here: the gate would refuse every VM
    // after the first.
    configure_ = [](PdcConfig* c) { c->extender.allocator.serialize_handoffs = false; };
    StartExtender(StoreKind::kKubernetes);
  }
  // VM `vm`, its VMI and virt-launcher pod in the current namespace; the
  // pod's uid and JSON.
  struct RefusalsPod {
    std::string uid;
    std::string json;
  };
  RefusalsPod MakeVm(const std::string& vm) {
    RefusalsPod p;
    p.json = CreatePod(vm, absl::StrCat("virt-launcher-", vm), CreateVm(vm));
    rapidjson::Document d;
    d.Parse(p.json.data(), p.json.size());
    p.uid = kube::GetString(d, {"metadata", "uid"});
    return p;
  }
  // Filters and binds `vm`'s pod to node-a: the extender's answer. An OK
  // is acknowledged for the invariants of the current namespace.
  std::string FilterAndBind(const std::string& vm, const RefusalsPod& p) {
    Filter(p.json);
    return BindAgain(vm, p.uid);
  }
  std::string StartAndBind(const std::string& vm, std::string* pod_uid = nullptr) {
    RefusalsPod p = MakeVm(vm);
    if (pod_uid != nullptr) *pod_uid = p.uid;
    return FilterAndBind(vm, p);
  }
  std::string BindAgain(const std::string& vm, const std::string& uid) {
    const std::string pod = absl::StrCat("virt-launcher-", vm);
    std::string body = Bind(pod, uid).body;
    if (body == kRefusalsBound) {
      (ns_ == home_ns_ ? invariants_ : other_invariants_)
          ->Acknowledged({pod, uid, {absl::StrCat(vm, "-nvme")}});
    }
    return body;
  }
  std::string Healthz() {
    absl::StatusOr<HttpResponse> r = pdc_->Get("/healthz");
    return r.ok() ? absl::StrCat(r->status, " ", r->body) : r.status().ToString();
  }
  // Events of `ns` once one has `reason` (15 s).
  std::string AwaitEventOf(const std::string& ns, const std::string& reason) {
    return AwaitObject(absl::StrCat("/api/v1/namespaces/", ns, "/events"),
                       [&](const KubeReply& r) {
                         return r.text.find(absl::StrCat(R"("reason":")", reason, R"(")")) !=
                                std::string::npos;
                       })
        .text;
  }

  std::string home_ns_;
  std::string other_ns_;
  std::unique_ptr<ClaimInvariants> invariants_;
  std::unique_ptr<ClaimInvariants> other_invariants_;
};

// A quota on claims in one namespace refuses the template claim of its VM:
// that bind is refused with the quota's message; a VM of another namespace
// binds meanwhile, and the first binds once the quota allows it.
TEST_F(ClaimRefusalsOnDoubleTest, AQuotaRefusalInOneNamespaceLeavesTheOthersBinding) {
  StartExtenderForRefusals();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  api_->admission().ExceedQuota(home_ns_, "pdc.kubevirt.io", "persistentdeviceclaims");

  std::string a_uid;
  const std::string refused = StartAndBind("vm-a", &a_uid);
  EXPECT_THAT(refused, HasSubstr("exceeded quota"));
  EXPECT_THAT(refused, HasSubstr("vm-a-nvme"));
  EXPECT_EQ(Call("GET", Claims("/vm-a-nvme")).status, 404);
  EXPECT_EQ(Healthz(), "200 ok");
  Step("vm-a refused by the quota");

  In(other_ns_, [&] {
    EXPECT_EQ(StartAndBind("vm-b"), kRefusalsBound);
    EXPECT_EQ(Call("GET", Claims("/vm-b-nvme")).Str({"status", "phase"}), "Bound");
  });
  Step("vm-b bound in the other namespace");

  api_->admission().Clear();
  EXPECT_EQ(BindAgain("vm-a", a_uid), kRefusalsBound);
  EXPECT_EQ(Call("GET", Claims("/vm-a-nvme")).Str({"status", "reservedFor", "podUid"}), a_uid);
  EXPECT_EQ(Healthz(), "200 ok");
  Step("vm-a bound once the quota allows it");
  EXPECT_EQ(invariants_->violations() + other_invariants_->violations(), 0);
}

// OwnerReferencesPermissionEnforcement without `update` on
// virtualmachines/finalizers (an OpenShift cluster whose RBAC lacks it):
// the template claim's create is refused; so is that bind, with the
// apiserver's reason and a Warning Event on the VM; other binds go on.
TEST_F(ClaimRefusalsOnDoubleTest, AForbiddenOwnerFinalizerRefusesThatBindOnly) {
  StartExtenderForRefusals();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  // The VM and its pod exist (virt-controller has the RBAC it needs).
  const RefusalsPod a = MakeVm("vm-a");
  const std::string a_uid = a.uid;
  api_->admission().EnforceOwnerReferencesPermission(true);
  api_->admission().Forbid({"kubevirt.io", "virtualmachines/finalizers", "update", home_ns_});

  const std::string refused = FilterAndBind("vm-a", a);
  EXPECT_THAT(refused, HasSubstr("cannot set blockOwnerDeletion"));
  EXPECT_THAT(AwaitEventOf(home_ns_, "ClaimWriteRefused"), HasSubstr("vm-a-nvme"));
  EXPECT_EQ(Healthz(), "200 ok");
  Step("vm-a refused");

  In(other_ns_, [&] { EXPECT_EQ(StartAndBind("vm-b"), kRefusalsBound); });
  Step("vm-b bound");

  api_->admission().Clear();
  EXPECT_EQ(BindAgain("vm-a", a_uid), kRefusalsBound);
  Step("vm-a bound once allowed");
  EXPECT_EQ(invariants_->violations() + other_invariants_->violations(), 0);
}

// A namespace being deleted takes no new claim object: its new VM's bind is
// refused saying so; a VM of another namespace binds.
TEST_F(ClaimRefusalsOnDoubleTest, ATerminatingNamespaceRefusesItsNewClaimsOnly) {
  StartExtenderForRefusals();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_EQ(StartAndBind("vm-a"), kRefusalsBound);
  Step("vm-a bound");

  // vm-c's pod was made just before the namespace's deletion began.
  const RefusalsPod c = MakeVm("vm-c");
  api_->admission().TerminateNamespace(home_ns_);
  const std::string refused = FilterAndBind("vm-c", c);
  EXPECT_THAT(refused, HasSubstr("because it is being terminated"));
  EXPECT_EQ(Healthz(), "200 ok");
  Step("vm-c refused");

  In(other_ns_, [&] { EXPECT_EQ(StartAndBind("vm-b"), kRefusalsBound); });
  Step("vm-b bound");
  EXPECT_EQ(invariants_->violations() + other_invariants_->violations(), 0);
}

// A write outside a bind refused (pdc may not patch claims' status in one
// namespace any more, as a policy engine would do): the claim is told in
// an Event and its write retried; the store stays healthy for the others.
TEST_F(ClaimRefusalsOnDoubleTest, ARefusedStatusWriteOutsideABindIsRetriedNotFatal) {
  StartExtenderForRefusals();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_EQ(StartAndBind("vm-a"), kRefusalsBound);
  Step("vm-a bound");

  api_->admission().Forbid({"pdc.kubevirt.io", "persistentdeviceclaims/status", "patch", home_ns_});
  // vm-a's pod goes: its claim is no longer reserved for it, a status write
  // the API refuses.
  const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm-a"), now).status, 200);
  ASSERT_TRUE(AwaitUnreserved(ClaimKey{home_ns_, "vm-a-nvme"}));
  EXPECT_THAT(AwaitEventOf(home_ns_, "ClaimWriteRefused"), HasSubstr("forbidden"));
  EXPECT_EQ(Healthz(), "200 ok");
  Step("vm-a's pod gone, its claim's write refused");

  In(other_ns_, [&] { EXPECT_EQ(StartAndBind("vm-b"), kRefusalsBound); });
  Step("vm-b bound");

  // Allowed again: the next write retries it.
  api_->admission().Clear();
  In(other_ns_, [&] { ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm-b"), now).status, 200); });
  KubeReply a = AwaitObject(Claims("/vm-a-nvme"), [](const KubeReply& r) {
    return r.status == 200 && r.text.find("reservedFor") == std::string::npos;
  });
  EXPECT_EQ(a.Str({"status", "phase"}), "Bound");
  Step("vm-a's claim written once allowed");
  EXPECT_EQ(invariants_->violations() + other_invariants_->violations(), 0);
}

// The store failing for good (here the holds' ConfigMap, pdc's own
// record, refused: unlike one claim's object, pdc cannot go on without it)
// makes the leader give its lease up at once, not when a liveness probe or
// the renew deadline catches up: it marks the leadership lost, and the
// stop that follows (main exits, restarted as a follower) releases the
// Lease, so a follower takes over within a retry period.
TEST_F(ClaimRefusalsOnDoubleTest, ALeaderWhoseStoreFailedGivesItsLeaseUpAtOnce) {
  configure_ = [](PdcConfig* c) {
    c->extender.allocator.serialize_handoffs = false;
    c->extender.leader_election.enabled = true;
    c->extender.leader_election.identity = "replica-a";
  };
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  // Ready as a follower first; then it takes the free lease and leads.
  const absl::Time leading_by = absl::Now() + absl::Seconds(15);
  while (absl::Now() < leading_by) {
    absl::StatusOr<HttpResponse> r = pdc_->Get("/readyz/leader");
    if (r.ok() && r->status == 200) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ReportNodeA();
  const std::string lease =
      absl::StrCat("/apis/coordination.k8s.io/v1/namespaces/", ns_, "/leases/pdc-extender");
  EXPECT_THAT(Call("GET", lease).Str({"spec", "holderIdentity"}), HasSubstr("replica-a"));
  std::string pod_uid;
  ASSERT_EQ(StartAndBind("vm-a", &pod_uid), kRefusalsBound);

  // The claim is deleted once its pod is gone: its Retain drive goes on
  // the node's holds, which pdc may no longer write.
  api_->admission().Forbid({"", "configmaps", "create", ns_});
  api_->admission().Forbid({"", "configmaps", "patch", ns_});
  const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm-a"), now).status, 200);
  ASSERT_TRUE(AwaitUnreserved(ClaimKey{ns_, "vm-a-nvme"}));
  ASSERT_EQ(Call("DELETE", Claims("/vm-a-nvme")).status, 200);

  // Well within the lease's 15 s: the leadership is given up.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!app_->LeadershipLost() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(app_->LeadershipLost());
  app_->Stop();  // What main does then.
  KubeReply released = Call("GET", lease);
  EXPECT_EQ(released.Str({"spec", "holderIdentity"}), "") << released.text;
  EXPECT_EQ(released.Int({"spec", "leaseDurationSeconds"}), 1);
}

}  // namespace
}  // namespace pdc::testing
