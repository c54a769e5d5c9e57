// ClaimReclaims: the reclaim of deleted claims in Kubernetes mode. A
// deleted claim whose devices go back to their host driver (reclaimPolicy
// Delete: pdc-node erases them first) keeps pdc's finalizer, and its object
// the condition Reclaiming, until the node's holds (node_holds_objects.h)
// no longer return any of them; then the finalizer comes off and the
// object is gone. Across restarts, recovery finds the condition again
// (Restore).
// Thread-safety: thread-safe; Start/Settle are called by KubeApiStore's one
// writer (its write_mu_ held), the others from any thread.
#ifndef PDC_EXTENDER_CLAIM_RECLAIMS_H_
#define PDC_EXTENDER_CLAIM_RECLAIMS_H_

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "extender/claim_objects.h"
#include "extender/node_holds_objects.h"

namespace pdc::extender {

class ClaimReclaims {
 public:
  // A deleted claim whose devices are on their way back to the host driver.
  struct Reclaim {
    std::string uid;  // Of the object.
    std::string node;
    std::vector<PciAddress> devices;
  };

  // `objects` and `clock` must outlive this.
  ClaimReclaims(ClaimObjects* objects, const Clock* clock) : objects_(objects), clock_(clock) {}

  // What recovery found (objects deleted with the condition Reclaiming).
  void Restore(absl::flat_hash_map<ClaimKey, Reclaim> reclaims);
  // Writes the Reclaiming condition of `key`'s object `st` and remembers
  // it until `devices` are back. OK, and nothing remembered, when that
  // object is gone or another holds the name.
  absl::Status Start(const ClaimKey& key, const ClaimObjectState& st,
                     std::vector<PciAddress> devices);
  // Takes the finalizer off each of `keys` reclaiming whose devices `holds`
  // no longer return to their host driver.
  absl::Status Settle(const std::vector<ClaimKey>& keys, const NodeHoldsObjects& holds);

  bool Reclaiming(const ClaimKey& key) const;
  std::optional<Reclaim> Of(const ClaimKey& key) const;
  // The keys reclaiming on one of `nodes`.
  std::vector<ClaimKey> On(const std::set<std::string>& nodes) const;
  // `key`'s object with `uid` is gone (its finalizer was taken off, by pdc
  // or by hand): it is reclaimed no longer.
  void Forgotten(const ClaimKey& key, std::string_view uid);

 private:
  ClaimObjects* const objects_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ClaimKey, Reclaim> reclaiming_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CLAIM_RECLAIMS_H_
