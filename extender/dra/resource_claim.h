// A resource.k8s.io/v1 ResourceClaim as the DRA claim keeper reads it: who
// it is reserved for and whether it is allocated; and the writing of a new
// status.reservedFor into the whole object read, so that the update sends
// back every other field as it was (get + update on the resourceVersion:
// kube-scheduler writes the same list).
// Thread-safety: pure functions.
#ifndef PDC_EXTENDER_DRA_RESOURCE_CLAIM_H_
#define PDC_EXTENDER_DRA_RESOURCE_CLAIM_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "kube/kube_reflector.h"

namespace pdc::extender::dra {

// Every ResourceClaim (all namespaces), listed and watched by the keeper.
inline constexpr std::string_view kResourceClaimsPath =
    kube::Reflected("/apis/resource.k8s.io/v1/resourceclaims");
// One claim, and its status subresource.
std::string ResourceClaimPath(std::string_view ns, std::string_view name);
std::string ResourceClaimStatusPath(std::string_view ns, std::string_view name);

// ResourceClaimReservedForMaxSize (k8s.io/api/resource/v1).
inline constexpr size_t kReservedForMaxSize = 256;

// One status.reservedFor entry (ResourceClaimConsumerReference).
struct Consumer {
  std::string api_group;  // "" the core group.
  std::string resource;   // "pods", "virtualmachines"
  std::string name;
  std::string uid;
  bool operator==(const Consumer&) const = default;
};
inline bool IsPod(const Consumer& c) {
  return c.api_group.empty() && c.resource == "pods";
}
inline bool IsVm(const Consumer& c) {
  return c.api_group == "kubevirt.io" && c.resource == "virtualmachines";
}
// The entry of VirtualMachine `name` with `uid`.
Consumer VmConsumer(std::string_view name, std::string_view uid);

// One status.allocation.devices.results entry
// (DeviceRequestAllocationResult): the device of `pool` of `driver`
// allocated for `request`.
struct AllocatedDevice {
  std::string request;
  std::string driver;
  std::string pool;    // pdc-node's pools are named after their node.
  std::string device;  // pdc-node's devices are named from their serial.
  bool operator==(const AllocatedDevice&) const = default;
};

struct DraClaim {
  bool allocated = false;  // status.allocation is set.
  std::vector<Consumer> reserved_for;
  // Its controller owner is a Pod: a claim kube-controller-manager made
  // from the pod's resourceClaimTemplateName, deleted with the pod.
  bool pod_owned = false;
  // status.allocation.devices.results, in order (empty when not allocated).
  std::vector<AllocatedDevice> devices;
};

// The claim in `object`; an error names the field ("ResourceClaim.status.
// reservedFor[2].uid: ...").
absl::StatusOr<DraClaim> ReadDraClaim(const api::json::Value& object);

// Sets status.reservedFor of `object` (a whole claim) to `list`.
void WriteReservedFor(rapidjson::Document& object, const std::vector<Consumer>& list);

}  // namespace pdc::extender::dra

#endif  // PDC_EXTENDER_DRA_RESOURCE_CLAIM_H_
