// The allocator's options: what pdc.yaml configures and the allocator reads,
// each declared once, with the default pdc-extender ships (config/'s
// ExtenderConfig holds one of these; its keys are listed there). Here, below
// both, so that config/ need not include the allocator.
#ifndef PDC_MODEL_ALLOCATOR_OPTIONS_H_
#define PDC_MODEL_ALLOCATOR_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "model/types.h"

namespace pdc {

enum class ScoringPolicy : uint8_t {
  kBinPack = 0,  // Fill the fullest node that fits first.
  kSpread = 1,   // Prefer the emptiest node.
};

struct AllocatorOptions {
  std::vector<DeviceClass> device_classes;
  // A node whose driver has not reported for longer is "not reporting".
  absl::Duration node_stale_after = absl::Seconds(60);
  ScoringPolicy scoring = ScoringPolicy::kBinPack;
  // Reclaim policy of claims generated from templates for a VM.
  ReclaimPolicy template_reclaim_policy = ReclaimPolicy::kRetain;
  // CheckpointDue() turns true after this many records since the last one,
  // or once the log grew by this many bytes since (whichever comes first:
  // large records, such as inventories of big nodes, grow the log faster).
  uint64_t checkpoint_every_records = 100000;
  uint64_t checkpoint_every_bytes = uint64_t{64} << 20;
  // At most one pod per node and resource name waits for its devices
  // (docs/design.md §6.2): kubelet's device plugin API does not say which pod
  // asks, so pdc-node can only answer unambiguously while one pod is pending.
  // Off for clusters where pdc-node is not the device plugin (nothing would
  // confirm), and in tests that bind without a node driver.
  bool serialize_handoffs = true;
  // Where claims are objects of another system (Kubernetes mode): why the
  // name of a template claim the allocator does not hold is still taken by
  // an object that is not the VM's claim (one being erased, withheld for a
  // conflict, kept by a foreign finalizer), "" when it is free. A VM whose
  // template claim name is taken waits (a filter verdict that may clear, a
  // refused bind) and never binds into that object, as the StatefulSet
  // controller waits for a PVC being deleted. Called under the allocator's
  // lock: it must not call back into the allocator. Empty: never taken.
  std::function<std::string(const ClaimKey&)> template_name_taken;
};

}  // namespace pdc

#endif  // PDC_MODEL_ALLOCATOR_OPTIONS_H_
