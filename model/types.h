// Value types of the pdc data model (docs/design.md §4): devices and node
// inventories, device classes, claims with their status and reservation.
// Plain structs with value semantics; no behaviour beyond formatting and
// comparison. Thread-safety: value types, not synchronised.
#ifndef PDC_MODEL_TYPES_H_
#define PDC_MODEL_TYPES_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "model/pci_address.h"

namespace pdc {

enum class DeviceHealth : uint8_t { kHealthy = 0, kUnhealthy = 1 };

// Which check made the node driver report a device unhealthy
// (docs/design.md §4.1). Said on the wire as the CamelCase name ToString
// gives; the detail (which mount, which process, which other function) is in
// pdc-node's log. kNone on a healthy device.
enum class UnhealthyReason : uint8_t {
  kNone = 0,
  kUnspecified = 1,        // Unhealthy, with no reason given.
  kNoIommuGroup = 2,       // vfio cannot take a device outside an IOMMU group.
  kUnexpectedDriver = 3,   // Claimed, not on the driver pdc-node put it on.
  kErasing = 4,            // Holds a deleted claim's data until erased.
  kAmbiguousIdentity = 5,  // Another function reports the same serial.
  kHostInUse = 6,          // The host uses it, or the check could not tell.
  // On vfio-pci since an earlier boot: which drive it is cannot be read.
  kUnverifiedIdentity = 7,
};
inline constexpr UnhealthyReason kLastUnhealthyReason = UnhealthyReason::kUnverifiedIdentity;
std::string_view ToString(UnhealthyReason reason);
// The reason named `name` (a ToString value other than kNone's), or nullopt.
std::optional<UnhealthyReason> ParseUnhealthyReason(std::string_view name);

// Longest serial number and driver name pdc keeps. An NVMe controller's SN
// is 20 bytes of ASCII; other classes' serials are of the same order. Linux
// driver names are short identifiers. Both come from sysfs through the node
// driver and are logged and stored, so both are bounded.
inline constexpr size_t kMaxSerialLength = 64;
inline constexpr size_t kMaxDriverNameLength = 64;

// One PCI function on a node, as the node driver reports it.
struct Device {
  PciAddress address;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;   // 24-bit PCI class code, e.g. 0x010802 (NVMe).
  int32_t iommu_group = -1;  // -1: no IOMMU group; vfio cannot use it.
  int16_t numa_node = -1;    // -1: unknown / single node.
  DeviceHealth health = DeviceHealth::kHealthy;
  UnhealthyReason unhealthy_reason = UnhealthyReason::kNone;  // kNone when healthy.
  std::string serial;  // NVMe serial where sysfs has one, else "".
  std::string driver;  // Current kernel driver ("nvme", "vfio-pci"), "" none.

  bool operator==(const Device&) const = default;
};

// What a node driver reported: every device of a configured class on the
// node. `devices` are sorted by address with no duplicates once accepted.
// Marks `device` unhealthy for `reason`; a device already unhealthy keeps
// the reason it has (the first check that refused it names the cause).
void MarkUnhealthy(Device& device, UnhealthyReason reason);

struct NodeInventory {
  std::string node;
  std::vector<Device> devices;
  // Acknowledgements, not state: the identities (serial, else PCI address)
  // of the devices on the node's return list that the node driver has
  // handed back to their host driver, erased where it erases them. A device
  // leaves the return list only once its identity is here (pdc-node reports
  // it until the list no longer names the device). Sorted; not stored.
  std::vector<std::string> returned = {};

  bool operator==(const NodeInventory&) const = default;
};

// vendor:device, optionally narrowed by the 24-bit class code; the same
// shape as KubeVirt's `pciVendorSelector`.
struct PciSelector {
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  std::optional<uint32_t> class_code;

  bool operator==(const PciSelector&) const = default;
};

// A resource name (KubeVirt's `resourceName`, e.g. devices.kubevirt.io/nvme)
// and the PCI devices that provide it.
struct DeviceClass {
  std::string resource_name;
  std::vector<PciSelector> selectors;
  // For devices that are neither storage nor network (whose host use
  // pdc-node checks itself): the host drivers pdc-node may take a device of
  // this class from. A device bound to any other host driver is refused.
  std::vector<std::string> host_drivers = {};

  bool Matches(const Device& d) const;
};

// namespace/name of a claim.
struct ClaimKey {
  std::string ns;
  std::string name;

  std::string ToString() const { return ns + "/" + name; }
  auto operator<=>(const ClaimKey&) const = default;
  bool operator==(const ClaimKey&) const = default;

  template <typename H>
  friend H AbslHashValue(H h, const ClaimKey& k) {
    return H::combine(std::move(h), k.ns, k.name);
  }
};

enum class ReclaimPolicy : uint8_t {
  kRetain = 0,  // The device stays on vfio-pci after the claim is deleted.
  kDelete = 1,  // The node driver gives it back to its original host driver.
};

enum class ClaimPhase : uint8_t { kPending = 0, kBound = 1, kLost = 2 };

std::string_view ToString(ClaimPhase phase);
std::string_view ToString(ReclaimPolicy policy);

struct ClaimSpec {
  std::string resource_name;
  int32_t count = 1;
  // Optional pins. A claim pinned to a serial or an address asks for exactly
  // that device (count must then be 1).
  std::string node;
  std::string serial;
  std::optional<PciAddress> address;
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;
  // Name of the VM (same namespace) for claims generated from a template;
  // "" for claims people created.
  std::string owner_vm;
  // UID of that VM, in Kubernetes mode (docs/design.md §4.5): a VM re-created
  // under the same name has another UID and does not inherit the claim. ""
  // when unknown (standalone mode, or a claim made before UIDs were kept).
  std::string owner_vm_uid = {};

  bool operator==(const ClaimSpec&) const = default;
};

// The VM using a claim right now. A claim is reserved by one VM at a time; a
// new pod of the same VM (a restart) takes the reservation over.
struct Reservation {
  std::string vm;  // VM name, in the claim's namespace.
  std::string pod_name;
  std::string pod_uid;
  std::string vm_uid = {};  // VM UID in Kubernetes mode; "" when unknown.
  // Place of the claim among the reserving pod's claims: its named claims in
  // the order of the pdc.kubevirt.io/claims annotation, then its template
  // claims by resource name. The order the pod's devices are handed over in
  // (HandoffOrderLess); 0 when unknown (a reservation made before it was
  // kept): the claim key then decides.
  uint32_t claim_rank = 0;
  // UID of the VirtualMachineInstance whose launcher pod this is, in
  // Kubernetes mode; "" when unknown (standalone mode, or a reservation made
  // before it was kept). A VMI has one launcher pod (KubeVirt never
  // live-migrates a VMI with host devices), so no other pod of the same VMI
  // takes the reservation over (docs/design.md §4.5).
  std::string vmi_uid = {};

  bool operator==(const Reservation&) const = default;
};

struct BoundDevice {
  PciAddress address;
  std::string serial;  // Serial at bind time: a swapped drive is detected.

  bool operator==(const BoundDevice&) const = default;
};

// A device of a claim deleted with reclaimPolicy Retain: it stays on
// vfio-pci with the deleted claim's data, so it is offered only to a claim
// that pins it (by serial or address) until an administrator releases it
// (docs/design.md §4.7). The mark survives the device vanishing from the
// inventory; a different serial at the address (the drive was swapped)
// drops it.
// The order a pod's devices of one resource are handed to it (docs/design.md
// §6.3): by the claim's place in the pod (Reservation::claim_rank), then the
// claim key, then, within a claim, by the device's stable identity — its
// serial, else its address. KubeVirt gives the k-th address of
// PCI_RESOURCE_<NAME> to the k-th hostDevices entry of the resource, so an
// order that does not depend on PCI addresses gives each entry the same
// drive at every start, also after a bus renumbering.
struct HandoffPosition {
  uint32_t claim_rank = 0;
  ClaimKey claim;
  std::string serial;
  PciAddress address;
};
inline bool HandoffOrderLess(const HandoffPosition& a, const HandoffPosition& b) {
  return std::tie(a.claim_rank, a.claim, a.serial, a.address) <
         std::tie(b.claim_rank, b.claim, b.serial, b.address);
}

// Like a PersistentVolume's claimRef, a Released device remembers the claim
// its data is of: only a claim of the same namespace may pin it back; an
// administrator may release it (free for any claim) or hand it over to a
// claim of another namespace (docs/design.md §4.7).
struct ReleasedDevice {
  PciAddress address;
  std::string serial;  // The serial the claim was bound to; "" when unknown.
  // The deleted claim, or the claim an administrator handed it over to.
  // An empty namespace: no claim may pin it (an erase an administrator
  // abandoned); only an administrator decides.
  ClaimKey claim;
  std::string claim_uid = {};  // That claim's UID; "" when unknown.

  bool operator==(const ReleasedDevice&) const = default;
};

struct ClaimStatus {
  ClaimPhase phase = ClaimPhase::kPending;
  // Set once bound and kept while Lost, so a device that comes back is
  // recognised and the claim returns to Bound.
  std::string node;
  std::vector<BoundDevice> devices;  // Sorted by address.
  std::string lost_reason;
  std::optional<Reservation> reserved_for;
  // UID of the last pod the node driver confirmed it handed the devices to
  // (kubelet's Allocate answered for it). While `reserved_for` names another
  // pod, that pod is waiting for its hand-off (see HandoffPending()).
  std::string handed_off_to;

  // The reserving pod has not received the devices yet.
  bool HandoffPending() const {
    return reserved_for.has_value() && reserved_for->pod_uid != handed_off_to;
  }

  bool operator==(const ClaimStatus&) const = default;
};

struct Claim {
  ClaimKey key;
  std::string uid;
  ClaimSpec spec;
  ClaimStatus status;
  uint64_t created_revision = 0;

  bool operator==(const Claim&) const = default;
};

// Whether `claim` is reserved by the VM named `vm` with UID `vm_uid` in
// namespace `ns` (docs/design.md §4.5): same namespace, same name and, when
// both UIDs are known, the same UID. A VM deleted and re-created under the
// same name is another VM. False when the claim is not reserved.
bool ReservedBySameVm(const Claim& claim, std::string_view ns, std::string_view vm,
                      std::string_view vm_uid);
// The same for a claim of namespace `claim_ns` whose reservation is
// `reservation` (the allocator keeps claims in another form).
bool ReservedBySameVm(std::string_view claim_ns, const std::optional<Reservation>& reservation,
                      std::string_view ns, std::string_view vm, std::string_view vm_uid);

// VM identity of a pod, per docs/design.md §4.5: label `vm.kubevirt.io/name`,
// else annotation `kubevirt.io/domain`, else the pod's own name. Pure function
// so that the extender and the simulator agree.
std::string VmIdentity(std::string_view label_vm_name,
                       std::string_view annotation_domain,
                       std::string_view pod_name);

}  // namespace pdc

#endif  // PDC_MODEL_TYPES_H_
