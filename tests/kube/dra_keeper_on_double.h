// The fixture of the DRA claim keeper's life tests: pdc-extender with
// extender.dra.keeper.enabled against the kube-apiserver double, driven as
// virt-controller (VMs, VMIs, virt-launcher pods), kube-scheduler (the DRA
// scheduling double) and kube-controller-manager (the resourceclaim
// controller double, in the behaviour of the test's parameter) would.
#ifndef PDC_TESTS_KUBE_DRA_KEEPER_ON_DOUBLE_H_
#define PDC_TESTS_KUBE_DRA_KEEPER_ON_DOUBLE_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/kube/dra_objects.h"
#include "tests/kube/extender_on_double.h"
#include "tests/testing/dra_scheduler_double.h"
#include "tests/testing/resourceclaim_controller_double.h"

namespace pdc::testing {

class DraKeeperOnDoubleTest : public ExtenderOnDoubleTest,
                              public ::testing::WithParamInterface<ClaimControllerVersion> {
 protected:
  static constexpr std::string_view kClaim = "disk";

  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    configure_ = [](PdcConfig* c) {
      c->extender.dra_keeper.enabled = true;
      c->extender.dra_keeper.resync_period = absl::Milliseconds(200);
    };
    StartKeeper();
    ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson(kClaim)).status, 201);
    controller_ = std::move(ResourceClaimControllerDouble::Start(Url(), GetParam())).value();
    scheduler_ = std::move(DraSchedulerDouble::Start(
                               Url(), {{std::string(dra::kClass), std::string(dra::kDriver)}},
                               // Pools of this test's own (tests may share the double).
                               {{std::string(dra::kDriver), Cat(ns_, "-a"), "node-a",
                                 {"nvme-0", "nvme-1"}},
                                {std::string(dra::kDriver), Cat(ns_, "-b"), "node-b", {"nvme-0"}}}))
                     .value();
  }

  void StartKeeper() {
    StartExtender();
    ASSERT_TRUE(AwaitReady());
  }
  void StopKeeper() {
    app_->Stop();
    app_.reset();
  }

  // A VirtualMachine; returns its uid.
  std::string NewVm(const std::string& vm) {
    return Create(Vms(), Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
                             vm, R"("},"spec":{"running":true}})"));
  }
  // The VMI of VM `vm` (uid `vm_uid`) and its virt-launcher pod `pod` using
  // claim `claim`, as virt-controller makes them; returns the pod's uid.
  std::string CreateLauncher(const std::string& vm, const std::string& vm_uid,
                             const std::string& pod, std::string_view claim = kClaim) {
    const std::string vmi_uid = Create(
        Vmis(), Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                    vm, R"(",)", Owner("VirtualMachine", vm, vm_uid), R"(},"spec":{}})"));
    std::string json = dra::PodJson(pod, claim, Owner("VirtualMachineInstance", vm, vmi_uid));
    json.insert(json.find(R"("ownerReferences")"),
                Cat(R"("labels":{"kubevirt.io":"virt-launcher","vm.kubevirt.io/name":")", vm,
                    R"("},)"));
    return Create(Pods(), json);
  }
  // Starts VM `vm` (uid `vm_uid`): CreateLauncher, and the pod placed by
  // the scheduling double on the nodes that are up. Returns the placement.
  absl::StatusOr<DraSchedulerDouble::Placement> StartVm(const std::string& vm,
                                                        const std::string& vm_uid,
                                                        const std::string& pod,
                                                        std::vector<std::string> nodes = {
                                                            "node-a", "node-b"}) {
    CreateLauncher(vm, vm_uid, pod);
    return scheduler_->Schedule(ns_, pod, kClaim, nodes);
  }
  // Stops VM `vm`: its pod and VMI deleted, the VirtualMachine stays.
  void StopVm(const std::string& vm, const std::string& pod) {
    const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
    EXPECT_EQ(Call("DELETE", Pods(Cat("/", pod)), now).status, 200);
    EXPECT_EQ(Call("DELETE", Vmis(Cat("/", vm))).status, 200);
  }

  KubeReply ClaimNow() { return Call("GET", dra::ClaimPath(ns_, kClaim)); }
  // Waits until the claim's reservedFor is `want` ("<resource>/<name>").
  KubeReply AwaitReservedFor(std::vector<std::string> want) {
    return AwaitObject(dra::ClaimPath(ns_, kClaim),
                       [&](const KubeReply& r) { return dra::ReservedFor(r.json) == want; });
  }
  // The resourceclaim controller's sync of the claim; a 409 (the keeper
  // wrote meanwhile) is retried, as its work queue does.
  ResourceClaimControllerDouble::Outcome SyncController() {
    ResourceClaimControllerDouble::Outcome o;
    for (int i = 0; i < 20; ++i) {
      o = controller_->SyncClaim(ns_, kClaim);
      if (!absl::IsAborted(o.status)) break;
    }
    return o;
  }
  // Waits for an Event `reason` on the VirtualMachine `vm` (by UID).
  void AwaitVmEvent(const std::string& vm, const std::string& vm_uid, const std::string& reason) {
    AwaitObject(Cat("/api/v1/namespaces/", ns_, "/events"), [&](const KubeReply& r) {
      const kube::Value* items = kube::Find(r.json, {"items"});
      if (items == nullptr || !items->IsArray()) return false;
      for (const kube::Value& e : items->GetArray()) {
        if (kube::GetString(e, {"reason"}) == reason &&
            kube::GetString(e, {"involvedObject", "kind"}) == "VirtualMachine" &&
            kube::GetString(e, {"involvedObject", "name"}) == vm &&
            kube::GetString(e, {"involvedObject", "uid"}) == vm_uid) {
          return true;
        }
      }
      return false;
    });
  }
  // The VM entries of the claim, as "<name>/<uid>".
  std::vector<std::string> VmEntries(const kube::Value& claim) {
    std::vector<std::string> out;
    const kube::Value* l = kube::Find(claim, {"status", "reservedFor"});
    if (l == nullptr || !l->IsArray()) return out;
    for (const kube::Value& e : l->GetArray()) {
      if (kube::GetString(e, {"resource"}) == "virtualmachines") {
        out.push_back(Cat(kube::GetString(e, {"name"}), "/", kube::GetString(e, {"uid"})));
      }
    }
    return out;
  }
  // After every step: never two VMs in the claim, and while a VM that
  // exists is in it, the allocation never changes.
  void CheckInvariants(std::string_view step) {
    SCOPED_TRACE(step);
    KubeReply c = ClaimNow();
    const std::vector<std::string> vms = VmEntries(c.json);
    EXPECT_LE(vms.size(), 1u) << c.text;
    bool live = false;
    for (const std::string& v : vms) {
      const std::string name = v.substr(0, v.find('/'));
      KubeReply vm = Call("GET", Vms(Cat("/", name)));
      live = live || (vm.status == 200 && Cat(name, "/", vm.Str({"metadata", "uid"})) == v);
    }
    const std::vector<AllocatedDevice> devices = AllocatedDevices(c.json);
    if (live && !kept_devices_.empty()) {
      EXPECT_EQ(devices, kept_devices_) << "the allocation changed under a live VM: " << c.text;
    }
    kept_devices_ = live ? devices : std::vector<AllocatedDevice>{};
  }

  std::unique_ptr<ResourceClaimControllerDouble> controller_;
  std::unique_ptr<DraSchedulerDouble> scheduler_;
  std::vector<AllocatedDevice> kept_devices_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_KUBE_DRA_KEEPER_ON_DOUBLE_H_
