// ExtenderContext: the collaborators every handler needs, owned by main (or
// by a test) and outliving the Router. The Router reads `binds` when it is
// made: fill the context first.
// Thread-safety: the pointed-to objects are thread-safe.
#ifndef PDC_EXTENDER_EXTENDER_CONTEXT_H_
#define PDC_EXTENDER_EXTENDER_CONTEXT_H_

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "api/scheduler_wire.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/notifier.h"
#include "extender/bind_target.h"
#include "extender/extender_metrics.h"
#include "extender/pod_cache.h"

namespace pdc::kube {
class EventRecorder;  // kube/event_recorder.h
}  // namespace pdc::kube

namespace pdc::extender::dra {
class ClaimKeeper;  // dra/claim_keeper.h
}  // namespace pdc::extender::dra

namespace pdc::extender {

class Binds;        // bind_queue.h
class VmDirectory;  // vm_directory.h

struct ExtenderContext {
  Allocator* allocator = nullptr;  // Required.
  const Clock* clock = nullptr;    // Required.
  PodCache* pod_cache = nullptr;   // Required.
  // Required. Follows the allocator's commits (FollowCommits), one topic per
  // node; handlers never bump it themselves.
  Notifier* notifier = nullptr;
  api::ManagedResources managed;   // Resource names of the device classes.
  // What the cluster learns of a bind, by mode (bind_target.h): standalone
  // by default; KubeBindTarget with a Kubernetes API.
  const BindTarget* bind_target = StandaloneTarget();
  // Runs binds off the HTTP threads (with a Kubernetes API: BindQueue).
  // Null: the bind handler runs them on the HTTP thread that received them
  // (InlineBinds; standalone: no apiserver call).
  Binds* binds = nullptr;
  // Kubernetes mode: a pod's VM comes from its owner chain (UIDs). Null:
  // from its labels (standalone).
  const VmDirectory* vms = nullptr;
  ExtenderMetrics* metrics = nullptr;  // Null: no metrics.
  kube::EventRecorder* events = nullptr;     // Null: no Kubernetes Events.
  const MetricsRegistry* registry = nullptr;  // Null: /metrics is 404.
  // Kubernetes mode (store: kubernetes): OK when every claim of a bind is
  // in the API as that bind made it (KubeApiStore::Recorded), else why not.
  // A bind is acknowledged only then. Null: the store's Sync says it all.
  std::function<absl::Status(const BindOutcome&)> recorded;
  // extender.dra.keeper.enabled: the keeper GET /v1/dra/claims reads from.
  // Null: the keeper is off.
  const dra::ClaimKeeper* dra_keeper = nullptr;
  // The DRA driver names pdc-node serves (deviceClasses[].draDriverName).
  std::set<std::string> dra_drivers;
};

// Makes `notifier` follow the allocator: every committed mutation, whoever
// makes it (a handler, the hand-off sweeper, a tool in the same process),
// bumps it once it is durable, naming the nodes it touched as topics, so no
// long-poll sleeps through a change of its node and none wakes for another
// node's.
// `on_moves` (may be empty) hears of devices that followed their serial to
// a new PCI address (a renumbering), after the commit that recorded them.
// REQUIRES: called before the allocator is shared with other threads;
// `notifier` outlives the allocator's use of it.
inline void FollowCommits(
    Allocator* allocator, Notifier* notifier,
    std::function<void(const std::vector<DeviceMove>& moves)> on_moves = nullptr) {
  allocator->SetChangeListener(
      [notifier, on_moves = std::move(on_moves)](const Allocator::Change& change) {
        notifier->Bump(change.nodes);
        if (on_moves && !change.moves.empty()) on_moves(change.moves);
      });
}

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_EXTENDER_CONTEXT_H_
