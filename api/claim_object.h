// The PersistentDeviceClaim object (pdc.kubevirt.io/v1alpha1, the CRD in
// deploy/crd/) as pdc-extender reads and writes it in Kubernetes mode
// (docs/design.md §4.8): metadata from api/kube_objects.h, spec and status
// with the same members, names and bounds as the REST API's claim
// (api/rest_json.h), so one codec decides what a claim may hold.
//
// The status is pdc's durable record of the claim in this mode; it is
// written through the status subresource as a JSON merge patch that carries
// metadata.uid and metadata.resourceVersion, which kube-apiserver treats as
// preconditions (a stale one is 409 Conflict).
// Thread-safety: pure functions.
#ifndef PDC_API_CLAIM_OBJECT_H_
#define PDC_API_CLAIM_OBJECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "api/rest_json.h"
#include "model/types.h"

namespace pdc::api {

inline constexpr std::string_view kClaimGroupVersion = "pdc.kubevirt.io/v1alpha1";
inline constexpr std::string_view kClaimKind = "PersistentDeviceClaim";
// Kept on every claim pdc manages, like kubernetes.io/pvc-protection: the
// object stays until pdc has let the claim go (no VM pod uses it, its
// devices are dealt with by the reclaim policy).
inline constexpr std::string_view kClaimFinalizer = "pdc.kubevirt.io/device-protection";
// Which VM (UID) owns a claim pdc generated from the VM's template is pdc's
// to say, never the spec's: pdc writes it into status.ownerVMUid (the
// status subresource) and, at create, into this annotation (the create
// cannot set status). Read in that order; spec.ownerVMUid is read only for
// objects of earlier versions that have neither.
inline constexpr std::string_view kOwnerVmUidAnnotation = "pdc.kubevirt.io/owner-vm-uid";

// /apis/pdc.kubevirt.io/v1alpha1/namespaces/<ns>/persistentdeviceclaims.
// Names must be valid (they go into a path).
std::string ClaimCollectionPath(std::string_view ns);
// .../namespaces/<ns>/persistentdeviceclaims/<name>
std::string ClaimObjectPath(const ClaimKey& key);

// One of status.conditions, a metav1.Condition (k8s.io/apimachinery
// pkg/apis/meta/v1/types.go): `type` is CamelCase, `status` True or False,
// `reason` a CamelCase word, `message` a sentence for people.
struct ClaimCondition {
  std::string type;
  bool status = false;
  std::string reason;
  std::string message;
  absl::Time last_transition = absl::UnixEpoch();
  int64_t observed_generation = 0;
  bool operator==(const ClaimCondition&) const = default;
};

// The condition types of a claim (docs/rest-api.md).
inline constexpr std::string_view kConditionBound = "Bound";
inline constexpr std::string_view kConditionReserved = "Reserved";
inline constexpr std::string_view kConditionDeviceConflict = "DeviceConflict";
inline constexpr std::string_view kConditionReclaiming = "Reclaiming";
inline constexpr std::string_view kConditionWithheld = "Withheld";

// The conditions `status` implies, in this order: Bound (True when Bound;
// False with reason Pending or DeviceLost), Reserved (True while a VM holds
// the claim, saying whether its pod has received the devices), and, when
// `conflict` is not empty, DeviceConflict True with `conflict` as message.
// The transition times are those of `before` for a type whose status did
// not change, else `now`.
std::vector<ClaimCondition> ConditionsOf(const ClaimStatus& status, std::string_view conflict,
                                         int64_t generation,
                                         const std::vector<ClaimCondition>& before,
                                         absl::Time now);

// The conditions of a claim that was deleted while its devices go back to
// their host driver (reclaimPolicy Delete: pdc-node erases them first):
// those of `before` with Reserved False (no VM uses a deleted claim) and
// Reclaiming True naming `node` and `devices`. Transition times as in
// ConditionsOf.
std::vector<ClaimCondition> ReclaimingConditions(std::string_view node,
                                                 const std::vector<PciAddress>& devices,
                                                 int64_t generation,
                                                 const std::vector<ClaimCondition>& before,
                                                 absl::Time now);
// The conditions of a claim pdc left out at recovery because its object
// cannot be taken as it is (a spec that cannot be read, or one that
// contradicts the devices its status names): those of `before` with
// Withheld True, `reason` (CamelCase) and `message`. Transition times as in
// ConditionsOf.
std::vector<ClaimCondition> WithheldConditions(std::string_view reason, std::string_view message,
                                               int64_t generation,
                                               const std::vector<ClaimCondition>& before,
                                               absl::Time now);
// Whether `conditions` hold Reclaiming True.
bool IsReclaiming(const std::vector<ClaimCondition>& conditions);

struct ClaimObject {
  ObjectMeta meta;
  // key and uid from the metadata; status as pdc last wrote it, Pending
  // (empty) when it never did.
  Claim claim;
  bool has_status = false;  // status.phase is set: pdc wrote a status.
  int64_t observed_generation = 0;
  // One per claim.status.devices entry. Informational: a value out of
  // bounds reads as unknown rather than making the claim unreadable.
  std::vector<DeviceFacts> device_facts;
  // The conditions pdc wrote; entries it cannot read are left out (it
  // writes them all again with the next status).
  std::vector<ClaimCondition> conditions;
  // Set by ReadClaimObjectStatusOnly: why the spec could not be read.
  std::string spec_problem;
};

// One object of the list or watch. Errors name the field
// ("PersistentDeviceClaim.spec.count"); nothing out of bounds is kept.
absl::StatusOr<ClaimObject> ReadClaimObject(const json::Value& object);
// For an object ReadClaimObject refuses: its metadata and status read the
// same way, the spec left out (default, reclaimPolicy Retain: a device's
// data is kept when nobody can tell what the claim asked for) and
// `spec_problem` saying why it could not be read. An error when the
// metadata or the status cannot be read either.
absl::StatusOr<ClaimObject> ReadClaimObjectStatusOnly(const json::Value& object);

// The body that creates a claim generated from a VM's template: name,
// namespace, the VM as controlling owner (so Kubernetes' garbage collector
// deletes the claim with the VM), pdc's finalizer, the VM's UID in
// kOwnerVmUidAnnotation, and the spec (without ownerVMUid).
std::string WriteNewClaimObject(const Claim& claim, const std::optional<OwnerReference>& owner);

// The merge patch for .../status: metadata.uid and resourceVersion (the
// preconditions) and every status member (a member pdc no longer sets is
// written empty or null, so nothing stale survives the merge): `facts`
// holds one entry per status.devices entry (fewer: the rest unknown);
// `owner_vm_uid` (not empty) goes to status.ownerVMUid.
std::string WriteClaimStatusPatch(std::string_view uid, std::string_view resource_version,
                                  const ClaimStatus& status, int64_t observed_generation,
                                  const std::vector<DeviceFacts>& facts,
                                  const std::vector<ClaimCondition>& conditions,
                                  std::string_view owner_vm_uid = {});

// The merge patch for .../status that sets status.conditions alone, with
// the same preconditions.
std::string WriteClaimConditionsPatch(std::string_view uid, std::string_view resource_version,
                                      const std::vector<ClaimCondition>& conditions);

// The merge patch that sets metadata.finalizers to `finalizers`, with the
// same preconditions.
std::string WriteFinalizersPatch(std::string_view uid, std::string_view resource_version,
                                 const std::vector<std::string>& finalizers);

// The holds of one node (devices to return to their host driver, devices
// Released by deleted Retain claims) as pdc keeps them in a ConfigMap:
// data.node is the node's name, data.holds a JSON object
// {"returnToHost": ["<address>", ...],
//  "released": [{"address", "serial", "claim": "<ns>/<name>" ("" for no
//  claim: an abandoned erase), "claimUid" (optional)}, ...]}.
struct NodeHoldsObject {
  ObjectMeta meta;
  std::string node;
  std::vector<PciAddress> return_to_host;  // Sorted, no repeats.
  std::vector<ReleasedDevice> released;    // Sorted by address, no repeats.
};
absl::StatusOr<NodeHoldsObject> ReadNodeHolds(const json::Value& configmap);
// The ConfigMap `name` in `ns` with those holds: the body of a create
// (`uid` "") or of a merge patch with `uid` and `resource_version` as
// preconditions.
std::string WriteNodeHolds(std::string_view name, std::string_view ns, std::string_view uid,
                           std::string_view resource_version, std::string_view node,
                           const std::vector<PciAddress>& return_to_host,
                           const std::vector<ReleasedDevice>& released);

}  // namespace pdc::api

#endif  // PDC_API_CLAIM_OBJECT_H_
