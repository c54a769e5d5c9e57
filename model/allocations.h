// What the allocator reports and the wire carries (docs/rest-api.md §4, §5):
// the devices a node must prepare, the pods waiting for their devices, the
// state of a node, and what a pod asks of the scheduler. Plain structs; the
// allocator produces them, api/ encodes and decodes them, pdc-node and pdcctl
// read them.
#ifndef PDC_MODEL_ALLOCATIONS_H_
#define PDC_MODEL_ALLOCATIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "model/pci_address.h"
#include "model/types.h"

namespace pdc {

// Largest `count` of one claim (docs/rest-api.md §3.3): the REST codec and
// the allocator's validation both hold it.
inline constexpr int32_t kMaxClaimCount = 256;

// Most devices one node may report (docs/rest-api.md §4.1). A pod runs on
// one node, so it can never be given more of one resource than this: the
// bound of a pod's device request read from the scheduler wire.
inline constexpr int64_t kMaxNodeDevices = 4096;

// What a pod asks for, extracted from the pod by the caller (docs/design.md
// §4.4, §4.5).
struct SchedulingRequest {
  std::string ns;        // Pod namespace; claims live in it.
  std::string vm;        // VM identity (see VmIdentity()).
  std::string pod_name;
  std::string pod_uid;
  std::vector<std::string> claim_names;  // pdc.kubevirt.io/claims
  // Resource requests of the pod (resource name -> count). Names that are not
  // a configured device class are ignored.
  std::vector<std::pair<std::string, int64_t>> resources;
  // UID of the VM in Kubernetes mode (from the pod's owner chain); "" when
  // unknown (standalone mode: the name alone decides, docs/design.md §4.5).
  std::string vm_uid = {};
  // UID of the pod's VirtualMachineInstance in Kubernetes mode (its
  // controller, checked against the label kubevirt.io/created-by); "" when
  // unknown (standalone mode).
  std::string vmi_uid = {};
};

// What a node must prepare (for the node driver's long-poll).
struct NodeAllocation {
  PciAddress address;
  ClaimKey claim;
  std::string resource_name;
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;
  std::optional<Reservation> reserved_for;
  // The reserving pod has not been handed the device yet.
  bool handoff_pending = false;
  // Place of the device among the reserving pod's devices of the resource
  // (HandoffOrderLess): pdc-node hands them over in this order. 0 when not
  // reserved, or from an extender that does not send it.
  uint32_t handoff_index = 0;

  bool operator==(const NodeAllocation&) const = default;
};
struct NodeAllocations {
  uint64_t version = 0;  // Revision of the last change relevant to the node.
  std::vector<NodeAllocation> claimed;      // Sorted by address.
  std::vector<PciAddress> return_to_host;   // Sorted.

  bool operator==(const NodeAllocations&) const = default;
};

// A pod waiting for its devices of one resource on one node.
struct PendingHandoff {
  std::string node;
  std::string resource_name;
  std::string ns;
  Reservation pod;                  // VM, pod name and UID.
  std::vector<ClaimKey> claims;     // Sorted.
  std::vector<PciAddress> devices;  // Sorted.

  bool operator==(const PendingHandoff&) const = default;
};

struct NodeView {
  std::string name;
  NodeInventory inventory;
  bool reporting = false;
  absl::Time last_report = absl::InfinitePast();
  // Devices never offered until the node driver reports them back on their
  // host driver, healthy (a Delete-policy claim was deleted), sorted.
  std::vector<PciAddress> return_to_host;
  // Devices offered only to a claim that pins them until an administrator
  // releases them (a Retain-policy claim was deleted), sorted by address.
  std::vector<ReleasedDevice> released;
};

}  // namespace pdc

#endif  // PDC_MODEL_ALLOCATIONS_H_
