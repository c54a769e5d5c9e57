// ClaimController: PersistentDeviceClaim objects -> the allocator, in
// Kubernetes mode (docs/design.md §4.8). It is the claim reflector's sink
// and acts on each object as the watch delivers it, the way Kubernetes'
// PVC protection controller and binder do for volumes:
//  - an object the allocator does not have becomes a Pending claim with the
//    object's UID, and gets pdc's finalizer (pdc.kubevirt.io/device-
//    protection), so it cannot vanish while pdc still holds devices for it;
//    a spec the allocator refuses is logged with the reason;
//  - an object being deleted (deletionTimestamp) is deleted from the
//    allocator unless a VM pod still uses it (the claim is reserved for a
//    pod the pod watch or the apiserver still has, running): then it waits,
//    and is tried again every `retry` and as soon as a pod ends (Kick). A reservation whose pod is gone is released. Once the allocator let it go (its devices on their way
//    back, or Released, by the reclaim policy, and durable), the store
//    removes the finalizer and the API deletes the object;
//  - an object gone without pdc's consent (its finalizer removed by hand)
//    is deleted from the allocator; so is one that a relist no longer
//    shows and that a read confirms is gone;
//  - an object re-created under the same name (another UID) is another
//    claim: the old one is deleted, the new one created;
//  - in both cases not while a pod of the claim's VM may run on its
//    devices: the claim waits for the pod to end (a running VM's drive is
//    never put on the way to being erased).
// The status is the allocator's to write (KubeApiStore); the controller
// never writes it.
// Thread-safety: the sink methods on the reflector's thread, the retries on
// the controller's own; one mutex orders them.
#ifndef PDC_EXTENDER_CLAIM_CONTROLLER_H_
#define PDC_EXTENDER_CLAIM_CONTROLLER_H_

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "common/clock.h"
#include "api/claim_object.h"
#include "kube/event_recorder.h"
#include "extender/kube_api_store.h"
#include "kube/kube_client.h"
#include "kube/kube_reflector.h"
#include "extender/pod_directory.h"

namespace pdc::extender {

class ClaimController final : public kube::ReflectorSink {
 public:
  struct Options {
    absl::Duration retry = absl::Seconds(5);
    kube::EventRecorder* events = nullptr;  // Null: no Events.
    const Clock* clock = RealClock();
    // The watch of the scheduler's pods, asked before the apiserver whether
    // a reserving pod still runs; may be null.
    const PodDirectory* pods = nullptr;
  };

  // `allocator`, `store` and `kube` must outlive the controller.
  ClaimController(Allocator* allocator, KubeApiStore* store, kube::KubeClient* kube, Options options);
  ~ClaimController() override;  // Stop().

  void Replace(const std::vector<const api::json::Value*>& items) override;
  void Upsert(const api::json::Value& object) override;
  void Remove(const api::json::Value& object) override;

  // A pod ended or was deleted: claims waiting for their pod are tried
  // again now rather than at the next retry.
  void Kick();

  // Starts the retry thread. Idempotent.
  void Start();
  void Stop();

  // The first list has been applied: the allocator holds every claim.
  bool synced() const { return synced_.HasBeenNotified(); }
  // Claims waiting for a retry (a deletion a VM blocks, an API failure).
  size_t waiting() const;
  // Objects the allocator refused (their spec), and why.
  size_t refused() const;

 private:
  // Brings the allocator in line with `object` (nullopt: the object under
  // `key` is gone). False when it must be tried again later.
  bool Reconcile(const ClaimKey& key, const std::optional<api::ClaimObject>& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SameClaim(const Claim& claim, const api::ClaimObject& object) const;
  // The claim is out of the allocator: takes pdc's finalizer off the
  // object `uid`, unless its devices are still being erased (the store
  // does it once they are back). False when it must be tried again.
  bool Settle(const ClaimKey& key, std::string_view uid);
  // A withheld claim (a device conflict) being deleted: its reclaim policy
  // applied to its devices (KubeApiStore::WithheldReclaimOf). False to try
  // again.
  bool ReclaimWithheld(const ClaimKey& key, std::string_view uid);
  // ReadClaimObject, or for a withheld claim whose spec cannot be read,
  // ReadClaimObjectStatusOnly.
  absl::StatusOr<api::ClaimObject> ReadObject(const api::json::Value& object) const;
  // Deletes the claim from the allocator, first releasing a reservation
  // whose pod is gone. FailedPrecondition while the pod lives.
  absl::Status LetGo(const Claim& claim);
  // Deletes the claim from the allocator although its object is gone
  // (or another now): its devices go by the reclaim policy. Never while a
  // pod of its VM may run on them: FailedPrecondition then, and the claim
  // waits for the pod to end.
  absl::Status ForceLetGo(const Claim& claim);
  void Track(const ClaimKey& key, bool done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryLoop();
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || kicked_; }

  Allocator* const allocator_;
  KubeApiStore* const store_;
  kube::KubeClient* const kube_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<ClaimKey, api::ClaimObject> objects_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<ClaimKey> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ClaimKey, std::string> refused_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification synced_;
  std::thread thread_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CLAIM_CONTROLLER_H_
