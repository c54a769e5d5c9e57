// Kubernetes mode: which VM a pod belongs to comes from its owner chain
// (pod -> VirtualMachineInstance -> VirtualMachine), matched by UID, never
// from names or labels. The directory's rules, then filter and bind through
// the Router with a directory.
#include "extender/vm_directory.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "rapidjson/document.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

// The VMI uid VirtLauncherPod's owner reference names.
constexpr char kVmiUid[] = "7f0c1c7e-3f57-4a36-9d0a-1d1f4a2c8b11";
constexpr char kVmUid[] = "5b2d3c1a-0000-4000-8000-00000000a001";

std::string Object(const std::string& name, const std::string& uid, const std::string& owner) {
  return absl::StrCat(R"({"metadata":{"name":")", name, R"(","namespace":"default","uid":")", uid,
                      R"(","resourceVersion":"7")", owner.empty() ? "" : ",", owner, "}}");
}
std::string OwnedBy(const std::string& kind, const std::string& name, const std::string& uid) {
  return absl::StrCat(R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":")", kind,
                      R"(","name":")", name, R"(","uid":")", uid, R"(","controller":true}])");
}

void Put(ReflectorSink* sink, const std::string& json) {
  rapidjson::Document d;
  ASSERT_TRUE(api::json::Parse(json, &d).ok());
  sink->Upsert(d);
}
void Delete(ReflectorSink* sink, const std::string& json) {
  rapidjson::Document d;
  ASSERT_TRUE(api::json::Parse(json, &d).ok());
  sink->Remove(d);
}

api::OwnerReference VmiRef(const std::string& uid = kVmiUid) {
  return {"kubevirt.io/v1", "VirtualMachineInstance", "vm1", uid, true};
}

TEST(VmDirectoryTest, FollowsThePodsVmiToItsVm) {
  VmDirectory d;
  Put(d.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVmUid)));
  Put(d.vm_sink(), Object("vm1", kVmUid, ""));
  const api::OwnerReference ref = VmiRef();
  ASSERT_OK_AND_ASSIGN(VmRef vm, d.Resolve("default", &ref));
  EXPECT_EQ(vm.name, "vm1");
  EXPECT_EQ(vm.uid, kVmUid);
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
};

class BrokenChainTest : public ::testing::TestWithParam<Broken> {};

TEST_P(BrokenChainTest, IsNotAVmPod) {
  const Broken& c = GetParam();
  VmDirectory d;
  if (!c.vmi.empty()) Put(d.vmi_sink(), c.vmi);
  if (!c.vm.empty()) Put(d.vm_sink(), c.vm);
  EXPECT_THAT(d.Resolve("default", c.no_controller ? nullptr : &c.controller).status(),
              pdc::testing::StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.why)));
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
                                            "is not known"},
        // The VMI was deleted and re-created: the pod belongs to the old one.
        Broken{.name = "VmiRecreated",
               .vmi = Object("vm1", "new-vmi-uid", OwnedBy("VirtualMachine", "vm1", kVmUid)),
               .why = "which is gone (the one by that name now has uid new-vmi-uid)"},
        Broken{.name = "VmNotKnown",
               .vmi = Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVmUid)),
               .why = "VirtualMachine default/vm1 that owns VirtualMachineInstance vm1 is not known"},
        // The VM was deleted and re-created under the same name.
        Broken{.name = "VmRecreated",
               .vmi = Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVmUid)),
               .vm = Object("vm1", "new-vm-uid", ""),
               .why = "belongs to VirtualMachine vm1 with uid " + std::string(kVmUid) +
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

class KubernetesModeFilterTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
    ctx_.vms = &directory_;
  }
  void TearDown() override { ctx_.vms = nullptr; }
  VmDirectory directory_;
};

TEST_F(KubernetesModeFilterTest, AVmPodIsScheduledAsItsVm) {
  Put(directory_.vmi_sink(), Object("vm1", kVmiUid, OwnedBy("VirtualMachine", "vm1", kVmUid)));
  Put(directory_.vm_sink(), Object("vm1", kVmUid, ""));
  HttpResponse f = Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body, R"({"Error":""})");
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.node, "node-a");
}

// The pod carries vm.kubevirt.io/name=vm1, but its VMI is not vm1's: the
// label decides nothing, and no claim is taken over.
TEST_F(KubernetesModeFilterTest, ALabelAloneMakesNoVmPod) {
  Put(directory_.vmi_sink(), Object("vm1", "another-vmi", OwnedBy("VirtualMachine", "vm1", kVmUid)));
  Put(directory_.vm_sink(), Object("vm1", kVmUid, ""));
  HttpResponse f = Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}));
  EXPECT_THAT(f.body, HasSubstr("is gone (the one by that name now has uid another-vmi)"));
  EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":null)"));
  EXPECT_EQ(allocator_->Stats().claims_pending + allocator_->Stats().claims_bound, 0u);
}

}  // namespace
}  // namespace pdc::extender::testing
