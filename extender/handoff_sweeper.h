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
// guess). Long-polls learn of a cancellation from the allocator's change
// listener, like of every other change. Passes are scheduled on the Clock.
//
// Thread-safety: SweepOnce() and Stop() are thread-safe; Start() once.
#ifndef PDC_EXTENDER_HANDOFF_SWEEPER_H_
#define PDC_EXTENDER_HANDOFF_SWEEPER_H_

#include <cstddef>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "common/clock.h"
#include "common/notifier.h"
#include "extender/kube_client.h"

namespace pdc::extender {

// Whether pod `ns`/`pod_name` with `pod_uid` still runs, as the apiserver
// says: gone when it is deleted, replaced by another UID, or ended
// (Failed/Succeeded); unknown when the apiserver cannot tell (`why` says).
enum class PodFate { kAlive, kGone, kUnknown };
PodFate AskPodFate(KubeClient* kube, std::string_view ns, std::string_view pod_name,
                   std::string_view pod_uid, absl::Duration timeout, std::string* why);

class HandoffSweeper {
 public:
  struct Options {
    absl::Duration grace = absl::Seconds(30);     // Wait before asking.
    absl::Duration interval = absl::Seconds(10);  // Between passes (Start()).
    absl::Duration api_timeout = absl::Seconds(10);  // Per Kubernetes API call.
  };
  // All pointers must outlive the sweeper.
  HandoffSweeper(Options options, Allocator* allocator, KubeClient* kube, const Clock* clock);
  ~HandoffSweeper();  // Stops the thread.

  // One pass; returns how many pending hand-offs were cancelled.
  size_t SweepOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // Runs SweepOnce() every `interval` on a thread of its own until Stop().
  void Start();
  void Stop();

 private:
  PodFate AskApiserver(const PendingHandoff& p, std::string* why);

  const Options options_;
  Allocator* const allocator_;
  KubeClient* const kube_;
  const Clock* const clock_;

  absl::Mutex mu_;
  // Pod UID -> when this sweeper first saw it pending.
  absl::flat_hash_map<std::string, absl::Time> first_seen_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_HANDOFF_SWEEPER_H_
