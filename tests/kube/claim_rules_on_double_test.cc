// The rules of a claim's life in Kubernetes mode (docs/design.md §4.7, §4.8)
// against the kube-apiserver double on a real etcd: a Released device
// remembers the claim it came from (namespace, name, UID) and goes back only
// to that namespace unless an administrator hands it over; one object that
// cannot be taken as it is (a spec edited past the CRD's rules) is withheld
// on its own and never stops the start; the reclaim policy an object has
// when it is deleted is the one that counts; a claim withheld for a
// conflict goes by its reclaim policy when deleted; an erase that will not
// finish is ended by an administrator, and the device stays held.
#include <string>

#include "api/claim_object.h"
#include "extender/kube_api_store.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kA[] = "0000:3b:00.0";
constexpr char kB[] = "0000:5e:00.0";

class ClaimRulesOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void TearDown() override {
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
    if (!other_ns_.empty()) {
      const std::string saved = ns_;
      ns_ = other_ns_;
      DeleteAllClaims();
      ns_ = saved;
    }
  }

  void AwaitGone(const std::string& path) {
    AwaitObject(path, [](const KubeReply& r) { return r.status == 404; });
  }
  std::string PdcGet(const std::string& path) {
    absl::StatusOr<HttpResponse> r = pdc_->Get(path);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? absl::StrCat(r->status, " ", r->body) : "";
  }
  HttpResponse PdcPost(const std::string& path, const std::string& body = "") {
    absl::StatusOr<HttpResponse> r = pdc_->Post(path, body);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : HttpResponse{};
  }
  // A claim object; `extra_spec` is appended inside spec.
  std::string ClaimObject(const std::string& name, const std::string& policy, int count = 1,
                          const std::string& extra_spec = "") {
    return absl::StrCat(
        R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim",)",
        R"("metadata":{"name":")", name,
        R"("},"spec":{"resourceName":"devices.kubevirt.io/nvme","count":)", count,
        R"(,"reclaimPolicy":")", policy, R"(")", extra_spec, "}}");
  }
  // A claim whose status (written here as by an earlier pdc) says Bound on
  // node-a to `devices`; returns its UID.
  std::string BoundClaim(const std::string& name, const std::string& policy,
                         const std::vector<std::string>& devices) {
    KubeReply c = Call("POST", Claims(), ClaimObject(name, policy, devices.size()));
    EXPECT_EQ(c.status, 201) << c.text;
    std::vector<std::string> items;
    for (const std::string& d : devices) {
      items.push_back(absl::StrCat(R"({"address":")", d, R"(","serial":"SNA)",
                                   d == kA ? "0" : "1", R"("})"));
    }
    const KubeReply s = Call("PATCH", Claims(absl::StrCat("/", name, "/status")),
                             absl::StrCat(R"({"status":{"phase":"Bound","node":"node-a",)",
                                          R"("devices":[)", absl::StrJoin(items, ","), "]}}"),
                             "application/merge-patch+json");
    EXPECT_EQ(s.status, 200) << s.text;
    return c.Str({"metadata", "uid"});
  }
  // Events of `ns` once one has `reason` (10 s).
  std::string AwaitEvent(const std::string& ns, const std::string& reason) {
    return AwaitObject(absl::StrCat("/api/v1/namespaces/", ns, "/events"),
                       [&](const KubeReply& r) {
                         return r.text.find(absl::StrCat(R"("reason":")", reason, R"(")")) !=
                                std::string::npos;
                       })
        .text;
  }
  // The state of `address` in pdc's device listing.
  std::string StateOf(const std::string& address) {
    absl::StatusOr<HttpResponse> r = pdc_->Get("/v1/devices");
    if (!r.ok()) return "";
    absl::StatusOr<std::vector<api::DeviceListing>> l = api::ParseDeviceList(r->body);
    if (!l.ok()) return "";
    for (const api::DeviceListing& d : *l) {
      if (d.device.address.ToString() == address) return std::string(api::ToString(d.state));
    }
    return "unlisted";
  }
  std::string Holds(const std::string& node) {
    return absl::StrCat("/api/v1/namespaces/", ns_, "/configmaps/",
                        extender::HoldsConfigMapName(node));
  }
  std::string ClaimsOf(const std::string& ns, const std::string& rest = "") const {
    return absl::StrCat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns,
                        "/persistentdeviceclaims", rest);
  }

  std::string other_ns_;
};

// A Released device remembers its claim (namespace, name, UID) in the holds,
// across restarts; a claim of another namespace that pins it is refused
// without learning whose it is, until an administrator hands it over.
TEST_F(ClaimRulesOnDoubleTest, AReleasedDeviceGoesBackOnlyToItsNamespace) {
  const std::string uid = BoundClaim("data", "Retain", {kA});
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_EQ(Call("DELETE", Claims("/data")).status, 200);
  AwaitGone(Claims("/data"));
  EXPECT_THAT(AwaitObject(Holds("node-a"),
                          [&](const KubeReply& r) {
                            return r.text.find(uid) != std::string::npos;
                          })
                  .text,
              HasSubstr(absl::StrCat(R"(\"claimUid\":\")", uid)));
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_OK_AND_ASSIGN(NodeView v, app_->allocator()->GetNode("node-a"));
  ASSERT_EQ(v.released.size(), 1u);
  EXPECT_EQ(v.released[0].claim, (ClaimKey{ns_, "data"}));
  EXPECT_EQ(v.released[0].claim_uid, uid);

  // Tenant B pins it by node and address.
  other_ns_ = absl::StrCat(ns_, "-b");
  KubeReply steal = Call(
      "POST", ClaimsOf(other_ns_),
      ClaimObject("steal", "Retain", 1, absl::StrCat(R"(,"node":"node-a","address":")", kA, R"(")")));
  ASSERT_EQ(steal.status, 201) << steal.text;
  AwaitObject(ClaimsOf(other_ns_, "/steal"), [](const KubeReply& r) {
    return r.text.find("pdc.kubevirt.io/device-protection") != std::string::npos;
  });
  const std::string saved = ns_;
  ns_ = other_ns_;
  const std::string vmi_uid = CreateVm("b");
  ns_ = saved;
  const std::string pod = absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"virt-launcher-b-x","namespace":")",
      other_ns_, R"(","uid":"pod-b-uid","labels":{"kubevirt.io":"virt-launcher","vm.kubevirt.io/name":"b",)",
      R"("kubevirt.io/created-by":")", vmi_uid, R"("},)",
      Owner("VirtualMachineInstance", "b", vmi_uid), ",",
      R"("annotations":{"pdc.kubevirt.io/claims":"steal"}},"spec":{"schedulerName":"pdc-scheduler",)",
      R"("containers":[{"name":"compute","resources":{"limits":{"devices.kubevirt.io/nvme":"1"}}}]}})");
  const HttpResponse refused = Filter(pod);
  EXPECT_THAT(refused.body, HasSubstr("another namespace"));
  EXPECT_THAT(refused.body, Not(HasSubstr(ns_ + "\"")));
  EXPECT_THAT(refused.body, Not(HasSubstr(ns_ + "/")));

  // The administrator hands it over: audited, and tenant B's pin fits.
  const HttpResponse handed = PdcPost(
      absl::StrCat("/v1/nodes/node-a/devices/", kA, "/handover"),
      absl::StrCat(R"({"claim":")", other_ns_, R"(/steal"})"));
  EXPECT_EQ(handed.status, 200) << handed.body;
  EXPECT_THAT(AwaitEvent("default", "DeviceHandedOver"),
              HasSubstr(absl::StrCat("handed over by an administrator to claim ", other_ns_,
                                     "/steal")));
  EXPECT_THAT(Filter(pod).body, Not(HasSubstr("another namespace")));
}

// Objects edited past the CRD's rules (a kube-apiserver without CEL, an
// edit made before the rules): each is withheld with a condition and an
// Event, its devices held; the process starts and serves the other claims.
TEST_F(ClaimRulesOnDoubleTest, AnEditedOrUnreadableClaimIsWithheldNotFatal) {
  BoundClaim("counted", "Delete", {kA});
  ASSERT_EQ(Call("PATCH", Claims("/counted"), R"({"spec":{"count":2}})",
                 "application/merge-patch+json")
                .status,
            200);
  BoundClaim("unreadable", "Delete", {kB});
  ASSERT_EQ(Call("PATCH", Claims("/unreadable"), R"({"spec":{"node":"Not A Node!"}})",
                 "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(Call("POST", Claims(), ClaimObject("fine", "Retain")).status, 201);
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(AwaitEvent(ns_, "SpecContradictsStatus"),
              HasSubstr("spec.count is 2 but the status names 1 device(s)"));
  EXPECT_THAT(AwaitEvent(ns_, "SpecUnreadable"), HasSubstr("claim withheld"));
  for (const std::string name : {"counted", "unreadable"}) {
    KubeReply c = AwaitObject(Claims(absl::StrCat("/", name)), [](const KubeReply& r) {
      return r.text.find(R"("type":"Withheld","status":"True")") != std::string::npos;
    });
    EXPECT_EQ(c.Str({"status", "phase"}), "Bound") << name;  // pdc changed nothing else.
  }
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/fine")),
              HasSubstr(R"("phase":"Pending")"));
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/counted")), HasSubstr("404"));
  ReportNodeA();
  EXPECT_EQ(StateOf(kA), "Released");
  EXPECT_EQ(StateOf(kB), "Released");

  // Deleting the unreadable one applies the reclaim policy nobody can read
  // any more as Retain: its device keeps its data, held for its namespace.
  ASSERT_EQ(Call("DELETE", Claims("/unreadable")).status, 200);
  AwaitGone(Claims("/unreadable"));
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ASSERT_OK_AND_ASSIGN(NodeView v, app_->allocator()->GetNode("node-a"));
  bool kept = false;
  for (const ReleasedDevice& r : v.released) {
    if (r.address.ToString() == kB) kept = r.claim == ClaimKey{ns_, "unreadable"};
  }
  EXPECT_TRUE(kept);
}

// A claim whose status does not read (edited by hand through the status
// subresource) but whose node and device addresses do: withheld like an
// unreadable spec, its device held, and pdc-extender starts.
TEST_F(ClaimRulesOnDoubleTest, AnUnreadableStatusIsWithheldNotFatal) {
  BoundClaim("garbled", "Delete", {kA});
  ASSERT_EQ(Call("PATCH", Claims("/garbled/status"), R"({"status":{"phase":"Sideways"}})",
                 "application/merge-patch+json")
                .status,
            200);
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(AwaitEvent(ns_, "StatusUnreadable"), HasSubstr("its status cannot be read"));
  AwaitObject(Claims("/garbled"), [](const KubeReply& r) {
    return r.text.find(R"("type":"Withheld","status":"True")") != std::string::npos;
  });
  ReportNodeA();
  EXPECT_EQ(StateOf(kA), "Released");
  EXPECT_EQ(StateOf(kB), "Free");
}

// Which VM owns a template claim is pdc's record (status.ownerVMUid, and
// pdc's annotation), not the spec's: a VM re-created under the old name,
// whose UID a user wrote into the old claim's spec.ownerVMUid (an apiserver
// without the CRD's CEL rules takes the edit), still does not get the old
// VM's drive, also after a restart.
TEST_F(ClaimRulesOnDoubleTest, TheOwnerVmIsPdcsRecordNotTheSpecs) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string first = CreatePod("vm3", "virt-launcher-vm3-a", CreateVm("vm3"));
  Filter(first);
  const std::string first_uid = Call("GET", Pods("/virt-launcher-vm3-a")).Str({"metadata", "uid"});
  ASSERT_EQ(Bind("virt-launcher-vm3-a", first_uid).body, R"({"Error":""})");
  const std::string old_vm_uid = Call("GET", Vms("/vm3")).Str({"metadata", "uid"});
  KubeReply c = Call("GET", Claims("/vm3-nvme"));
  EXPECT_EQ(c.Str({"status", "ownerVMUid"}), old_vm_uid);
  EXPECT_EQ(c.Str({"metadata", "annotations", api::kOwnerVmUidAnnotation}),
            old_vm_uid);
  EXPECT_EQ(c.Str({"spec", "ownerVMUid"}), "");

  // The VM goes, its claim stays (its owner reference taken off first).
  ASSERT_EQ(Call("PATCH", Claims("/vm3-nvme"), R"({"metadata":{"ownerReferences":null}})",
                 "application/merge-patch+json")
                .status,
            200);
  const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm3-a"), now).status, 200);
  ASSERT_EQ(Call("DELETE", Vmis("/vm3")).status, 200);
  ASSERT_EQ(Call("DELETE", Vms("/vm3")).status, 200);
  ASSERT_TRUE(AwaitUnreserved(ClaimKey{ns_, "vm3-nvme"}));

  // vm3 again, and the old claim's spec says it is the new VM's.
  const std::string second = CreatePod("vm3", "virt-launcher-vm3-b", CreateVm("vm3"));
  const std::string new_vm_uid = Call("GET", Vms("/vm3")).Str({"metadata", "uid"});
  ASSERT_EQ(Call("PATCH", Claims("/vm3-nvme"),
                 absl::StrCat(R"({"spec":{"ownerVMUid":")", new_vm_uid, R"("}})"),
                 "application/merge-patch+json")
                .status,
            200);
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(Filter(second).body,
              HasSubstr(absl::StrCat("was made for an earlier VM named vm3 (uid ", old_vm_uid)));
  const std::string second_uid =
      Call("GET", Pods("/virt-launcher-vm3-b")).Str({"metadata", "uid"});
  EXPECT_NE(Bind("virt-launcher-vm3-b", second_uid).body, R"({"Error":""})");
  EXPECT_EQ(Call("GET", Claims("/vm3-nvme")).Str({"status", "ownerVMUid"}), old_vm_uid);
}

// The reclaim policy is the one field a user may change on a bound claim,
// and the value the object has when it is deleted counts: Delete -> Retain
// keeps the data.
TEST_F(ClaimRulesOnDoubleTest, TheReclaimPolicyAtDeletionCounts) {
  BoundClaim("data", "Delete", {kA});
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ASSERT_EQ(Call("PATCH", Claims("/data"), R"({"spec":{"reclaimPolicy":"Retain"}})",
                 "application/merge-patch+json")
                .status,
            200);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    absl::StatusOr<Claim> c = app_->allocator()->GetClaim({ns_, "data"});
    if (c.ok() && c->spec.reclaim_policy == ReclaimPolicy::kRetain) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(Call("DELETE", Claims("/data")).status, 200);
  AwaitGone(Claims("/data"));
  ASSERT_OK_AND_ASSIGN(NodeView v, app_->allocator()->GetNode("node-a"));
  EXPECT_TRUE(v.return_to_host.empty());
  ASSERT_EQ(v.released.size(), 1u);
  EXPECT_EQ(v.released[0].address.ToString(), kA);
}

// A claim withheld for a device conflict and then deleted goes by its
// reclaim policy: Delete erases the devices only it named, the device it shared stays held for an administrator; a
// restart gives the shared one to the claim that is left.
TEST_F(ClaimRulesOnDoubleTest, ADeletedClaimInConflictGoesByItsReclaimPolicy) {
  BoundClaim("pair", "Delete", {kA, kB});
  BoundClaim("single", "Retain", {kA});
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ASSERT_EQ(Call("DELETE", Claims("/pair")).status, 200);
  KubeReply holds = AwaitObject(Holds("node-a"), [](const KubeReply& r) {
    return r.text.find(R"(\"returnToHost\":[\"0000:5e:00.0\"])") != std::string::npos;
  });
  EXPECT_THAT(holds.text, HasSubstr(R"(\"address\":\"0000:3b:00.0\")"));
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/single")),
              HasSubstr(R"("phase":"Bound")"));
  ASSERT_OK_AND_ASSIGN(NodeView v, app_->allocator()->GetNode("node-a"));
  ASSERT_EQ(v.return_to_host.size(), 1u);
  EXPECT_EQ(v.return_to_host[0].ToString(), kB);
}

// An erase that will not finish: the administrator ends the wait (an Event
// says who decided what); the object goes, the device stays out of the free
// pool, for no claim, also after a restart, until released.
TEST_F(ClaimRulesOnDoubleTest, AnAdministratorEndsAnEraseThatWillNotFinish) {
  BoundClaim("wipe", "Delete", {kA});
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ASSERT_EQ(Call("DELETE", Claims("/wipe")).status, 200);
  AwaitObject(Claims("/wipe"), [](const KubeReply& r) {
    return r.text.find(R"("type":"Reclaiming","status":"True")") != std::string::npos;
  });
  const std::string base = absl::StrCat("/v1/nodes/node-a/devices/", kA);
  const HttpResponse plain = PdcPost(base + "/release");
  EXPECT_EQ(plain.status, 409);
  EXPECT_THAT(plain.body, HasSubstr("abandon-erase"));
  const HttpResponse ended = PdcPost(base + "/abandon-erase");
  EXPECT_EQ(ended.status, 200) << ended.body;
  AwaitGone(Claims("/wipe"));
  EXPECT_THAT(AwaitEvent("default", "EraseAbandoned"),
              HasSubstr(absl::StrCat("the erase of device ", kA, " was ended by an administrator")));
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ASSERT_OK_AND_ASSIGN(NodeView v, app_->allocator()->GetNode("node-a"));
  EXPECT_TRUE(v.return_to_host.empty());
  ASSERT_EQ(v.released.size(), 1u);
  EXPECT_EQ(v.released[0].claim, ClaimKey{});
  EXPECT_EQ(PdcPost(base + "/release").status, 200);
}

// Ready means the claim controller took in the first list: every object
// there is a claim of the allocator with pdc's finalizer before
// kube-scheduler is answered (a delete right after could otherwise remove
// an object pdc was about to take).
TEST_F(ClaimRulesOnDoubleTest, ReadyOnlyOnceEveryListedClaimIsTakenIn) {
  constexpr int kClaims = 40;
  for (int i = 0; i < kClaims; ++i) {
    const KubeReply c =
        Call("POST", Claims(), ClaimObject(absl::StrCat("c", i), i % 2 ? "Retain" : "Delete"));
    ASSERT_EQ(c.status, 201) << c.text;
  }
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_EQ(app_->allocator()->ListClaims(ns_).size(), static_cast<size_t>(kClaims));
  const KubeReply list = Call("GET", Claims());
  ASSERT_EQ(list.status, 200) << list.text;
  size_t protected_objects = 0;
  for (size_t at = list.text.find(api::kClaimFinalizer); at != std::string::npos;
       at = list.text.find(api::kClaimFinalizer, at + 1)) {
    ++protected_objects;
  }
  EXPECT_EQ(protected_objects, static_cast<size_t>(kClaims)) << list.text;
}

}  // namespace
}  // namespace pdc::testing
