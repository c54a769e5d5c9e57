// Which pod is a VM's, in Kubernetes mode (docs/design.md §4.5), against
// the kube-apiserver double on a real etcd, the invariants
// (tests/kube/claim_invariants.h) checked after every step. Anyone who may
// create pods in a namespace can copy a virt-launcher pod's labels and owner
// references; such a pod takes over no VM's claim:
//  - the pod's label kubevirt.io/created-by must name the UID of its
//    controller VirtualMachineInstance, as virt-controller sets it
//    (podLabels, pkg/virt-controller/services/template.go);
//  - a VMI has one launcher pod (virt-controller's CurrentVMIPod; a VMI with
//    host devices is never live-migrated): once a pod of a VMI holds the
//    VM's claim, no other pod of that VMI takes it over, also after a
//    restart of pdc-extender (the VMI's UID is in the claim's
//    status.reservedFor.vmiUid);
//  - the VM's next start (a new VMI) takes it over as before.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/kube/claim_invariants.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PodOwnershipOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    invariants_ = std::make_unique<ClaimInvariants>(client_.get(), ns_);
  }
  void TearDown() override {
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }
  void Step(const std::string& step) {
    EXPECT_THAT(invariants_->Check(), IsEmpty()) << "after step: " << step;
  }
  // A pod made from `launcher` (a pod's JSON as the API stored it) under
  // another name: the same labels, owner references and spec, as a tenant
  // with `kubectl get pod -o json` makes it. Returns the stored pod.
  // `created_by`: the copy's label kubevirt.io/created-by, when not the
  // launcher's ("-": none).
  std::string Forge(const std::string& launcher, const std::string& launcher_name,
                    const std::string& name, const std::string& created_by = "") {
    rapidjson::Document d;
    d.Parse(launcher.data(), launcher.size());
    rapidjson::Value& meta = d["metadata"];
    if (created_by == "-") {
      meta["labels"].RemoveMember("kubevirt.io/created-by");
    } else if (!created_by.empty()) {
      meta["labels"]["kubevirt.io/created-by"].SetString(
          created_by.data(), static_cast<rapidjson::SizeType>(created_by.size()),
          d.GetAllocator());
    }
    for (const char* k : {"uid", "resourceVersion", "creationTimestamp", "generation",
                          "managedFields"}) {
      meta.RemoveMember(k);
    }
    meta["name"].SetString(name.data(), static_cast<rapidjson::SizeType>(name.size()),
                           d.GetAllocator());
    const std::string body = absl::StrReplaceAll(kube::ToJson(d), {{launcher_name, name}});
    KubeReply r = Call("POST", Pods(), body);
    EXPECT_EQ(r.status, 201) << r.text;
    return r.text;
  }
  std::string UidOf(const std::string& pod_json) {
    rapidjson::Document d;
    d.Parse(pod_json.data(), pod_json.size());
    return kube::GetString(d, {"metadata", "uid"});
  }

  std::unique_ptr<ClaimInvariants> invariants_;
};

TEST_F(PodOwnershipOnDoubleTest, ACopyOfTheLauncherPodTakesOverNothing) {
  configure_ = [](PdcConfig* c) { c->extender.allocator.serialize_handoffs = false; };
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string vmi_uid = CreateVm("vm1");
  const std::string launcher = CreatePod("vm1", "virt-launcher-vm1-aaaaa", vmi_uid);
  const std::string launcher_uid = UidOf(launcher);
  EXPECT_THAT(Filter(launcher).body, HasSubstr(R"("NodeNames":["node-a"])"));
  ASSERT_EQ(Bind("virt-launcher-vm1-aaaaa", launcher_uid).body, R"({"Error":""})");
  invariants_->Acknowledged({"virt-launcher-vm1-aaaaa", launcher_uid, {"vm1-nvme"}});
  Step("vm1 started");
  // What pdc wrote into the API names the launcher's VMI.
  EXPECT_EQ(Call("GET", Claims("/vm1-nvme")).Str({"status", "reservedFor", "vmiUid"}), vmi_uid);

  // A copy: the same labels (kubevirt.io/created-by too) and owner
  // references, for pdc's scheduler.
  const std::string forged = Forge(launcher, "virt-launcher-vm1-aaaaa", "virt-launcher-vm1-zzzzz");
  const std::string forged_uid = UidOf(forged);
  for (bool restarted : {false, true}) {
    SCOPED_TRACE(restarted ? "after a restart of pdc-extender" : "same process");
    if (restarted) {
      RestartExtender(StoreKind::kKubernetes);
      ASSERT_TRUE(AwaitReady());
      ReportNodeA();
    }
    const std::string answer = Filter(forged).body;
    EXPECT_THAT(answer, HasSubstr(R"("NodeNames":[])"));
    EXPECT_THAT(answer, HasSubstr(absl::StrCat(
                            "claim ", ns_, "/vm1-nvme is held by pod virt-launcher-vm1-aaaaa, "
                            "the launcher pod of VirtualMachineInstance uid ",
                            vmi_uid)));
    EXPECT_THAT(answer, HasSubstr("pod virt-launcher-vm1-zzzzz of the same "
                                  "VirtualMachineInstance takes over nothing"));
    EXPECT_THAT(Bind("virt-launcher-vm1-zzzzz", forged_uid).body,
                HasSubstr("takes over nothing"));
    Step("a copy of vm1's launcher pod filtered and bound");
    EXPECT_EQ(Call("GET", Claims("/vm1-nvme")).Str({"status", "reservedFor", "podUid"}),
              launcher_uid);
  }

  // The VM's next start (virt-controller's new VMI and its pod) takes the
  // claim over, as before.
  Call("DELETE", Pods("/virt-launcher-vm1-aaaaa"),
       R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})");
  const std::string next_vmi = RestartVmi("vm1");
  const std::string next = CreatePod("vm1", "virt-launcher-vm1-bbbbb", next_vmi);
  const std::string next_uid = UidOf(next);
  EXPECT_THAT(Filter(next).body, HasSubstr(R"("NodeNames":["node-a"])"));
  ASSERT_EQ(Bind("virt-launcher-vm1-bbbbb", next_uid).body, R"({"Error":""})");
  invariants_->Acknowledged({"virt-launcher-vm1-bbbbb", next_uid, {"vm1-nvme"}});
  Step("vm1 started again");
  // The copy of the old VMI's pod is no pod of a VM any more.
  EXPECT_THAT(Filter(forged).body, HasSubstr("which is gone"));
  Step("the copy filtered again");
}

// A pod whose owner references name a VMI by its UID but whose label
// kubevirt.io/created-by is missing or names another UID was not made by
// virt-controller: it is nobody's VM pod, and filter says why.
TEST_F(PodOwnershipOnDoubleTest, APodWithoutItsVmisCreatedByLabelIsNobodys) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string vmi_uid = CreateVm("vm2");
  const std::string launcher = CreatePod("vm2", "virt-launcher-vm2-aaaaa", vmi_uid);
  struct Row {
    std::string name;
    std::string created_by;
    std::string why;
  };
  const std::vector<Row> rows = {
      {"virt-launcher-vm2-nolabel", "-", "it has no label naming"},
      {"virt-launcher-vm2-other", "00000000-0000-4000-8000-000000000001",
       "its label does not name"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::string pod = Forge(launcher, "virt-launcher-vm2-aaaaa", row.name, row.created_by);
    const std::string answer = Filter(pod).body;
    EXPECT_THAT(answer, HasSubstr(R"("NodeNames":null)"));
    EXPECT_THAT(answer, HasSubstr(absl::StrCat(row.why,
                                               " the UID of its controller VirtualMachineInstance "
                                               "vm2 (",
                                               vmi_uid, ")")));
    EXPECT_THAT(Bind(row.name, UidOf(pod)).body, HasSubstr("kubevirt.io/created-by"));
    Step(absl::StrCat(row.name, " filtered and bound"));
  }
  // The launcher itself is vm2's.
  EXPECT_THAT(Filter(launcher).body, HasSubstr(R"("NodeNames":["node-a"])"));
}

}  // namespace
}  // namespace pdc::testing
