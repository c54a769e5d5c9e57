// KubeApiStore: the allocator's Store in Kubernetes mode (docs/design.md
// §4.8). The durable record is what kube-apiserver holds in etcd, not a
// volume of pdc-extender's:
//  - each claim is its PersistentDeviceClaim object; the allocator's view of
//    it (phase, node, devices, reservation, hand-off) is the object's
//    status, written through the status subresource with the object's UID
//    and resourceVersion as preconditions. A claim generated from a VM's
//    template is created as an object owned by the VM;
//  - the holds of a node (devices to return to their host driver, devices
//    Released by a deleted Retain claim) are a ConfigMap per node in
//    pdc-extender's namespace, `pdc-holds-<hash of the node name>`;
//  - node inventories are not stored: pdc-node reports them again.
// Recover lists both and hands the allocator one snapshot. Append queues a
// record; Sync writes every queued record's net effect (group commit: one
// writer, the last state of each object) and returns once the apiserver
// acknowledged all of it, so a bind is answered only when its claims are
// recorded.
//
// Write order, so that a crash between two writes never frees a device:
// additions to holds, then claim statuses, then finalizer removals of
// deleted claims, then removals from holds. A claim that still names a
// device wins over a hold of the same device at the next Recover.
//
// Failures: an object that is gone (404, or re-created under another UID)
// is not written (the claim controller removes the claim); a write of one
// claim's object the apiserver refuses (403, 400/422: RBAC, a policy
// engine, a quota, a namespace being deleted) fails that claim's write
// only: a bind that needed it is refused with the apiserver's reason
// (Recorded), Options::on_refused tells it (an Event), and the write is
// tried again with backoff (RetryRefused, and every Sync) while the rest
// of the store goes on; a stale
// resourceVersion (409) is read again and the write repeated; an apiserver
// that does not answer is retried with backoff for `write_deadline`, and
// then the store fails for good (Health), like a file store whose fsync
// failed: the allocator refuses changes and pdc-extender must restart and
// recover from the API.
//
// Several replicas: only the leader writes (Options::may_write), and every
// write carries the resourceVersion it was computed from.
//
// Contradictions in what the API holds (one device in the status of two
// claims) are never resolved silently: both claims are left out of the
// allocator, the device is held as Released, and conflicts() lists them for
// the claim controller to report on the objects and in a metric.
//
// The parts: StoreCalls (kube_store_calls.h) calls the apiserver, retried
// and fenced; ClaimObjects (claim_objects.h) is the protocol of the claim
// objects (what is known of each, writes with preconditions, 409s);
// NodeHoldsObjects (node_holds_objects.h) the holds' ConfigMaps;
// ClaimReclaims (claim_reclaims.h) the reclaim of deleted claims. This
// class decides what is written, in which order, and what recovery takes.
//
// Thread-safety: as Store; Observe/Forget/Object from any thread.
#ifndef PDC_EXTENDER_KUBE_API_STORE_H_
#define PDC_EXTENDER_KUBE_API_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "allocator/store.h"
#include "api/claim_object.h"
#include "api/kube_objects.h"
#include "common/clock.h"
#include "extender/claim_objects.h"
#include "extender/claim_reclaims.h"
#include "extender/kube_store_calls.h"
#include "extender/node_holds_objects.h"
#include "kube/kube_http_client.h"
#include "kube/kube_reflector.h"

namespace pdc::extender {

// A device in the status of two or more claims.
struct ClaimConflict {
  std::string node;
  PciAddress address;
  std::vector<ClaimKey> claims;  // Sorted.
};

class KubeApiStore final : public Store {
 public:
  // The controlling owner of a template claim: the VM (or standalone VMI)
  // `vm` with `uid` in `ns`; nullopt when it is not known any more (the
  // claim is then created owned by a VirtualMachine of that UID, which
  // the garbage collector finds gone and deletes the claim).
  using OwnerOf = ClaimObjects::OwnerOf;

  struct Options {
    std::string holds_namespace;  // pdc-extender's own namespace.
    absl::Duration call_timeout = absl::Seconds(10);
    absl::Duration write_deadline = absl::Seconds(30);
    int64_t list_page = 500;
    OwnerOf owner_of;
    // Called after a claim's status was recorded, with the object's UID and
    // the phase before (for Events); may be empty.
    std::function<void(const Claim&, std::string_view uid, std::optional<ClaimPhase> before)>
        on_status;
    const Clock* clock = RealClock();
    // With several replicas (extender.leaderElection): whether this one may
    // still write. Asked before every write to the API, the repeat after a
    // 409 included, so a replica that lost the lease never overwrites what
    // the new leader wrote: its write fails and so does the store (Health).
    // Empty: always.
    std::function<bool()> may_write;
    // Called once, on the writing thread, when the store fails for good
    // (Health): with several replicas the leader gives its lease up then,
    // rather than hold it while it can record nothing. May be empty.
    std::function<void(const absl::Status&)> on_failed;
    // Called when the apiserver refused a write of claim `key`'s object
    // (`uid`, "" when there is none yet): `claim` is what was to be
    // written (nullopt: the claim was let go), `why` the apiserver's
    // answer. May be empty.
    std::function<void(const ClaimKey& key, std::string_view uid,
                       const std::optional<Claim>& claim, std::string_view why)>
        on_refused;
    // The first wait before a refused write is tried again; it doubles up
    // to `refused_retry_max`.
    absl::Duration refused_retry = absl::Seconds(1);
    absl::Duration refused_retry_max = absl::Minutes(5);
  };

  // `api` must outlive the store.
  KubeApiStore(kube::KubeApi* api, Options options);

  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override;
  absl::StatusOr<Ticket> Append(const Record& record) override;
  absl::Status Sync(Ticket ticket) override;
  // Nothing to compact: the API holds each object once.
  uint64_t RecordsSinceCheckpoint() const override { return 0; }
  uint64_t BytesSinceCheckpoint() const override { return 0; }
  absl::Status BeginCheckpoint(uint64_t) override { return absl::OkStatus(); }
  absl::Status WriteEncodedCheckpoint(uint64_t, std::string_view) override {
    return absl::OkStatus();
  }
  absl::Status Health() const override;

  // What the store knows of a claim object.
  using ObjectState = ClaimObjectState;

  // News from the claim watch: a newer resourceVersion of an object (an
  // older one, or one of an object the store has under another UID, is
  // kept only when the store knows nothing newer).
  void Observe(const api::ObjectMeta& meta);
  // The object is gone (only if it still has `uid`).
  void Forget(const ClaimKey& key, std::string_view uid);
  // ClaimObjects::ObjectDeleted and Dropped: the object of the allocator's
  // claim `claim_uid` was deleted while the claim stays; no status write
  // creates it again until the allocator lets the claim go.
  void ObjectDeleted(std::string_view claim_uid) { objects_.ObjectDeleted(claim_uid); }
  void Dropped(std::string_view claim_uid) { objects_.Dropped(claim_uid); }
  std::optional<ObjectState> Object(const ClaimKey& key) const;
  // Reads the object again (NotFound, and forgotten, when it is gone).
  absl::StatusOr<ObjectState> Reread(const ClaimKey& key, absl::Time deadline);

  // Tries again the refused writes whose backoff is over (every Sync does
  // too). The first failure that is no refusal; the store stays healthy.
  absl::Status RetryRefused();

  // Sets pdc's finalizer on the object (`present`) or takes it off; OK when
  // it already is so or the object is gone (or, with `uid`, is another
  // object now). Retries a stale resourceVersion.
  absl::Status SetFinalizer(const ClaimKey& key, bool present, std::string_view uid = {});

  // Reclaim: a deleted claim whose devices go back to their host driver
  // (reclaimPolicy Delete: pdc-node erases them first) keeps pdc's
  // finalizer, and its object the condition Reclaiming, until the node's
  // driver reported every one of them back on its host driver; the store
  // then takes the finalizer off (after the write that takes them off the
  // node's holds, or at SettleReclaim). Also across restarts: Recover
  // reads the condition.
  bool Reclaiming(const ClaimKey& key) const;
  // Takes the finalizer off `key`'s object when its devices are back (OK,
  // and nothing done, while they are not).
  absl::Status SettleReclaim(const ClaimKey& key);

  // Whether the API holds the claim `key` with allocator UID `claim_uid`
  // as Bound on `node` and reserved for pod `pod_uid`, as this process last
  // wrote or read it (the answer of a write is at least as new as the
  // write): OK, else FailedPrecondition saying what the API holds instead
  // (another object under the name, none, another state). What a bind
  // checks before it is acknowledged.
  absl::Status Recorded(const ClaimKey& key, std::string_view claim_uid, std::string_view node,
                        std::string_view pod_uid) const;
  // Why the name `key` is taken by an object that is no claim the
  // allocator holds (AllocatorOptions::template_name_taken): being erased,
  // withheld for a conflict, kept by another finalizer, or not (yet)
  // taken up; "" when the store knows no object of that name.
  std::string WhyNameTaken(const ClaimKey& key) const;

  std::vector<ClaimConflict> conflicts() const;
  // A claim left out of the allocator at recovery for a conflict: it stays
  // out until the next start, also once the other claims of its device are
  // deleted (recovery then decides with what the API holds).
  bool Withheld(const ClaimKey& key) const;
  // What deleting a withheld claim does to its devices (its reclaim policy
  // applies, as for any claim): the claim as recovery read it, the devices
  // only it named and those another claim of a conflict also named (their
  // data may be either's). nullopt when `key` with object UID `uid` was not
  // withheld.
  struct WithheldReclaim {
    Claim claim;
    std::vector<BoundDevice> own;
    std::vector<PciAddress> shared;
  };
  std::optional<WithheldReclaim> WithheldReclaimOf(const ClaimKey& key, std::string_view uid);
  // The reclaim policy of withheld `key` was applied: WithheldReclaimOf
  // answers nullopt for it from now on (it is applied once).
  void WithheldReclaimed(const ClaimKey& key);
  // Writes the DeviceConflict condition into the status of every claim in
  // conflict (their status otherwise as the API has it). The first failure.
  absl::Status ReportConflicts();
  // A claim withheld at recovery because its object cannot be taken as it
  // is (its spec cannot be read, or contradicts its status): left out of
  // the allocator, its devices held Released for it, as a claim in
  // conflict (Withheld() is true for it).
  struct WithheldObject {
    ClaimKey key;
    std::string uid;
    std::string reason;   // SpecUnreadable, StatusUnreadable, SpecContradictsStatus.
    std::string message;
  };
  std::vector<WithheldObject> invalid() const;
  // Writes the Withheld condition into the status of each of invalid().
  // The first failure.
  absl::Status ReportWithheld();

 private:
  using Holds = NodeHolds;
  struct Pending {
    Ticket ticket;
    Record record;
  };

  absl::Status WriteBatch(std::vector<Pending> batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // `s`, the outcome of writing claim `key` (`claim`, nullopt: let go, with
  // allocator UID `dropped_uid`): a refusal of that object is kept for a
  // retry and told (OK); anything else is returned.
  absl::Status Refusable(const ClaimKey& key, const std::optional<Claim>& claim,
                         std::string_view dropped_uid, absl::Status s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes `claim`'s status; `conflict` (not empty) is the message of a
  // DeviceConflict condition.
  absl::Status WriteClaim(const Claim& claim, std::string_view conflict = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // What the inventories said of `claim`'s devices, one per device.
  std::vector<api::DeviceFacts> FactsOf(const ClaimStatus& status) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void LearnFacts(const NodeInventory& inventory) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The claim is gone from the allocator; `batch_holds` are the holds the
  // batch writes (of the nodes it changes).
  // `claim_uid`: the allocator's UID of the claim let go ("" unknown); an
  // object under the key that records another claim is left alone.
  absl::Status DropClaim(const ClaimKey& key, std::string_view claim_uid,
                         const std::map<std::string, Holds>& batch_holds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // ClaimObjects forgot `key`'s object `uid`: it is gone.
  void Forgotten(const ClaimKey& key, std::string_view uid);

  const Options options_;
  const StoreCalls calls_;
  ClaimObjects objects_;
  ClaimReclaims reclaims_;

  // One batch written at a time; held across the API calls.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  NodeHoldsObjects holds_ ABSL_GUARDED_BY(write_mu_);
  // Each node's devices' IOMMU group and NUMA node, from the inventories
  // the allocator records (and, until a node reports, the claims' status).
  absl::flat_hash_map<std::string, std::vector<std::pair<PciAddress, api::DeviceFacts>>> facts_
      ABSL_GUARDED_BY(write_mu_);
  // The allocator's UID of the claim it holds under each key, as the
  // records say (Recover, then every PutClaim and DeleteClaim written): so
  // that letting a claim go never touches an object that is not its own.
  absl::flat_hash_map<ClaimKey, std::string> held_ ABSL_GUARDED_BY(write_mu_);
  // The claims left out for a conflict, as the API has them.
  absl::flat_hash_map<ClaimKey, Claim> conflicted_ ABSL_GUARDED_BY(write_mu_);
  absl::flat_hash_set<ClaimKey> withheld_reclaimed_ ABSL_GUARDED_BY(write_mu_);
  // Writes the apiserver refused, to try again: the claim's last state
  // (nullopt: let go, with the allocator's UID), and when.
  struct RefusedWrite {
    std::optional<Claim> claim;
    std::string dropped_uid;
    absl::Duration backoff;
    absl::Time next_try;
  };
  std::map<ClaimKey, RefusedWrite> refused_ ABSL_GUARDED_BY(write_mu_);

  mutable absl::Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  Ticket appended_ ABSL_GUARDED_BY(mu_) = 0;
  Ticket synced_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::vector<ClaimConflict> conflicts_ ABSL_GUARDED_BY(mu_);
  std::vector<WithheldObject> invalid_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<ClaimKey> withheld_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_KUBE_API_STORE_H_
