// ClaimController: PersistentDeviceClaim objects -> the allocator, in
// Kubernetes mode (docs/design.md §4.8). A level-triggered controller on
// kube::WorkQueue: the claim watch feeds a TypedCache that queues the key
// ("<ns>/<name>") of every object that changed, and Reconcile(key) brings
// the allocator in line with what the cache holds under that key, the way
// Kubernetes' PVC protection controller and binder do for volumes:
//  - an object the allocator does not have becomes a Pending claim with the
//    object's UID, and gets pdc's finalizer (pdc.kubevirt.io/device-
//    protection), so it cannot vanish while pdc still holds devices for it;
//    a spec the allocator refuses is logged with the reason;
//  - an object being deleted (deletionTimestamp) is deleted from the
//    allocator unless a VM pod still uses it (the claim is reserved for a
//    pod the pod watch or the apiserver still has, running): then it waits,
//    tried again with the key's backoff (up to `retry`) and as soon as a pod
//    ends (Kick). A reservation whose pod is gone is released. Once the
//    allocator let it go (its devices on their way back, or Released, by
//    the reclaim policy, and durable), the store removes the finalizer and
//    the API deletes the object;
//  - an object gone without pdc's consent (its finalizer removed by hand)
//    is deleted from the allocator; so is one that a relist no longer
//    shows and that a read confirms is gone (a relist queues the claims the
//    allocator has and the list does not);
//  - an object re-created under the same name (another UID) is another
//    claim: the old one is deleted, the new one created;
//  - in both cases not while a pod of the claim's VM may run on its
//    devices: the claim waits for the pod to end (a running VM's drive is
//    never put on the way to being erased).
// A Reconcile that must be tried again (a deletion a VM blocks, an API
// failure) returns an error: the queue retries the key with its backoff.
// The claim writes the apiserver refused are retried by the store every
// `retry`, as one more key of the queue (kRefusedWritesKey).
// The status is the allocator's to write (KubeApiStore); the controller
// never writes it.
// Thread-safety: the sink on the reflector's thread, Reconcile on the
// controller's worker; one mutex orders Reconcile with what the sink does
// to the store when an object goes.
#ifndef PDC_EXTENDER_CLAIM_CONTROLLER_H_
#define PDC_EXTENDER_CLAIM_CONTROLLER_H_

#include <optional>
#include <string>
#include <string_view>
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
#include "kube/typed_cache.h"
#include "kube/work_queue.h"
#include "extender/pod_directory.h"

namespace pdc::extender {

class ClaimController final : public kube::Reconciler {
 public:
  struct Options {
    // The longest wait between two tries of a claim that must be tried
    // again, and the period of the refused writes' retry.
    absl::Duration retry = absl::Seconds(5);
    kube::EventRecorder* events = nullptr;  // Null: no Events.
    const Clock* clock = RealClock();
    // The watch of the scheduler's pods, asked before the apiserver whether
    // a reserving pod still runs; may be null.
    const PodDirectory* pods = nullptr;
  };

  // The key under which the store's refused writes are retried.
  static constexpr std::string_view kRefusedWritesKey = "<refused claim writes>";

  // `allocator`, `store` and `kube` must outlive the controller.
  ClaimController(Allocator* allocator, KubeApiStore* store, kube::KubeClient* kube, Options options);
  ~ClaimController() override;  // Stop().

  // The claim watch's sink.
  kube::ReflectorSink* sink() { return &sink_; }

  // A pod ended or was deleted: claims waiting for their pod are tried
  // again now rather than after their backoff.
  void Kick();

  // Starts the worker. Idempotent.
  void Start();
  void Stop();

  absl::Status Reconcile(const std::string& key) override;

  // The first list has been reconciled, each of its objects once (and each
  // claim the allocator has that the list does not): the allocator has
  // every claim, and pdc's finalizer is on every object it took.
  bool synced() const { return synced_.HasBeenNotified(); }
  bool WaitForSync(absl::Duration timeout) const {
    return synced_.WaitForNotificationWithTimeout(timeout);
  }

  // Claims waiting for a retry (a deletion a VM blocks, an API failure).
  size_t waiting() const;
  // Objects the allocator refused (their spec), and why.
  size_t refused() const;

 private:
  // Feeds the cache; an object's removal forgets it in the store at once
  // (its withheld reclaim first), before a newer object of that name is
  // observed.
  class Sink final : public kube::ReflectorSink {
   public:
    explicit Sink(ClaimController* controller) : controller_(controller) {}
    void Replace(const std::vector<const api::json::Value*>& items) override;
    void Upsert(const api::json::Value& object) override;
    void Remove(const api::json::Value& object) override;

   private:
    ClaimController* const controller_;
    bool replaced_ = false;
  };

  // Brings the allocator in line with `object` (nullopt: the object under
  // `key` is gone). False when it must be tried again later.
  bool ReconcileClaim(const ClaimKey& key, const std::optional<api::ClaimObject>& object)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The allocator's `claim` whose object is gone (`successor` null; made
  // sure by a read) or is another object of that name now: the claim lets
  // go of its devices, by its reclaim policy, unless a pod of its VM may
  // run on them.
  bool ReconcileGone(const Claim& claim, const api::ClaimObject* successor = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The object's reclaim policy, taken into the allocator's `claim`.
  bool TakeReclaimPolicy(const api::ClaimObject& object, Claim& claim);
  // An object being deleted; `have` is its claim in the allocator (null:
  // none any more).
  bool ReconcileDeleting(const api::ClaimObject& object, const Claim* have)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An object that lives: pdc's finalizer on it, and a claim for it in the
  // allocator unless `in_allocator`.
  bool ReconcileLive(const api::ClaimObject& object, bool in_allocator)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first list: the claims in a device conflict and those withheld get
  // their Events and conditions.
  void ReportRecovery();
  bool SameClaim(const Claim& claim, const api::ClaimObject& object) const;
  // The object `uid` under `key` is gone: if the allocator keeps the claim
  // it recorded (a pod of its VM may run on it), the store is told not to
  // create that object again (KubeApiStore::ObjectDeleted).
  void KeepObjectDeleted(const ClaimKey& key, std::string_view uid);
  // The claim is out of the allocator: takes pdc's finalizer off the
  // object `uid`, unless its devices are still being erased (the store
  // does it once they are back). False when it must be tried again.
  bool Settle(const ClaimKey& key, std::string_view uid);
  // A withheld claim (a device conflict) being deleted: its reclaim policy
  // applied to its devices (KubeApiStore::WithheldReclaimOf). False to try
  // again.
  bool ReclaimWithheld(const ClaimKey& key, std::string_view uid);
  // ReadClaimObject, or for a withheld claim whose spec cannot be read,
  // ReadClaimObjectStatusOnly; the store observes what was read. The
  // cache's decoder.
  absl::StatusOr<api::ClaimObject> Decode(const api::json::Value& object);
  // Deletes the claim from the allocator, first releasing a reservation
  // whose pod is gone. FailedPrecondition while the pod lives.
  absl::Status LetGo(const Claim& claim);
  // Deletes the claim from the allocator although its object is gone
  // (or another now): its devices go by the reclaim policy. Never while a
  // pod of its VM may run on them: FailedPrecondition then, and the claim
  // waits for the pod to end.
  absl::Status ForceLetGo(const Claim& claim);
  void Track(const ClaimKey& key, bool done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Allocator* const allocator_;
  KubeApiStore* const store_;
  kube::KubeClient* const kube_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_set<ClaimKey> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ClaimKey, std::string> refused_ ABSL_GUARDED_BY(mu_);
  // Keys of the first list not reconciled yet; synced_ once none is left.
  absl::flat_hash_set<std::string> unsynced_ ABSL_GUARDED_BY(mu_);
  absl::Notification synced_;

  kube::WorkQueue queue_;
  kube::TypedCache<api::ClaimObject> cache_;
  Sink sink_{this};
  kube::Controller controller_;
  bool started_ = false;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CLAIM_CONTROLLER_H_
