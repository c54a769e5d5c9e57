// The allocator core: the one place that decides which node and which devices
// a VM's claims get, and that keeps those decisions (docs/design.md §4, §5).
//
// A bound claim behaves like a bound PersistentVolumeClaim: it keeps its node
// and devices across any number of VM restarts (new pods, new pod UIDs) and
// restarts of the process, until the claim is deleted.
//
// Concurrency: every method is thread-safe. Filter, Score, Preemptable and
// the getters take a shared lock and see one consistent state; mutations take
// the exclusive lock only to decide and apply in memory, and wait for the
// store's fsync outside it, so concurrent binds share a flush (group commit).
// A mutation is acknowledged (returns OK) only once its record is durable.
// The allocator runs no threads of its own.
#ifndef PDC_ALLOCATOR_ALLOCATOR_H_
#define PDC_ALLOCATOR_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "allocator/store.h"
#include "common/clock.h"
#include "model/allocations.h"
#include "model/allocator_options.h"
#include "model/types.h"

namespace pdc {

// A claim the request needs, existing or to be generated from the template.
struct ResolvedClaim {
  ClaimKey key;
  bool exists = false;  // false: generated at bind time.
  Claim claim;          // Current state (or the template-to-be).
};

enum class Verdict : uint8_t {
  kFits = 0,
  kFailed = 1,        // May clear later (kube-scheduler: FailedNodes).
  kUnresolvable = 2,  // Preemption cannot help (FailedAndUnresolvableNodes).
};

// Why a node got its verdict; a low-cardinality label for metrics.
enum class FilterReason : uint8_t {
  kPassThrough = 0,    // The pod needs no managed device.
  kStickyHit = 1,      // The node holds the pod's bound claims.
  kFreshFit = 2,       // Pending claims fit here.
  kBoundElsewhere = 3,
  kReservedByOther = 4,
  kInsufficient = 5,
  kNotReporting = 6,
  kUnhealthy = 7,
  kClaimProblem = 8,   // Missing, Lost, inconsistent with the pod.
  kPinned = 9,         // A pin excludes this node.
  kHandoffPending = 10,  // Another VM is still receiving its devices here.
};
std::string_view ToString(FilterReason reason);

struct NodeVerdict {
  Verdict verdict = Verdict::kFits;
  FilterReason reason = FilterReason::kPassThrough;
  uint32_t message = 0;  // Index into FilterResult::messages.
};

struct FilterResult {
  // True when the pod needs no managed device: every node fits, untouched.
  bool pass_through = false;
  std::vector<NodeVerdict> nodes;  // Same order as the input.
  // Distinct failure messages in words a user understands; message 0 is "".
  std::vector<std::string> messages;

  const std::string& MessageFor(size_t i) const {
    return messages[nodes[i].message];
  }
};

// One claim touched by a bind, with what Undo needs to put it back.
struct BoundClaim {
  ClaimKey key;
  std::string uid;
  std::string resource_name;
  std::vector<PciAddress> devices;  // By serial, else address (HandoffOrderLess).
  bool created = false;          // Generated from the template by this bind.
  bool allocated = false;        // Was Pending; this bind chose its devices.
  std::optional<Reservation> previous_reservation;
};

struct BindOutcome {
  std::string node;
  std::string pod_uid;
  uint64_t revision = 0;  // The durable record of this bind.
  // In hand-off order (HandoffOrderLess in model/types.h): the pod's named
  // claims in annotation order, then its template claims by key. The order
  // of the pod's devices of a resource, as virt-launcher hands them to the
  // VM's hostDevices entries.
  std::vector<BoundClaim> claims;
  // Released marks this bind removed (a pinned claim took its device); Undo
  // puts them back.
  std::vector<ReleasedDevice> took_released;
};

// A drive of a claim, or of a Released mark, that an inventory update found
// at a new PCI address by its serial (docs/design.md §4.1, device identity):
// the claim's status, or the mark, now names the new address.
struct DeviceMove {
  std::string node;
  std::string serial;
  PciAddress from;
  PciAddress to;
  ClaimKey claim;         // The claim, or the deleted claim of a Released mark.
  bool released = false;  // A Released mark moved, not a claim's device.

  bool operator==(const DeviceMove&) const = default;
};

// A VM holding reservations, known by its UID (Kubernetes mode).
struct ReservingVm {
  std::string ns;
  std::string uid;
  std::string name;

  bool operator==(const ReservingVm&) const = default;
};

// Counts for metrics (claims by phase, devices by state).
struct AllocatorStats {
  uint64_t revision = 0;
  size_t nodes = 0;
  size_t nodes_not_reporting = 0;
  size_t claims_pending = 0;
  size_t claims_bound = 0;
  size_t claims_lost = 0;
  size_t devices_free = 0;
  size_t devices_allocated = 0;
  size_t devices_unhealthy = 0;
  // Free of claims but not offered (docs/design.md §4.7): Released by a
  // deleted Retain-policy claim, or waiting to return to the host driver.
  size_t devices_released = 0;
  size_t devices_returning = 0;
};

class Allocator {
 public:
  // Recovers the state from `store` and returns a ready allocator. Bad options
  // are InvalidArgument naming the field; a corrupt store is DataLoss.
  // `store` and `clock` must outlive the allocator.
  static absl::StatusOr<std::unique_ptr<Allocator>> Open(
      AllocatorOptions options, Store* store, const Clock* clock,
      RecoveryReport* report = nullptr);

  virtual ~Allocator() = default;

  // --- Inventory -----------------------------------------------------------
  // Replaces a node's inventory; also its heartbeat. Devices no class matches
  // are dropped; devices sharing a non-empty serial are kept unhealthy. A
  // claim's drive is followed by its serial to whatever address it has now
  // (Change::moves); a bound claim whose drive is not found (or is
  // ambiguous) turns Lost; a Lost claim whose devices are all back turns
  // Bound again. Released marks follow their serial the same way. A device
  // leaves the return list only once `inventory.returned` acknowledges its
  // identity (serial, else address) and it is reported healthy on a host
  // driver; `returned` is consumed, never stored.
  // Persists only when something durable changed.
  virtual absl::Status ReplaceInventory(NodeInventory inventory) = 0;
  // The node left the cluster: its claims turn Lost.
  virtual absl::Status RemoveNode(std::string_view node) = 0;

  // --- Claims --------------------------------------------------------------
  // Validates (DNS-1123 names, count >= 1, configured resource name, pins)
  // and stores a Pending claim. AlreadyExists when the key is taken.
  // `uid` is the claim object's UID where one exists (Kubernetes mode, read
  // and bounded by api/kube_objects.h); "" lets the allocator make one.
  virtual absl::StatusOr<Claim> CreateClaim(const ClaimKey& key, const ClaimSpec& spec,
                                            std::string_view uid) = 0;
  absl::StatusOr<Claim> CreateClaim(const ClaimKey& key, const ClaimSpec& spec) {
    return CreateClaim(key, spec, "");
  }
  virtual absl::StatusOr<Claim> GetClaim(const ClaimKey& key) const = 0;
  // All claims ("" namespace) or those of one namespace, sorted by key.
  virtual std::vector<Claim> ListClaims(std::string_view ns) const = 0;
  // FailedPrecondition while reserved by a VM, unless `force`. The devices
  // of a Bound or Lost claim are not freed (docs/design.md §4.7): with
  // reclaimPolicy Delete they go on the node's return list (offered again
  // once reported back on their host driver, healthy); with Retain they
  // become Released (offered only to a claim that pins them).
  virtual absl::Status DeleteClaim(const ClaimKey& key, bool force) = 0;
  // The one spec field a user may change on a bound claim (as on a
  // PersistentVolume): the policy its devices go by when it is deleted.
  // NotFound when there is no claim `key`.
  virtual absl::Status SetReclaimPolicy(const ClaimKey& key, ReclaimPolicy policy) = 0;
  // Clears the claim's reservation when held by `pod_uid` ("" = any pod).
  virtual absl::Status Release(const ClaimKey& key,
                               std::string_view pod_uid) = 0;
  // The VM with UID `vm_uid` in `ns` is gone (Kubernetes deleted it): clears
  // every reservation it holds, as one record, and returns the claims
  // released, sorted; the named claims among them are free for other VMs.
  // Nothing held: an empty list and no record. InvalidArgument when
  // `vm_uid` is empty (a VM without a known UID is never released this way).
  virtual absl::StatusOr<std::vector<ClaimKey>> ReleaseVm(std::string_view ns,
                                                          std::string_view vm_uid) = 0;
  // The VMs with a known UID that hold reservations, in `ns` ("" = every
  // namespace), sorted by namespace and UID: what to compare with the VMs
  // that exist, to release those that are gone.
  virtual std::vector<ReservingVm> ReservingVms(std::string_view ns) const = 0;
  // An administrator's word that the Released device at `address` on `node`
  // may go to any claim: drops its mark. NotFound when the node is unknown,
  // or it has neither the device nor a mark for it; FailedPrecondition when
  // the device is not Released.
  virtual absl::Status ReleaseDevice(std::string_view node, PciAddress address) = 0;
  // An administrator's word that the Released device at `address` on `node`
  // goes to claim `to` (another namespace, a PersistentVolume's claimRef
  // edited by hand): the mark then names `to` (UID unknown), so claims of
  // `to.ns` may pin it and no others. InvalidArgument for an empty
  // namespace or name; NotFound and FailedPrecondition as ReleaseDevice.
  virtual absl::Status HandOverDevice(std::string_view node, PciAddress address,
                                      const ClaimKey& to) = 0;
  // An administrator's word that the erase of the device at `address` on
  // `node` (on its way back to its host driver after a Delete claim) will
  // not finish: the device leaves the return list and is held Released with
  // no claim (its data may still be on it), so no claim may pin it until an
  // administrator releases or hands it over. NotFound when the node is
  // unknown; FailedPrecondition when the device is not returning.
  virtual absl::Status AbandonErase(std::string_view node, PciAddress address) = 0;
  // The deleted claim `key` (UID `uid`) that the allocator never took up
  // (left out at recovery: a device in two claims): its reclaim policy
  // applied on `node`. `own` are the devices only it names: `policy`
  // Delete puts them on the return list, Retain marks them Released for
  // it. `shared` are devices other claims name too: held Released for no
  // claim (an administrator decides; a restart gives them to the claim that
  // is left). The record also deletes `key`, so a store lets its object go
  // as for any deleted claim. FailedPrecondition when the allocator has a
  // claim `key`; NotFound when `node` is unknown.
  virtual absl::Status ReclaimWithheld(const ClaimKey& key, std::string_view uid,
                                       std::string_view node, const std::vector<BoundDevice>& own,
                                       const std::vector<PciAddress>& shared,
                                       ReclaimPolicy policy) = 0;

  // --- Scheduling ----------------------------------------------------------
  // The claims a pod needs: its explicit claims, plus one template claim per
  // managed resource the explicit ones do not cover.
  virtual absl::StatusOr<std::vector<ResolvedClaim>> Resolve(
      const SchedulingRequest& request) const = 0;
  // A verdict per candidate node. Never mutates.
  virtual FilterResult Filter(const SchedulingRequest& request,
                              absl::Span<const std::string_view> nodes) const = 0;
  // 0..10 per node: 10 where the pod's bound claims are; the configured
  // policy for fresh allocations; 0 where the pod does not fit.
  virtual std::vector<int> Score(
      const SchedulingRequest& request,
      absl::Span<const std::string_view> nodes) const = 0;
  // Of `nodes`, those where evicting pods could let the request fit.
  virtual std::vector<std::string> Preemptable(
      const SchedulingRequest& request,
      absl::Span<const std::string_view> nodes) const = 0;
  // All-or-nothing: allocates devices on `node` for pending claims, reserves
  // every claim for the VM, and persists it as one record before returning.
  // Aborted when the node no longer fits (a race; retry), FailedPrecondition
  // when it never will.
  virtual absl::StatusOr<BindOutcome> Bind(const SchedulingRequest& request,
                                           std::string_view node) = 0;
  // Reverts what `outcome` did, for claims still as that bind left them.
  // Idempotent: a second call changes nothing and returns OK.
  virtual absl::Status Undo(const BindOutcome& outcome) = 0;

  // --- Hand-off (docs/design.md §6) ----------------------------------------
  // The node driver handed `devices` of `resource_name` to pod `pod_uid`
  // (kubelet's Allocate answered for it): its claims stop being pending.
  // NotFound when that pod waits for nothing of the resource there;
  // FailedPrecondition when `devices` are not exactly the pod's claimed ones.
  // Idempotent: confirming again returns the same claims.
  virtual absl::StatusOr<std::vector<ClaimKey>> ConfirmHandoff(
      std::string_view node, std::string_view pod_uid, std::string_view resource_name,
      absl::Span<const PciAddress> devices) = 0;
  // The pod went away before it received its devices: releases the
  // reservations it holds on `node` that were never handed off. NotFound when
  // there are none.
  virtual absl::StatusOr<std::vector<ClaimKey>> CancelHandoff(std::string_view node,
                                                              std::string_view pod_uid) = 0;
  // Pods waiting for devices on `node` ("" = every node), sorted by node,
  // resource name, pod UID.
  virtual std::vector<PendingHandoff> PendingHandoffs(std::string_view node) const = 0;

  // --- Views ---------------------------------------------------------------
  virtual absl::StatusOr<NodeView> GetNode(std::string_view node) const = 0;
  virtual std::vector<NodeView> ListNodes() const = 0;
  virtual absl::StatusOr<NodeAllocations> GetNodeAllocations(
      std::string_view node) const = 0;
  virtual AllocatorStats Stats() const = 0;
  // Advances with every committed mutation (one record each); never goes
  // back, also across restarts.
  virtual uint64_t revision() const = 0;
  // The getters above see a mutation as soon as it is decided, before its
  // record is durable (a bind waiting for its claims to reach the
  // Kubernetes API). A reader that tells others what the allocator holds
  // (pdc-node's allocations, the webhook's pin) calls this after reading:
  // it returns once every record of the state at the call is durable, so
  // what was read is acknowledged state; the store's error when it cannot
  // be made durable (then answer nothing from it).
  virtual absl::Status AwaitReadsDurable() const = 0;

  // --- Change notification -------------------------------------------------
  // The contract for learning about changes without polling (pdc-extender's
  // long-polls follow it):
  //  - every mutating call that commits a record (the revision advances)
  //    calls the listener once, after the record is durable and before the
  //    call returns OK; a call that fails, or that changes nothing durable
  //    (a heartbeat with the same inventory, a retried bind, an Undo or
  //    Release with nothing left to undo), commits nothing and calls nothing;
  //  - Change::revision is the allocator's revision at that moment: this
  //    mutation's or a later one's (concurrent mutations may report out of
  //    order, or the same revision twice);
  //  - Change::nodes are the nodes whose allocations version
  //    (GetNodeAllocations().version) this mutation raised: exactly the
  //    nodes whose answer may differ from before it. Empty when the change
  //    concerns no node (a Pending claim created or deleted);
  //  - it runs on the mutating thread with no allocator lock held, so it may
  //    read the allocator; it must not block for long (it delays the
  //    mutation's caller) and must not mutate the allocator.
  struct Change {
    uint64_t revision = 0;
    std::vector<std::string> nodes;  // Sorted, no repeats.
    // Drives an inventory update followed to a new address (claims' by
    // claim key, then Released marks'); empty for any other mutation. For
    // the caller to log: the allocator core does no logging.
    std::vector<DeviceMove> moves;
  };
  using ChangeListener = std::function<void(const Change& change)>;
  // REQUIRES: called before the allocator is shared with other threads.
  // Replaces the previous listener; an empty one turns notification off.
  virtual void SetChangeListener(ChangeListener listener) = 0;

  // --- Maintenance ---------------------------------------------------------
  // Writes a snapshot and drops the log it covers. Safe to call at any time.
  virtual absl::Status Checkpoint() = 0;
  // True when enough records accumulated since the last checkpoint.
  virtual bool CheckpointDue() const = 0;
  // OK, or the store's sticky failure.
  virtual absl::Status Health() const = 0;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_ALLOCATOR_H_
