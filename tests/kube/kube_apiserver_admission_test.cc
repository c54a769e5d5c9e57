// The authorization and admission refusals of the kube-apiserver double
// (tests/testing/kube_admission.h): each is a 403 Forbidden v1 Status as
// kube-apiserver writes it, and refuses only what it names.
#include <string>

#include "tests/kube/kube_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

class KubeApiServerAdmissionTest : public KubeDoubleTest {
 protected:
  void TearDown() override {
    if (api_ != nullptr) api_->admission().Clear();
  }
  std::string Vm(const std::string& name) {
    return Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
               name, R"("},"spec":{}})");
  }
  // A claim owned by VM `vm_uid`, blocking its deletion or not.
  std::string OwnedClaim(const std::string& name, const std::string& vm_uid, bool block) {
    return ClaimJson(name).substr(0, ClaimJson(name).find(R"("},"spec")")) +
           Cat(R"(","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",)",
               R"("name":"vm1","uid":")", vm_uid, R"(","controller":true,"blockOwnerDeletion":)",
               block ? "true" : "false", R"(}]},"spec":{"count":1}})");
  }
};

TEST_F(KubeApiServerAdmissionTest, AForbiddenVerbIsRefusedWithTheAuthorizersMessage) {
  CreateClaim("c1");
  api_->admission().Forbid({"pdc.kubevirt.io", "persistentdeviceclaims/status", "patch", ns_});
  KubeReply r = Call("PATCH", Claims("/c1/status"), R"({"status":{"phase":"Bound"}})",
                     "application/merge-patch+json");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.Str({"kind"}), "Status");
  EXPECT_EQ(r.Str({"reason"}), "Forbidden");
  EXPECT_EQ(r.Str({"details", "kind"}), "persistentdeviceclaims");
  EXPECT_EQ(r.Str({"details", "group"}), "pdc.kubevirt.io");
  EXPECT_EQ(r.Str({"message"}),
            Cat("persistentdeviceclaims.pdc.kubevirt.io \"c1\" is forbidden: User "
                "\"system:serviceaccount:pdc-system:pdc-extender\" cannot patch resource "
                "\"persistentdeviceclaims/status\" in API group \"pdc.kubevirt.io\" in the "
                "namespace \"",
                ns_, "\""));
  // The main resource and other verbs are not refused.
  EXPECT_EQ(Call("PATCH", Claims("/c1"), R"({"metadata":{"labels":{"a":"b"}}})",
                 "application/merge-patch+json")
                .status,
            200);
  EXPECT_EQ(Call("GET", Claims("/c1/status")).status, 200);
  api_->admission().Clear();
  EXPECT_EQ(Call("PATCH", Claims("/c1/status"), R"({"status":{"phase":"Bound"}})",
                 "application/merge-patch+json")
                .status,
            200);
}

TEST_F(KubeApiServerAdmissionTest, BlockOwnerDeletionNeedsUpdateOnTheOwnersFinalizers) {
  KubeReply vm = Call("POST", Vms(), Vm("vm1"));
  ASSERT_EQ(vm.status, 201) << vm.text;
  const std::string vm_uid = vm.Str({"metadata", "uid"});
  api_->admission().EnforceOwnerReferencesPermission(true);
  // Allowed while nothing forbids it.
  EXPECT_EQ(Call("POST", Claims(), OwnedClaim("a", vm_uid, true)).status, 201);
  api_->admission().Forbid({"kubevirt.io", "virtualmachines/finalizers", "update", ""});
  KubeReply refused = Call("POST", Claims(), OwnedClaim("b", vm_uid, true));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.Str({"reason"}), "Forbidden");
  EXPECT_THAT(refused.Str({"message"}),
              HasSubstr("persistentdeviceclaims.pdc.kubevirt.io \"b\" is forbidden: cannot set "
                        "blockOwnerDeletion if an ownerReference refers to a resource you can't "
                        "set finalizers on"));
  EXPECT_EQ(Call("GET", Claims("/b")).status, 404);
  // An owner that does not block its deletion needs nothing.
  EXPECT_EQ(Call("POST", Claims(), OwnedClaim("c", vm_uid, false)).status, 201);
  // Turning blockOwnerDeletion on in an update is refused too; keeping it is not.
  KubeReply c = Call("GET", Claims("/c"));
  std::string blocking = c.text;
  blocking.replace(blocking.find(R"("blockOwnerDeletion":false)"),
                   std::string(R"("blockOwnerDeletion":false)").size(),
                   R"("blockOwnerDeletion":true)");
  EXPECT_EQ(Call("PUT", Claims("/c"), blocking).status, 403);
  KubeReply a = Call("GET", Claims("/a"));
  EXPECT_EQ(Call("PUT", Claims("/a"), a.text).status, 200);
  // The rule is off: admitted.
  api_->admission().EnforceOwnerReferencesPermission(false);
  EXPECT_EQ(Call("POST", Claims(), OwnedClaim("b", vm_uid, true)).status, 201);
}

TEST_F(KubeApiServerAdmissionTest, ANamespaceBeingDeletedTakesNoNewContent) {
  CreateClaim("before");
  api_->admission().TerminateNamespace(ns_);
  KubeReply r = Call("POST", Claims(), ClaimJson("after"));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.Str({"reason"}), "Forbidden");
  EXPECT_EQ(r.Str({"message"}),
            Cat("persistentdeviceclaims.pdc.kubevirt.io \"after\" is forbidden: unable to "
                "create new content in namespace ",
                ns_, " because it is being terminated"));
  // What exists may still change.
  EXPECT_EQ(Call("PATCH", Claims("/before/status"), R"({"status":{"phase":"Pending"}})",
                 "application/merge-patch+json")
                .status,
            200);
}

TEST_F(KubeApiServerAdmissionTest, AQuotaRefusesCreatesOfItsResourceInItsNamespace) {
  api_->admission().ExceedQuota(ns_, "pdc.kubevirt.io", "persistentdeviceclaims");
  KubeReply r = Call("POST", Claims(), ClaimJson("c1"));
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(r.Str({"message"}), HasSubstr("is forbidden: exceeded quota: "));
  // Other resources are not counted.
  EXPECT_EQ(Call("POST", Vms(), Vm("vm1")).status, 201);
}

}  // namespace
}  // namespace pdc::testing
