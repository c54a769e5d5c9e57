// VM-scoped ResourceClaims made from ResourceClaimTemplates, the way the
// StatefulSet controller makes a PVC per replica from volumeClaimTemplates:
// a KubeVirt VM that opted in (the label kPersistentClaimsLabel on its
// virt-launcher pod, which virt-controller copies from the VMI's labels,
// themselves the VM's spec.template.metadata.labels) gets, for each entry
// of its pod's spec.resourceClaims that names a resourceClaimTemplateName,
// one claim "<vm>-<entry>" owned by the VirtualMachine (its UID,
// controller: true), and the pod refers to it by resourceClaimName. The
// VM's own spec is never changed.
//
// The claim carries the annotation resource.kubernetes.io/pod-claim-name
// with the entry's name, as kube-controller-manager's resourceclaim
// controller writes on the claims it makes from a template
// (pkg/controller/resourceclaim/controller.go, handleClaim). The VMI still
// names the template, so virt-launcher (KubeVirt v1.8+, pkg/dra/utils.go,
// resolveClaimMetadata) reads the device metadata under
// resourceclaimtemplates/<entry>/<request>/; pdc-node's DRA driver writes
// it there for a claim with that annotation (driver/dra/device_metadata.h).
// The resourceclaim controller finds the claims of a pod by the pod's owner
// reference and only then compares the annotation, so a claim owned by a
// VirtualMachine is never taken for a pod's.
//
// Identity: a claim is the VM's only when its controller owner reference
// is the VirtualMachine with the VM's UID; a name is never identity. A
// claim of the same name owned by another UID (a VM deleted and made again
// under its name, whose old claim the garbage collector has not deleted
// yet) or by nobody is refused, with a reason naming the object.
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_DRA_VM_CLAIMS_H_
#define PDC_EXTENDER_DRA_VM_CLAIMS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/json_util.h"

namespace pdc::extender::dra {

// The opt-in: this label with the value "true" on the virt-launcher pod
// (set it in the VM's spec.template.metadata.labels).
inline constexpr std::string_view kPersistentClaimsLabel = "pdc.kubevirt.io/persistent-claims";
// What kube-controller-manager writes on a claim made from a pod's
// template entry: the entry's name (k8s.io/api/resource/v1,
// PodResourceClaimAnnotation).
inline constexpr std::string_view kPodClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name";

// The ResourceClaims of namespace `ns` (a create), and one template.
std::string ResourceClaimsPath(std::string_view ns);
std::string ResourceClaimTemplatePath(std::string_view ns, std::string_view name);

// One entry of a pod's spec.resourceClaims.
struct PodClaimEntry {
  size_t index = 0;            // Its place in the list (the JSON Patch's path).
  std::string name;            // The entry's name.
  std::string claim_name;      // resourceClaimName, or "".
  std::string template_name;   // resourceClaimTemplateName, or "".
};

// spec.resourceClaims of `pod` (or of a VM's spec.template, with `what`
// "VirtualMachine.spec.template"); an error names the field
// ("Pod.spec.resourceClaims[1].name: ...").
absl::StatusOr<std::vector<PodClaimEntry>> ReadPodClaimEntries(const api::json::Value& pod,
                                                               std::string_view what = "Pod");

// Whether `pod`'s labels opt it in (kPersistentClaimsLabel is "true").
bool OptedIn(const api::json::Value& pod);

// "<vm>-<entry>"; InvalidArgument when that is no valid object name (longer
// than 253 characters).
absl::StatusOr<std::string> VmClaimName(std::string_view vm, std::string_view entry);

// The ResourceClaim `name` in `ns` made from `template_object` (a whole
// resource.k8s.io/v1 ResourceClaimTemplate) for entry `entry` of VM `vm`
// with `vm_uid`: the template's spec.metadata labels and annotations, the
// annotation kPodClaimNameAnnotation = `entry`, an owner reference to the
// VirtualMachine (controller: true; no blockOwnerDeletion, which would
// need update on virtualmachines/finalizers), and the template's
// spec.spec. InvalidArgument naming the field when the template has no
// spec.spec object.
absl::StatusOr<std::string> VmClaimJson(const api::json::Value& template_object,
                                        std::string_view ns, std::string_view name,
                                        std::string_view entry, std::string_view vm,
                                        std::string_view vm_uid);

// OK when `claim` (a whole ResourceClaim read from the API) is the claim of
// VM `vm` with `vm_uid` and can be used: its controller owner is that
// VirtualMachine and it is not being deleted. FailedPrecondition otherwise,
// saying why and what will let the pod through ("ResourceClaim ns/x belongs
// to VirtualMachine vm1 (uid ...), not to this one (uid ...): ...").
absl::Status JudgeVmClaim(const api::json::Value& claim, std::string_view ns,
                          std::string_view name, std::string_view vm, std::string_view vm_uid);

}  // namespace pdc::extender::dra

#endif  // PDC_EXTENDER_DRA_VM_CLAIMS_H_
