// AllocatorImpl: the implementation behind allocator.h. Internal to
// allocator/; everyone else uses Allocator::Open().
//
// Locking: `mu_` guards the state. Readers (Filter, Score, getters) hold it
// shared. A mutation holds it exclusively while it decides, appends its record
// to the store and applies it, then releases it and waits for the store's
// fsync; only then does it return OK. `checkpoint_mu_` serialises checkpoints
// and is always taken before `mu_`. A checkpoint holds `mu_` exclusively only
// to cut (its revision, the store's log, the set of items), then shared, one
// chunk of the encode at a time (snapshot_builder.h).
#ifndef PDC_ALLOCATOR_ALLOCATOR_IMPL_H_
#define PDC_ALLOCATOR_ALLOCATOR_IMPL_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "allocator/allocator.h"
#include "allocator/cluster_state.h"
#include "allocator/request_plan.h"

namespace pdc {

class AllocatorImpl final : public Allocator {
 public:
  AllocatorImpl(AllocatorOptions options, Store* store, const Clock* clock);

  absl::Status Recover(RecoveryReport* report);

  absl::Status ReplaceInventory(NodeInventory inventory) override;
  absl::Status RemoveNode(std::string_view node) override;
  using Allocator::CreateClaim;
  absl::StatusOr<Claim> CreateClaim(const ClaimKey& key, const ClaimSpec& spec,
                                    std::string_view uid) override;
  absl::StatusOr<Claim> GetClaim(const ClaimKey& key) const override;
  std::vector<Claim> ListClaims(std::string_view ns) const override;
  absl::Status DeleteClaim(const ClaimKey& key, bool force) override;
  absl::Status Release(const ClaimKey& key, std::string_view pod_uid) override;
  absl::Status ReleaseDevice(std::string_view node, PciAddress address) override;
  absl::Status SetReclaimPolicy(const ClaimKey& key, ReclaimPolicy policy) override;
  absl::Status HandOverDevice(std::string_view node, PciAddress address,
                              const ClaimKey& to) override;
  absl::Status AbandonErase(std::string_view node, PciAddress address) override;
  absl::Status ReclaimWithheld(const ClaimKey& key, std::string_view uid, std::string_view node,
                               const std::vector<BoundDevice>& own,
                               const std::vector<PciAddress>& shared,
                               ReclaimPolicy policy) override;
  absl::StatusOr<std::vector<ClaimKey>> ReleaseVm(std::string_view ns,
                                                  std::string_view vm_uid) override;
  std::vector<ReservingVm> ReservingVms(std::string_view ns) const override;

  absl::StatusOr<std::vector<ResolvedClaim>> Resolve(
      const SchedulingRequest& request) const override;
  FilterResult Filter(const SchedulingRequest& request,
                      absl::Span<const std::string_view> nodes) const override;
  std::vector<int> Score(const SchedulingRequest& request,
                         absl::Span<const std::string_view> nodes) const override;
  std::vector<std::string> Preemptable(
      const SchedulingRequest& request,
      absl::Span<const std::string_view> nodes) const override;
  absl::StatusOr<BindOutcome> Bind(const SchedulingRequest& request,
                                   std::string_view node) override;
  absl::Status Undo(const BindOutcome& outcome) override;

  absl::StatusOr<std::vector<ClaimKey>> ConfirmHandoff(
      std::string_view node, std::string_view pod_uid, std::string_view resource_name,
      absl::Span<const PciAddress> devices) override;
  absl::StatusOr<std::vector<ClaimKey>> CancelHandoff(std::string_view node,
                                                      std::string_view pod_uid) override;
  std::vector<PendingHandoff> PendingHandoffs(std::string_view node) const override;

  absl::StatusOr<NodeView> GetNode(std::string_view node) const override;
  std::vector<NodeView> ListNodes() const override;
  absl::StatusOr<NodeAllocations> GetNodeAllocations(std::string_view node) const override;
  AllocatorStats Stats() const override;
  uint64_t revision() const override;
  absl::Status AwaitReadsDurable() const override ABSL_LOCKS_EXCLUDED(mu_);
  void SetChangeListener(ChangeListener listener) override;

  absl::Status Checkpoint() override;
  bool CheckpointDue() const override;
  absl::Status Health() const override;

  // For tests: "" when the state's invariants hold.
  std::string CheckInvariantsForTest() const;
  // For tests: the state as a snapshot record (what a checkpoint now would
  // write).
  Record SnapshotForTest() const;
  // For tests: checkpoints encode `items` nodes or claims per chunk, and call
  // `between_chunks` (when set) after the cut and after every chunk, on the
  // checkpointing thread with no lock held: it may mutate the allocator.
  void SetCheckpointChunkForTest(size_t items, std::function<void()> between_chunks);

 private:
  struct Evaluation {
    Verdict verdict = Verdict::kFits;
    FilterReason reason = FilterReason::kPassThrough;
    // A message shared by many nodes points into the RequestPlan (no copy
    // per node); a node-specific one is owned.
    std::string_view shared;
    std::string owned;
    const NodeState* node = nullptr;

    std::string_view message() const { return shared.empty() ? owned : shared; }
  };

  // The verdict for one node. REQUIRES: mu_ held (shared is enough).
  Evaluation EvaluateLocked(const RequestPlan& plan, std::string_view node_name,
                            absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Fast path of Filter and Score for a fresh, unpinned request, from the
  // node's NodeHot. kFits and kInsufficient are exactly what EvaluateLocked
  // would decide (class `short_class` has only `free` devices); kAsk means
  // "ask EvaluateLocked".
  struct HotVerdict {
    enum Outcome : uint8_t { kAsk, kFits, kInsufficient };
    Outcome outcome = kAsk;
    size_t short_class = 0;
    size_t free = 0;
  };
  // `reporting_since_ns`: ReportingSinceNs(now), computed once per request.
  HotVerdict HotEvaluateLocked(const RequestPlan& plan, const NodeHot* hot,
                               int64_t reporting_since_ns) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The oldest last report (Unix ns) that still counts as reporting at `now`.
  int64_t ReportingSinceNs(absl::Time now) const;
  // ScoreLocked's answer for a node HotEvaluateLocked found fitting, or -1
  // when it needs the full NodeState (more than one class).
  int HotScoreLocked(const RequestPlan& plan, const NodeHot& hot) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A claim of another pod that waits for its devices of a class the plan
  // needs on `node`, when hand-offs are serialised; else nullptr.
  const ClaimEntry* BlockingHandoffLocked(const RequestPlan& plan, const NodeState& node) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  int ScoreLocked(const RequestPlan& plan, const Evaluation& e) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool ReportingLocked(const NodeState& node, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  NodeView ViewLocked(const NodeState& node, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // A record appended and applied in memory, not yet known to be durable.
  struct Commit {
    Store::Ticket ticket = 0;  // 0: nothing was committed.
    // The nodes whose version the record raised (sorted, no repeats): what
    // the change listener is told.
    std::vector<std::string> nodes;
    std::vector<DeviceMove> moves;  // What the listener is told moved.
  };
  // Appends `mutations` as the next record and applies it; returns what
  // SyncOrFail needs outside the lock.
  absl::StatusOr<Commit> CommitLocked(std::vector<Mutation> mutations)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for durability, then tells the change listener; a failure fails
  // the allocator for good.
  absl::Status SyncOrFail(Commit commit) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every record appended up to `ticket` is durable (an answer
  // that relies on records another call appended); 0: nothing to wait for.
  // A failure fails the allocator for good, as SyncOrFail.
  absl::Status AwaitDurable(Store::Ticket ticket) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status FailedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Filter messages that do not depend on the node or the request, built
  // once so that thousands of nodes share them (no text per node).
  struct SharedMessages {
    explicit SharedMessages(const AllocatorOptions& options);
    std::string never_reported;      // No inventory known for the node.
    std::string silent_since_start;  // Known from the store, no report since.
    std::string silent;              // Last report older than nodeStaleAfter.
  };

  const AllocatorOptions options_;
  const SharedMessages messages_;
  Store* const store_;
  const Clock* const clock_;

  // Every mutation takes mu_ exclusively through a MutationLock, which
  // counts the mutations that asked for it and those that got it. Between two
  // chunks a checkpoint waits until every mutation that asked has had its
  // turn: absl::Mutex is not fair, and the checkpoint's next ReaderLock could
  // otherwise take the lock again before a woken writer runs, chunk after
  // chunk, holding that writer for the whole encode.
  class ABSL_SCOPED_LOCKABLE MutationLock {
   public:
    explicit MutationLock(AllocatorImpl* a) ABSL_EXCLUSIVE_LOCK_FUNCTION(a->mu_) : a_(a) {
      a_->CountMutation(/*served=*/false);
      a_->mu_.Lock();
      a_->CountMutation(/*served=*/true);
    }
    ~MutationLock() ABSL_UNLOCK_FUNCTION() { a_->mu_.Unlock(); }
    MutationLock(const MutationLock&) = delete;
    MutationLock& operator=(const MutationLock&) = delete;

   private:
    AllocatorImpl* const a_;
  };
  void CountMutation(bool served) ABSL_LOCKS_EXCLUDED(turn_mu_);
  // Returns once every mutation that asked for mu_ before the call got it.
  // REQUIRES: mu_ not held by the caller.
  void LetWaitingMutationsThrough() ABSL_LOCKS_EXCLUDED(mu_, turn_mu_);

  absl::Mutex checkpoint_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Nodes or claims a checkpoint encodes per hold of mu_: a mutation waits
  // for one chunk at most (a fraction of a millisecond at the default).
  size_t checkpoint_chunk_ ABSL_GUARDED_BY(checkpoint_mu_) = 256;
  std::function<void()> between_chunks_ ABSL_GUARDED_BY(checkpoint_mu_);
  mutable absl::Mutex mu_;
  ClusterState state_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  // The ticket of the last record appended: what an answer that changes
  // nothing (a retried bind, a repeated confirmation) waits for before it
  // says OK, so that nothing is acknowledged before it is durable.
  Store::Ticket last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checkpoint_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // The MutationLock counts; a leaf lock, held for an increment or a check.
  absl::Mutex turn_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::CondVar turn_taken_;  // Signalled when a mutation got mu_.
  uint64_t mutations_asking_ ABSL_GUARDED_BY(turn_mu_) = 0;
  uint64_t mutations_served_ ABSL_GUARDED_BY(turn_mu_) = 0;
  // Set before the allocator is shared (see SetChangeListener), read only
  // afterwards: no lock.
  ChangeListener listener_;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_ALLOCATOR_IMPL_H_
