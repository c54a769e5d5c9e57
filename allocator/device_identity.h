// Device identity (docs/design.md §4.1, "Device identity"): which reported
// device is the drive a claim or a Released mark names, whatever PCI address
// it has now. A device with a serial is that serial, at any address (a bus
// renumbering — a card added, a BIOS change, a slot swap — moves drives to
// new addresses); a device without one is its address. Two devices of a node
// reporting the same serial are ambiguous: neither is anyone's drive.
//
// Pure functions over one inventory update; internal to allocator/.
// Thread-safety: none needed (values only).
#ifndef PDC_ALLOCATOR_DEVICE_IDENTITY_H_
#define PDC_ALLOCATOR_DEVICE_IDENTITY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "allocator/allocator.h"
#include "allocator/claim_entry.h"
#include "model/types.h"

namespace pdc {

// The device at `address` in `inventory` (sorted by address, as accepted
// inventories are), or nullptr.
const Device* FindDevice(const NodeInventory& inventory, PciAddress address);

// The addresses of an inventory's devices by serial (devices with a serial
// only). REQUIRES: the inventory outlives the index and stays unchanged.
class SerialIndex {
 public:
  explicit SerialIndex(const NodeInventory& inventory);

  // Addresses reporting `serial`, sorted; empty when none (or `serial` is "").
  absl::Span<const PciAddress> Find(std::string_view serial) const;
  // Serials more than one device reports, sorted.
  std::vector<std::string_view> Duplicates() const;

 private:
  absl::flat_hash_map<std::string_view, absl::InlinedVector<PciAddress, 1>> by_serial_;
};

// Marks every device that shares its non-empty serial with another device
// of the inventory unhealthy: the serial cannot say which drive is which, so
// none of them is offered (pdc-node does the same; this also covers other
// reporters). REQUIRES: `index` was built from `inventory`.
void RefuseDuplicateSerials(const SerialIndex& index, NodeInventory& inventory);

// Why a serial cannot be followed: "serial S is reported by 2 devices on
// node N (a, b): …". REQUIRES: `addresses.size() > 1`.
std::string AmbiguousSerialReason(std::string_view node, std::string_view serial,
                                  absl::Span<const PciAddress> addresses);

// What an inventory update does to the claims and Released marks of a node.
struct IdentityUpdate {
  // Claims whose status changes (devices moved, Lost, Bound again), by key.
  std::vector<Claim> claims;
  // The node's Released marks after the update, sorted by address.
  std::vector<ReleasedDevice> released;
  std::vector<DeviceMove> moves;  // Claims' by key, then marks'.
};

// Follows every Bound or Lost claim of `claims` (all on `inventory.node`)
// and every mark of `released` to where the inventory reports its drive:
//  - a device with a serial is where that serial is now (moves recorded,
//    also for a claim that is Lost for another of its devices, so that the
//    drives it found stay held by it); not reported at all, or reported by
//    more than one device, the claim is Lost saying why;
//  - a device without a serial keeps its address;
//  - a claim whose devices are all found returns to Bound;
//  - a device a claim cannot keep because another identified drive, or a
//    device waiting to return to its host (`return_to_host`), is at that
//    address makes the claim Lost rather than take it.
// A Released mark follows its serial the same way; one whose address now
// holds another drive (by serial, or taken by a claim's drive) is dropped,
// as before: that drive is not the deleted claim's. REQUIRES: `inventory`
// sorted by address, `index` built from it, `claims` sorted by key.
IdentityUpdate FollowDevices(const NodeInventory& inventory, const SerialIndex& index,
                             const std::vector<const ClaimEntry*>& claims,
                             const std::vector<ReleasedDevice>& released,
                             const std::vector<PciAddress>& return_to_host);

}  // namespace pdc

#endif  // PDC_ALLOCATOR_DEVICE_IDENTITY_H_
