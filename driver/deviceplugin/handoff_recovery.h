// HandoffRecovery: after a pdc-node restart, confirms the hand-offs kubelet
// was answered for but pdc-extender still shows pending and the hand-off
// journal does not hold (it was lost, or the answer came from a pdc-node
// without one). kubelet's pod resources API says which pod holds which
// devices; a pending pod is confirmed when a pod of the same namespace and
// name holds exactly its claimed devices of the resource (MatchHeld). The
// API names pods, not UIDs: why that is safe enough is in docs/design.md
// §6.4.
// One pass after the first allocations answer; a List error is retried
// with backoff, a missing socket is logged once and recovery is left to the
// journal. It runs on a thread of its own: Allocate and start-up never wait
// for it.
// Thread-safety: Start/Stop from one thread; RunOnce from one thread.
#ifndef PDC_DRIVER_DEVICEPLUGIN_HANDOFF_RECOVERY_H_
#define PDC_DRIVER_DEVICEPLUGIN_HANDOFF_RECOVERY_H_

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "driver/deviceplugin/handoff_book.h"
#include "driver/deviceplugin/handoff_confirmer.h"
#include "driver/deviceplugin/pod_resources_client.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"

namespace pdc::driver::deviceplugin {

struct RecoveryOptions {
  // kubelet's pod resources socket (node.podResourcesSocket, by default
  // kDefaultPodResourcesSocket); "" = no recovery from kubelet (the journal
  // alone).
  std::string socket_path;
  absl::Duration list_timeout = absl::Seconds(5);
  absl::Duration backoff_initial = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(30);
  NodeMetrics* metrics = nullptr;  // Optional; must outlive the recovery.
};

// The pending pods that kubelet shows holding exactly their claimed devices
// of the resource, under the same namespace and name. Pure.
std::vector<PendingPod> MatchHeld(const std::vector<PendingPod>& pending,
                                  const std::vector<PodDevices>& held);

class HandoffRecovery {
 public:
  // Pointers must outlive the recovery.
  HandoffRecovery(ExtenderApi* api, HandoffBook* book, HandoffConfirmer* confirmer,
                  std::set<std::string> resources, RecoveryOptions options);
  ~HandoffRecovery();

  void Start();
  void Stop();

  // One pass: asks pdc-extender first when the book has no answer yet.
  // The number of hand-offs confirmed (queued); NotFound when kubelet has
  // no pod resources socket; Unavailable when a call failed.
  absl::StatusOr<int> RunOnce();

  // Waits until the pass succeeded or gave up; false on timeout (tests).
  bool WaitUntilDone(absl::Duration timeout) const;

 private:
  void Loop();

  ExtenderApi* const api_;
  HandoffBook* const book_;
  HandoffConfirmer* const confirmer_;
  const std::set<std::string> resources_;
  const RecoveryOptions options_;
  const PodResourcesClient client_;
  absl::Notification stop_;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_HANDOFF_RECOVERY_H_
