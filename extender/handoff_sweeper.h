// HandoffSweeper: clears pending device hand-offs whose pod is gone, so a
// pod deleted (or failed) before it received its devices does not hold the
// node's hand-off slot forever (docs/design.md §6.5). Runs only when a
// Kubernetes API is configured; without one, an administrator cancels with
// DELETE /v1/nodes/{node}/handoffs/{podUid}.
//
// A pending pod is checked once it has waited `grace` (kubelet normally
// admits a bound pod within seconds). It is cancelled when kube-apiserver
// says the pod does not exist (404), the name now belongs to another pod
// (different UID), or the pod is Failed or Succeeded (kubelet refused it at
// admission, e.g. pdc-node's Allocate said no). A pod that is Pending or
// Running keeps its slot; an apiserver error keeps it too (never cancel on a
// guess). With the watch of the scheduler's pods (pod_directory.h) the
// watch answers for the pods it has, and a pod it shows ended or deleted
// is checked at once (PodGone), without waiting for the grace period or the
// next pass. Long-polls learn of a cancellation from the allocator's change
// listener, like of every other change. Passes are scheduled on the Clock.
//
// Thread-safety: SweepOnce(), PodGone() and Stop() are thread-safe; Start()
// once.
#ifndef PDC_EXTENDER_HANDOFF_SWEEPER_H_
#define PDC_EXTENDER_HANDOFF_SWEEPER_H_

#include <cstddef>
#include <memory>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "common/clock.h"
#include "common/notifier.h"
#include "kube/kube_client.h"
#include "extender/pod_directory.h"

namespace pdc::extender {

class HandoffSweeper {
 public:
  struct Options {
    absl::Duration grace = absl::Seconds(30);     // Wait before asking.
    absl::Duration interval = absl::Seconds(10);  // Between passes (Start()).
    absl::Duration api_timeout = absl::Seconds(10);  // Per Kubernetes API call.
    const PodDirectory* pods = nullptr;              // The pod watch; may be null.
    // Told of each cancelled hand-off: the pending one, the claims whose
    // reservation was released, and why the pod counts as gone. May be
    // empty.
    std::function<void(const PendingHandoff& handoff, const std::vector<ClaimKey>& claims,
                       std::string_view why)>
        on_cancelled;
  };
  // All pointers must outlive the sweeper.
  HandoffSweeper(Options options, Allocator* allocator, kube::KubeClient* kube, const Clock* clock);
  ~HandoffSweeper();  // Stops the thread.

  // One pass; returns how many pending hand-offs were cancelled.
  size_t SweepOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // The pod with `uid` ended or was deleted (the pod watch says): its
  // hand-off, if pending, is checked at the next pass, which starts now.
  void PodGone(std::string_view uid) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs SweepOnce() every `interval`, and when PodGone() asks, on a
  // thread of its own until Stop().
  void Start();
  void Stop();

 private:
  PodFate Ask(const PendingHandoff& p, std::string* why);

  const Options options_;
  Allocator* const allocator_;
  kube::KubeClient* const kube_;
  const Clock* const clock_;

  absl::Mutex mu_;
  // Pod UID -> when this sweeper first saw it pending.
  absl::flat_hash_map<std::string, absl::Time> first_seen_ ABSL_GUARDED_BY(mu_);
  // Pods the watch showed gone, checked at the next pass whatever their age.
  absl::flat_hash_set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  // Wakes the thread for a pass; a fresh one after each wake.
  std::shared_ptr<absl::Notification> wake_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<absl::Notification>();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_HANDOFF_SWEEPER_H_
