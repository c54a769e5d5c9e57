// VM-scoped DRA claims from templates (extender/dra/vm_claims.h), through
// the webhook that rewrites an opted-in virt-launcher pod (VmClaimWebhook)
// on the kube-apiserver double, with the claim keeper of pdc-extender, the
// DRA scheduling double and the resourceclaim controller double of
// DraKeeperOnDoubleTest: the claim is made once per VM and entry, owned by
// the VM, kept across stop and start, never adopted by a VM made again
// under the same name; and the device metadata lands where virt-launcher
// looks for it.
#include <memory>

#include "absl/strings/escaping.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/device_metadata.h"
#include "extender/dra/vm_claims.h"
#include "extender/vm_claim_webhook.h"
#include "kube/kube_http_client.h"
#include "tests/kube/dra_keeper_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kTemplate = "nvme-template";
constexpr std::string_view kEntry = "data";

// Where virt-launcher (KubeVirt v1.8+, pkg/dra/utils.go,
// resolveClaimMetadata) reads the metadata of a VMI's claim entry: under
// resourceclaims/<claim> when the VMI's entry names a claim, else under
// resourceclaimtemplates/<entry name>; decided from the VMI's spec.
std::string VirtLauncherMetadataDir(bool vmi_names_claim, std::string_view claim,
                                    std::string_view entry, std::string_view request) {
  return Cat("/var/run/kubernetes.io/dra-device-attributes/",
             vmi_names_claim ? Cat("resourceclaims/", claim) : Cat("resourceclaimtemplates/", entry),
             "/", request);
}

// Whether the AdmissionReview answer allows the request.
bool Allowed(const KubeReply& review) {
  const kube::Value* v = kube::Find(review.json, {"response", "allowed"});
  return v != nullptr && v->IsBool() && v->GetBool();
}
// The first owner reference of an object, as JSON ("" when none).
std::string FirstOwner(const KubeReply& object) {
  const kube::Value* l = kube::Find(object.json, {"metadata", "ownerReferences"});
  if (l == nullptr || !l->IsArray() || l->Empty()) return "";
  return kube::ToJson((*l)[0]);
}

class DraVmClaimsOnDoubleTest : public DraKeeperOnDoubleTest {
 protected:
  void SetUp() override {
    DraKeeperOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    pdc::kube::KubeClientConfig c;
    c.server = Url();
    kube_api_ = std::move(pdc::kube::KubeApi::Connect(c)).value();
    maker_ = std::make_unique<extender::dra::VmClaimMaker>(kube_api_.get(), absl::Seconds(5));
    webhook_ = std::make_unique<extender::VmClaimWebhook>(&directory_, maker_.get(), nullptr);
    ASSERT_EQ(Call("POST", Cat("/apis/resource.k8s.io/v1/namespaces/", ns_,
                               "/resourceclaimtemplates"),
                   Cat(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",)",
                       R"("metadata":{"name":")", kTemplate, R"("},"spec":{"metadata":)",
                       R"({"labels":{"team":"db"}},"spec":{"devices":{"requests":[{"name":"disk",)",
                       R"("exactly":{"deviceClassName":")", dra::kClass, R"(","count":1}}]}}}})"))
                  .status,
              201);
  }

  // What the directory of pdc-extender would hold: the stored object at
  // `path`, upserted into `sink`.
  void Feed(pdc::kube::ReflectorSink* sink, const std::string& path) {
    KubeReply r = Call("GET", path);
    ASSERT_EQ(r.status, 200) << r.text;
    sink->Upsert(r.json);
  }

  // VM `vm` (uid `vm_uid`) starts with an opted-in VMI; returns the VMI uid.
  std::string NewVmi(const std::string& vm, const std::string& vm_uid) {
    const std::string vmi_uid = Create(
        Vmis(), Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                    vm, R"(",)", Owner("VirtualMachine", vm, vm_uid), R"(},"spec":{}})"));
    Feed(directory_.vm_sink(), Vms(Cat("/", vm)));
    Feed(directory_.vmi_sink(), Vmis(Cat("/", vm)));
    return vmi_uid;
  }

  // The virt-launcher pod of the VMI as virt-controller makes it: the
  // VMI's template entry copied, the opt-in label copied from the VMI.
  std::string LauncherAtCreate(const std::string& vm, const std::string& vmi_uid,
                               bool opted_in = true) {
    return Cat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"virt-launcher-)", vm,
               R"(-","namespace":")", ns_, R"(","labels":{"kubevirt.io":"virt-launcher")",
               opted_in ? Cat(R"(,")", extender::dra::kPersistentClaimsLabel, R"(":"true")") : "",
               R"(},)", Owner("VirtualMachineInstance", vm, vmi_uid),
               R"(},"spec":{"containers":[{"name":"compute","image":"virt-launcher"}],)",
               R"("resourceClaims":[{"name":")", kEntry, R"(","resourceClaimTemplateName":")",
               kTemplate, R"("}]}})");
  }

  // kube-apiserver's call of the webhook for `pod`: the AdmissionReview
  // response (parsed into `out`).
  KubeReply Review(const std::string& pod, bool dry_run = false,
                   const extender::VmClaimWebhook* hook = nullptr) {
    net::HttpRequest req;
    req.method = "POST";
    req.target = std::string(extender::kVmClaimsWebhookPath);
    req.body = Cat(R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"r-1",)",
                   R"("kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},)",
                   R"("namespace":")", ns_, R"(","operation":"CREATE","dryRun":)",
                   dry_run ? "true" : "false", R"(,"object":)", pod, "}}");
    net::HttpResponse r = (hook != nullptr ? hook : webhook_.get())->Handle(std::move(req));
    KubeReply out;
    out.status = r.status;
    out.text = r.body;
    out.json.Parse(out.text.data(), out.text.size());
    return out;
  }
  // The JSON Patch of an allowed review, decoded.
  static std::string PatchOf(const KubeReply& review) {
    std::string patch;
    absl::Base64Unescape(review.Str({"response", "patch"}), &patch);
    return patch;
  }
  // Starts VM `vm` through the webhook: the pod as the patch made it,
  // placed by the scheduling double. Returns the placement.
  absl::StatusOr<DraSchedulerDouble::Placement> StartThroughWebhook(const std::string& vm,
                                                                   const std::string& vm_uid,
                                                                   const std::string& pod) {
    const std::string vmi_uid = NewVmi(vm, vm_uid);
    KubeReply review = Review(LauncherAtCreate(vm, vmi_uid));
    if (!Allowed(review)) {
      return absl::FailedPreconditionError(review.text);
    }
    const std::string claim = Cat(vm, "-", kEntry);
    EXPECT_EQ(PatchOf(review),
              Cat(R"([{"op":"replace","path":"/spec/resourceClaims/0","value":{"name":")", kEntry,
                  R"(","resourceClaimName":")", claim, R"("}}])"));
    std::string json = dra::PodJson(pod, claim, Owner("VirtualMachineInstance", vm, vmi_uid));
    json.insert(json.find(R"("ownerReferences")"),
                Cat(R"("labels":{"kubevirt.io":"virt-launcher","vm.kubevirt.io/name":")", vm,
                    R"("},)"));
    Create(Pods(), json);
    return scheduler_->Schedule(ns_, pod, claim, {"node-a", "node-b"});
  }
  KubeReply AwaitVmClaimReservedFor(const std::string& claim, std::vector<std::string> want) {
    return AwaitObject(dra::ClaimPath(ns_, claim),
                       [&](const KubeReply& r) { return dra::ReservedFor(r.json) == want; });
  }

  extender::VmDirectory directory_;
  std::unique_ptr<pdc::kube::KubeApi> kube_api_;
  std::unique_ptr<extender::dra::VmClaimMaker> maker_;
  std::unique_ptr<extender::VmClaimWebhook> webhook_;
};

TEST_P(DraVmClaimsOnDoubleTest, TheVmsOwnClaimIsMadeOnceKeptAndNeverAdoptedByName) {
  const std::string vm_uid = NewVm("vm1");
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement first,
                       StartThroughWebhook("vm1", vm_uid, "launcher-1"));
  EXPECT_TRUE(first.allocated_now);
  // The claim: owned by the VM by UID, the template's labels and spec, the
  // entry's name in the pod-claim-name annotation.
  KubeReply c = Call("GET", dra::ClaimPath(ns_, "vm1-data"));
  ASSERT_EQ(c.status, 200);
  EXPECT_EQ(FirstOwner(c),
            Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"vm1","uid":")",
                vm_uid, R"(","controller":true})"));
  EXPECT_EQ(c.Str({"metadata", "labels", "team"}), "db");
  EXPECT_EQ(c.Str({"metadata", "annotations", std::string(extender::dra::kPodClaimNameAnnotation)}),
            kEntry);
  EXPECT_THAT(c.text, HasSubstr(Cat(R"("deviceClassName":")", dra::kClass, R"(")")));
  const std::vector<AllocatedDevice> device = AllocatedDevices(c.json);
  ASSERT_EQ(device.size(), 1u);
  AwaitVmClaimReservedFor("vm1-data", {"pods/launcher-1", "virtualmachines/vm1"});

  // Stop and start: the same claim, the same device.
  StopVm("vm1", "launcher-1");
  AwaitVmClaimReservedFor("vm1-data", {"virtualmachines/vm1"});
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement again,
                       StartThroughWebhook("vm1", vm_uid, "launcher-2"));
  EXPECT_FALSE(again.allocated_now);
  c = AwaitVmClaimReservedFor("vm1-data", {"virtualmachines/vm1", "pods/launcher-2"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  StopVm("vm1", "launcher-2");
  AwaitVmClaimReservedFor("vm1-data", {"virtualmachines/vm1"});

  // Deleted and made again under its name while the old claim exists (the
  // garbage collector has not deleted it yet): its pod is refused, naming
  // the object and the old UID; nothing is adopted.
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  Call("DELETE", Vmis("/vm1"));
  const std::string new_uid = NewVm("vm1");
  const std::string vmi_uid = NewVmi("vm1", new_uid);
  KubeReply review = Review(LauncherAtCreate("vm1", vmi_uid));
  EXPECT_FALSE(Allowed(review)) << review.text;
  EXPECT_THAT(review.Str({"response", "status", "message"}),
              HasSubstr(Cat("ResourceClaim ", ns_, "/vm1-data belongs to VirtualMachine vm1 (uid ",
                            vm_uid, ")")));
  c = Call("GET", dra::ClaimPath(ns_, "vm1-data"));
  EXPECT_THAT(FirstOwner(c), HasSubstr(vm_uid));
  // The garbage collector deletes it (the finalizer keeps it a while):
  // still refused, now because it is being deleted by the old owner's
  // rules; once gone, the new VM gets a new claim of its own.
  ASSERT_EQ(Call("DELETE", dra::ClaimPath(ns_, "vm1-data")).status, 200);
  review = Review(LauncherAtCreate("vm1", vmi_uid));
  EXPECT_FALSE(Allowed(review)) << review.text;
  for (int i = 0; i < 20 && Call("GET", dra::ClaimPath(ns_, "vm1-data")).status == 200; ++i) {
    (void)controller_->SyncClaim(ns_, "vm1-data");
  }
  ASSERT_EQ(Call("GET", dra::ClaimPath(ns_, "vm1-data")).status, 404);
  review = Review(LauncherAtCreate("vm1", vmi_uid));
  EXPECT_TRUE(Allowed(review)) << review.text;
  c = Call("GET", dra::ClaimPath(ns_, "vm1-data"));
  EXPECT_THAT(FirstOwner(c), HasSubstr(new_uid));
  EXPECT_TRUE(AllocatedDevices(c.json).empty()) << "a new claim, never the old allocation";
}

TEST_P(DraVmClaimsOnDoubleTest, WhatIsNotTheVmsIsRefusedWithAReason) {
  const std::string vm_uid = NewVm("vm2");
  const std::string vmi_uid = NewVmi("vm2", vm_uid);
  // A claim of that name the user made: never taken.
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), dra::ClaimJson("vm2-data")).status, 201);
  KubeReply review = Review(LauncherAtCreate("vm2", vmi_uid));
  EXPECT_FALSE(Allowed(review)) << review.text;
  EXPECT_THAT(review.Str({"response", "status", "message"}),
              HasSubstr(Cat("ResourceClaim ", ns_, "/vm2-data exists and is not owned by a VirtualMachine")));
  ASSERT_EQ(Call("DELETE", dra::ClaimPath(ns_, "vm2-data")).status, 200);

  // A dry run creates nothing.
  review = Review(LauncherAtCreate("vm2", vmi_uid), /*dry_run=*/true);
  EXPECT_TRUE(Allowed(review)) << review.text;
  EXPECT_EQ(Call("GET", dra::ClaimPath(ns_, "vm2-data")).status, 404);

  // A pod without the label is left as it is (pod-scoped claims).
  review = Review(LauncherAtCreate("vm2", vmi_uid, /*opted_in=*/false));
  EXPECT_TRUE(Allowed(review));
  EXPECT_EQ(review.Str({"response", "patch"}), "");

  // A VMI pdc-extender has not seen: refused, virt-controller retries.
  extender::VmDirectory empty;
  extender::VmClaimWebhook blind(&empty, maker_.get(), nullptr);
  review = Review(LauncherAtCreate("vm2", vmi_uid), false, &blind);
  EXPECT_FALSE(Allowed(review)) << review.text;
  EXPECT_THAT(review.Str({"response", "status", "message"}),
              HasSubstr("cannot tell which VirtualMachine the pod is for"));
  // pdc-extender without the feature (no keeper): refused, not let through.
  extender::VmClaimWebhook off(&directory_, nullptr, nullptr);
  review = Review(LauncherAtCreate("vm2", vmi_uid), false, &off);
  EXPECT_FALSE(Allowed(review)) << review.text;
  EXPECT_THAT(review.Str({"response", "status", "message"}),
              HasSubstr("set extender.dra.keeper.enabled"));
  // A missing template: refused, naming it.
  ASSERT_EQ(Call("DELETE", Cat("/apis/resource.k8s.io/v1/namespaces/", ns_,
                               "/resourceclaimtemplates/", kTemplate)).status,
            200);
  review = Review(LauncherAtCreate("vm2", vmi_uid));
  EXPECT_FALSE(Allowed(review)) << review.text;
  EXPECT_THAT(review.Str({"response", "status", "message"}),
              HasSubstr(Cat("ResourceClaimTemplate ", ns_, "/", kTemplate)));
  EXPECT_EQ(Call("GET", dra::ClaimPath(ns_, "vm2-data")).status, 404);
}

// The VMI still names the template while the pod names the VM's claim:
// virt-launcher looks under resourceclaimtemplates/<entry>/, and pdc-node's
// driver writes the metadata there for the claim the webhook made.
TEST_P(DraVmClaimsOnDoubleTest, TheDeviceMetadataIsWhereVirtLauncherLooks) {
  const std::string vm_uid = NewVm("vm3");
  ASSERT_OK(StartThroughWebhook("vm3", vm_uid, "launcher-1").status());
  KubeReply c = Call("GET", dra::ClaimPath(ns_, "vm3-data"));
  ASSERT_EQ(c.status, 200);
  ASSERT_OK_AND_ASSIGN(driver::dra::ResourceClaimView view,
                       driver::dra::ParseResourceClaim(c.text));
  ASSERT_EQ(view.devices.size(), 1u);
  const driver::dra::MetadataClaim meta{view.ns, view.name, view.uid, view.pod_claim_name};
  EXPECT_EQ(driver::dra::MetadataContainerDir(meta, view.devices[0].request),
            VirtLauncherMetadataDir(/*vmi_names_claim=*/false, "vm3-data", kEntry, "disk"));
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Controllers, DraVmClaimsOnDoubleTest,
                         ::testing::Values(ClaimControllerVersion::kVersion134,
                                           ClaimControllerVersion::kVersion136),
                         [](const auto& info) {
                           return info.param == ClaimControllerVersion::kVersion134 ? "v134"
                                                                                    : "v136";
                         });

}  // namespace pdc::testing
