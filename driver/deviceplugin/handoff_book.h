// HandoffBook: which VM pod on this node is waiting for its devices, per
// resource name. The device plugin API tells a plugin nothing about the pod
// kubelet is admitting, so pdc makes the question unambiguous instead: the
// extender keeps at most one pod per node and resource name waiting for its
// hand-off (docs/design.md §6.2), and the book reads that pod from the
// allocations answer: claimed entries of the resource with `reservedFor` set
// and `handedOff` false. It also remembers the hand-offs this process has
// already answered, so that a second Allocate arriving before the extender
// has recorded the first never gets the same devices again.
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_DEVICEPLUGIN_HANDOFF_BOOK_H_
#define PDC_DRIVER_DEVICEPLUGIN_HANDOFF_BOOK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "model/pci_address.h"
#include "driver/node_extender_api.h"

namespace pdc::driver::deviceplugin {

// One pod waiting for the devices of its claims of one resource name.
struct PendingPod {
  std::string resource_name;
  std::string ns;  // The claims' namespace.
  std::string vm;
  std::string pod_name;
  std::string pod_uid;
  std::vector<std::string> claims;  // "namespace/name", sorted.
  // In hand-off order (NodeAllocation::handoff_index, then address): the
  // order of PCI_RESOURCE_<NAME>.
  std::vector<PciAddress> devices;

  // "default/vm1 (pod virt-launcher-vm1-x, uid 1234)".
  std::string Describe() const;
};

class HandoffBook {
 public:
  explicit HandoffBook(std::string node) : node_(std::move(node)) {}

  const std::string& node() const { return node_; }

  // Takes an allocations answer. The long-poll's answers are taken when
  // their version is not older than the one held (`fresh` = false); an
  // answer fetched just now on purpose is always taken (`fresh` = true), so
  // an extender whose versions restarted is still followed.
  void Update(const NodeAllocations& allocations, bool fresh);

  // The one pod waiting for `resource_name` devices here.
  //   NotFound            nobody is waiting (message says so, for kubelet)
  //   FailedPrecondition  more than one pod is waiting: pdc does not guess
  absl::StatusOr<PendingPod> Pending(std::string_view resource_name) const;

  // Every pod waiting for devices here, of any resource name, by resource
  // name then pod UID (recovery after a restart, pod_resources_recovery.h).
  std::vector<PendingPod> AllPending() const;

  // kubelet's Allocate was answered for this pod: it is no longer pending
  // here, whatever the extender says until it has recorded the hand-off.
  void MarkHandedOff(std::string_view resource_name, std::string_view pod_uid);

  // The extender's last answer still shows `pod_uid` waiting for
  // `resource_name` devices (the hand-off is not yet recorded there).
  bool PendingUpstream(std::string_view resource_name, std::string_view pod_uid) const;

  uint64_t version() const;
  // An allocations answer was taken: until then nothing is known upstream.
  bool has_answer() const;

 private:
  // Pods waiting per (resource name, pod uid); `only` = "" for every
  // resource name.
  std::map<std::pair<std::string, std::string>, PendingPod> PendingLocked(
      std::string_view only) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool PendingUpstreamLocked(std::string_view resource_name, std::string_view pod_uid) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string node_;
  mutable absl::Mutex mu_;
  std::optional<NodeAllocations> allocations_ ABSL_GUARDED_BY(mu_);
  // (resource name, pod uid) answered here and not yet seen confirmed.
  std::set<std::pair<std::string, std::string>> answered_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_HANDOFF_BOOK_H_
