// Kubernetes mode: which VM a pod belongs to comes from its owner chain
// (pod -> VirtualMachineInstance -> VirtualMachine), matched by UID, never
// from names or labels. The directory's rules, then filter and bind through
// the Router with a directory.
#include "extender/vm_directory.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "rapidjson/document.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/reflector_feed.h"

namespace pdc::extender::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The VMI uid VirtLauncherPod's owner reference names.
constexpr char kVmiUid[] = "7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11";
constexpr char kVm1Uid[] = "5b2d3c1a-0000-4000-8000-00000000a001";

std::string Object(const std::string& name, const std::string& uid, const std::string& owner) {
  return absl::StrCat(R"({"metadata":{"name":")", name, R"(","namespace":"default","uid":")", uid,
                      R"(","resourceVersion":"7")", owner.empty() ? "" : ",", owner, "}}");
}
std::string OwnedBy(const std::string& kind, const std::string& name, const std::string& uid) {
  return absl::StrCat(R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":")", kind,
                      R"(","name":")", name, R"(","uid":")", uid, R"(","controller":true}])");
}

using ::pdc::testing::Delete;
using ::pdc::testing::List;
using ::pdc::testing::Put;

api::OwnerReference VmiRef(const std::string& uid = kVmiUid) {
  return {"kubevirt.io/v1", "VirtualMachineInstance", "vm1", uid, true};
}

TEST(VmDirectoryTest, FollowsThePodsVmiToItsVm) {
  VmDirectory d;
  Put(d.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)));
  Put(d.vm_sink(), Object("vm1", kVm1Uid, ""));
  const api::OwnerReference ref = VmiRef();
  ASSERT_OK_AND_ASSIGN(VmRef vm, d.Resolve("default", &ref));
  EXPECT_EQ(vm.name, "vm1");
  EXPECT_EQ(vm.uid, kVm1Uid);
  EXPECT_FALSE(vm.standalone_vmi);
}

TEST(VmDirectoryTest, AVmiWithoutAVmIsItsOwnVm) {
  VmDirectory d;
  Put(d.vmi_sink(), Object("vm1", kVmiUid, ""));
  const api::OwnerReference ref = VmiRef();
  ASSERT_OK_AND_ASSIGN(VmRef vm, d.Resolve("default", &ref));
  EXPECT_EQ(vm.uid, kVmiUid);
  EXPECT_TRUE(vm.standalone_vmi);
}

struct Broken {
  std::string name;
  std::string vmi;             // The VMI object in the cache ("" = none).
  std::string vm;              // The VM object in the cache ("" = none).
  bool no_controller = false;  // The pod has no controller owner.
  api::OwnerReference controller = VmiRef();
  std::string why;
  absl::StatusCode code = absl::StatusCode::kFailedPrecondition;
};

class BrokenChainTest : public ::testing::TestWithParam<Broken> {};

TEST_P(BrokenChainTest, IsNotAVmPodOrNotKnown) {
  const Broken& c = GetParam();
  VmDirectory d;
  if (!c.vmi.empty()) Put(d.vmi_sink(), c.vmi);
  if (!c.vm.empty()) Put(d.vm_sink(), c.vm);
  EXPECT_THAT(d.Resolve("default", c.no_controller ? nullptr : &c.controller).status(),
              pdc::testing::StatusIs(c.code, HasSubstr(c.why)));
}

INSTANTIATE_TEST_SUITE_P(
    Chains, BrokenChainTest,
    ::testing::Values(
        Broken{.name = "NoController", .no_controller = true,
               .why = "has no controller owner reference"},
        Broken{.name = "ControlledByAReplicaSet",
               .controller = {"apps/v1", "ReplicaSet", "web-7d9f", "rs-uid", true},
               .why = "controller is ReplicaSet web-7d9f (apps/v1), not a kubevirt.io"},
        Broken{.name = "VmiNotKnown", .why = "VirtualMachineInstance default/vm1 that owns the pod "
                                            "is not known",
               .code = absl::StatusCode::kNotFound},
        // The VMI was deleted and re-created: the pod belongs to the old one.
        Broken{.name = "VmiRecreated",
               .vmi = Object("vm1", "new-vmi-uid", OwnedBy("VirtualMachine", "vm1", kVm1Uid)),
               .why = "which is gone (the one by that name now has uid new-vmi-uid)"},
        Broken{.name = "VmNotKnown",
               .vmi = Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)),
               .why = "VirtualMachine default/vm1 that owns VirtualMachineInstance vm1 is not known",
               .code = absl::StatusCode::kNotFound},
        // The VM was deleted and re-created under the same name.
        Broken{.name = "VmRecreated",
               .vmi = Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)),
               .vm = Object("vm1", "new-vm-uid", ""),
               .why = "belongs to VirtualMachine vm1 with uid " + std::string(kVm1Uid) +
                      ", which is gone"}),
    [](const auto& info) { return info.param.name; });

TEST(VmDirectoryTest, ADeleteOfAnOlderObjectKeepsTheNewerOne) {
  VmDirectory d;
  Put(d.vmi_sink(), Object("vm1", "new", ""));
  Delete(d.vmi_sink(), Object("vm1", "old", ""));
  EXPECT_EQ(d.vmis(), 1u);
  Delete(d.vmi_sink(), Object("vm1", "new", ""));
  EXPECT_EQ(d.vmis(), 0u);
}

// What the directory reports gone, as "<ns>/<uid>", step by step.
TEST(VmDirectoryTest, TellsWhenAVmIsGone) {
  std::vector<std::string> gone;
  VmDirectory d([&](std::string ns, std::string uid) { gone.push_back(ns + "/" + uid); });
  const std::string vm = Object("vm1", kVm1Uid, "");
  const std::string vmi = Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid));
  const std::string standalone = Object("solo", "solo-uid", "");
  struct Step {
    std::string name;
    std::function<void()> act;
    std::vector<std::string> gone;  // Reported by this step.
  };
  const std::vector<Step> steps = {
      {"first lists report nothing",
       [&] {
         List(d.vm_sink(), {vm});
         List(d.vmi_sink(), {vmi, standalone});
       },
       {}},
      {"a VM's VMI going (the VM stopped) is no VM gone",
       [&] { Delete(d.vmi_sink(), vmi); }, {}},
      {"a delete of an object pdc does not hold", [&] { Delete(d.vm_sink(), Object("vm1", "x", "")); },
       {}},
      {"a VM deleted", [&] { Delete(d.vm_sink(), vm); }, {"default/" + std::string(kVm1Uid)}},
      {"a standalone VMI deleted", [&] { Delete(d.vmi_sink(), standalone); },
       {"default/solo-uid"}},
      {"a VM re-created under its name, its delete unseen",
       [&] {
         Put(d.vm_sink(), Object("vm2", "vm2-old", ""));
         Put(d.vm_sink(), Object("vm2", "vm2-new", ""));
       },
       {"default/vm2-old"}},
      {"a modification is no delete", [&] { Put(d.vm_sink(), Object("vm2", "vm2-new", "")); },
       {}},
      {"a relist without it", [&] { List(d.vm_sink(), {Object("vm3", "vm3-uid", "")}); },
       {"default/vm2-new"}},
      {"a relist with it", [&] { List(d.vm_sink(), {Object("vm3", "vm3-uid", "")}); }, {}},
  };
  for (const Step& step : steps) {
    gone.clear();
    step.act();
    EXPECT_EQ(gone, step.gone) << step.name;
  }
}

TEST(VmDirectoryTest, KnowsTheUidsOfVmsAndVmis) {
  VmDirectory d;
  Put(d.vm_sink(), Object("vm1", kVm1Uid, ""));
  Put(d.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)));
  EXPECT_EQ(d.HasUids({kVm1Uid, kVmiUid, "other"}), (std::vector<bool>{true, true, false}));
}

class KubernetesModeFilterTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    ctx_.vms = &directory_;
  }
  void TearDown() override { ctx_.vms = nullptr; }

  // VM `name` (uid `vm_uid`) running as VMI `name` (uid `vmi_uid`), and a
  // pod of that VMI.
  std::string StartVm(const std::string& name, const std::string& vm_uid,
                      const std::string& vmi_uid, const std::string& pod_uid,
                      const std::string& annotations = "") {
    Put(directory_.vm_sink(), Object(name, vm_uid, ""));
    Put(directory_.vmi_sink(), Object(name, vmi_uid, OwnedBy("VirtualMachine", name, vm_uid)));
    return absl::StrReplaceAll(VirtLauncherPod(name, pod_uid, 1, annotations),
                               {{kVmiUid, vmi_uid}});
  }

  // As pdc-extender wires it: a VM gone releases what it held.
  VmDirectory directory_{[this](std::string ns, std::string uid) {
    EXPECT_OK(ReleaseGoneVm(*allocator_, ns, uid).status());
  }};
};

TEST_F(KubernetesModeFilterTest, AVmPodIsScheduledAsItsVm) {
  Put(directory_.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)));
  Put(directory_.vm_sink(), Object("vm1", kVm1Uid, ""));
  HttpResponse f = Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body, R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.node, "node-a");
}

// The pod carries vm.kubevirt.io/name=vm1, but its VMI is not vm1's: the
// label decides nothing, and no claim is taken over.
TEST_F(KubernetesModeFilterTest, ALabelAloneMakesNoVmPod) {
  Put(directory_.vmi_sink(), Object("vm1", "another-vmi", OwnedBy("VirtualMachine", "vm1", kVm1Uid)));
  Put(directory_.vm_sink(), Object("vm1", kVm1Uid, ""));
  HttpResponse f = Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}));
  EXPECT_THAT(f.body, HasSubstr("is gone (the one by that name now has uid another-vmi)"));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":null)"));
  EXPECT_EQ(allocator_->Stats().claims_pending + allocator_->Stats().claims_bound, 0u);
}

// A VM deleted and re-created under the same name is another VM: it does
// not get the old VM's template claim (nor its device), and filter says why.
TEST_F(KubernetesModeFilterTest, ARecreatedVmDoesNotGetTheOldVmsTemplateClaim) {
  const std::string pod = StartVm("vm1", kVm1Uid, kVmiUid, "uid-1");
  ASSERT_THAT(Post("/scheduler/filter", NamesArgs(pod, {"node-a"})).body,
              HasSubstr(R"("NodeNames":["node-a"])"));
  ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body, R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim old, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(old.spec.owner_vm_uid, kVm1Uid);
  ASSERT_TRUE(old.status.reserved_for.has_value());
  EXPECT_EQ(old.status.reserved_for->vm_uid, kVm1Uid);

  Delete(directory_.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVm1Uid)));
  Delete(directory_.vm_sink(), Object("vm1", kVm1Uid, ""));
  ASSERT_OK_AND_ASSIGN(Claim released, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_FALSE(released.status.reserved_for.has_value());

  const std::string again = StartVm("vm1", "vm-uid-2", "vmi-uid-2", "uid-2");
  HttpResponse f = Post("/scheduler/filter", NamesArgs(again, {"node-a", "node-b"}));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":[])"));
  EXPECT_THAT(f.body, HasSubstr(absl::StrCat(
                          "claim default/vm1-nvme was made for an earlier VM named vm1 (uid ",
                          kVm1Uid, "); this VM (uid vm-uid-2) gets its own once that claim is "
                          "deleted")));
  // Retryable: the claim goes with the old VM.
  EXPECT_THAT(f.body, HasSubstr(R"("FailedNodes":{"node-a")"));
  EXPECT_THAT(Post("/scheduler/bind", BindArgs("vm1", "uid-2", "node-a")).body,
              HasSubstr("was made for an earlier VM named vm1"));
  ASSERT_OK_AND_ASSIGN(Claim after, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(after, released);
}

// Deleting a VM releases its named claim for another VM.
TEST_F(KubernetesModeFilterTest, DeletingAVmReleasesItsNamedClaim) {
  ClaimSpec spec;
  spec.resource_name = kNvme;
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, spec).status());
  const std::string claims = R"(,"pdc.kubevirt.io/claims":"data")";
  const std::string pod1 = StartVm("vm1", kVm1Uid, kVmiUid, "uid-1", claims);
  ASSERT_THAT(Post("/scheduler/filter", NamesArgs(pod1, {"node-a"})).body,
              HasSubstr(R"("NodeNames":["node-a"])"));
  ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body, R"({"Error":""})");
  const std::string pod2 = StartVm("vm2", "vm2-uid", "vmi2-uid", "uid-2", claims);
  EXPECT_THAT(Post("/scheduler/filter", NamesArgs(pod2, {"node-a"})).body,
              HasSubstr("claim default/data is in use by VM default/vm1"));

  Delete(directory_.vm_sink(), Object("vm1", kVm1Uid, ""));
  EXPECT_THAT(Post("/scheduler/filter", NamesArgs(pod2, {"node-a"})).body,
              HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm2", "uid-2", "node-a")).body, R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "data"}));
  EXPECT_EQ(c.status.reserved_for->vm, "vm2");
  EXPECT_EQ(c.status.reserved_for->vm_uid, "vm2-uid");
}

// At start, once the caches are synced: VMs that hold reservations but
// exist no more (deleted while pdc-extender was down) are released; VMs
// that exist, and reservations without a VM UID, are left alone.
TEST_F(KubernetesModeFilterTest, ReleasesVmsDeletedWhileNotWatching) {
  Put(directory_.vm_sink(), Object("vm1", kVm1Uid, ""));
  Put(directory_.vmi_sink(), Object("solo", "solo-uid", ""));
  auto bind = [&](const std::string& vm, const std::string& vm_uid, const std::string& node) {
    SchedulingRequest r{"default", vm, "virt-launcher-" + vm, "pod-" + vm, {}, {{kNvme, 1}}};
    r.vm_uid = vm_uid;
    ASSERT_OK(allocator_->Bind(r, node).status());
  };
  bind("vm1", kVm1Uid, "node-a");
  bind("solo", "solo-uid", "node-a");
  bind("gone", "gone-uid", "node-b");
  bind("nouid", "", "node-b");
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released,
                       ReleaseVmsNotInDirectory(directory_, *allocator_));
  EXPECT_THAT(released, ElementsAre(ClaimKey{"default", "gone-nvme"}));
  for (const Claim& c : allocator_->ListClaims("default")) {
    EXPECT_EQ(c.status.reserved_for.has_value(), c.key.name != "gone-nvme") << c.key.ToString();
  }
  ASSERT_OK_AND_ASSIGN(released, ReleaseVmsNotInDirectory(directory_, *allocator_));
  EXPECT_THAT(released, IsEmpty());
}

}  // namespace
}  // namespace pdc::extender::testing
