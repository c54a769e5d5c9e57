// Placement: the pure decisions of where a pod's pending claims go on one
// node — which IOMMU groups can be allocated, whether the claims fit, and
// which concrete devices they get. The filter and the bind call the same
// functions, so a node that passed the filter gets exactly the devices the
// filter counted on (unless the state changed in between).
//
// Rules (docs/design.md §5.6): whole IOMMU groups only; a group is usable
// when every managed device in it is healthy, free and of one class, and none
// is Released or waiting to return to its host driver (§4.7: a Released device
// only for a claim that pins it, a returning one never); all of a
// pod's new devices on one NUMA node when possible (the NUMA node of its
// devices already bound here first, else the lowest that fits); lowest PCI
// address first; deterministic.
//
// Thread-safety: pure functions over a NodeState the caller keeps stable.
#ifndef PDC_ALLOCATOR_PLACEMENT_H_
#define PDC_ALLOCATOR_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "allocator/cluster_state.h"
#include "model/types.h"

namespace pdc {

struct FreeGroup {
  int32_t id = -1;
  int16_t class_index = kNoClass;
  int16_t numa = -1;              // NUMA node of its devices (-1 when mixed).
  bool released = false;          // Holds a Released device (only for a pin).
  // Indices into NodeState::devices, by address. Inline: most groups hold
  // one device, and this runs on every claim change of the node.
  absl::InlinedVector<uint16_t, 2> slots;
};

// Usable free groups of a node, ordered by their lowest device address.
// `with_released`: also groups whose only hold is Released (marked
// `released`), for claims that pin a device.
std::vector<FreeGroup> UsableFreeGroups(const NodeState& node, bool with_released = false);

// Why a class is shorter than its healthy devices suggest: "" when no device
// of it is held, else e.g. "; 1 device released by a deleted claim (Retain):
// only a claim of that claim's namespace may pin it back; ...". Names no
// address and no namespace (it is shown to every tenant). Appended to
// insufficient-devices messages.
std::string HeldDevicesNote(const ClassSummary& summary);

// A pending claim to place; pointers stay owned by the caller.
struct PendingClaim {
  const ClaimKey* key = nullptr;
  const ClaimSpec* spec = nullptr;
  int16_t class_index = kNoClass;
};

struct Placement {
  // Devices for each pending claim, in the order given, sorted by address.
  std::vector<std::vector<PciAddress>> devices;
  bool numa_aligned = false;  // All of the pod's devices here share a NUMA node.
};

// Places `pending` (all claims of one pod that still need devices) on `node`.
// `bound_numa` is the NUMA node of the pod's devices already bound here, if
// any. FailedPrecondition with a message a user understands when they do not
// fit, e.g. "insufficient free devices.kubevirt.io/nvme: want 2, free 1".
absl::StatusOr<Placement> PlaceOnNode(const NodeState& node,
                                      const std::vector<DeviceClass>& classes,
                                      const std::vector<PendingClaim>& pending,
                                      std::optional<int16_t> bound_numa);

// True when the fast summary check is exact for this request: no pins and
// every free usable group of the needed classes holds a single device. Then
// the pod fits iff free_single >= need for every class.
bool FastFitApplies(const NodeState& node, const std::vector<PendingClaim>& pending);

}  // namespace pdc

#endif  // PDC_ALLOCATOR_PLACEMENT_H_
