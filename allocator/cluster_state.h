// ClusterState: the allocator's in-memory state — nodes with their devices,
// claims, and the derived indexes the scheduling paths read (which claim owns
// which device, per-node free-device summaries). Internal to allocator/.
//
// Apply() is the only way to change it, and it is used both for live
// mutations and for replaying the store on recovery, so the state after a
// restart is, by construction, the state before it.
//
// Thread-safety: none; the Allocator guards it with its mutex.
#ifndef PDC_ALLOCATOR_CLUSTER_STATE_H_
#define PDC_ALLOCATOR_CLUSTER_STATE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "allocator/claim_entry.h"
#include "allocator/hot_table.h"
#include "allocator/name_pool.h"
#include "allocator/record.h"
#include "model/types.h"
#include "common/strings.h"

namespace pdc {

inline constexpr int16_t kNoClass = -1;

// Why a device no claim owns is still not free (docs/design.md §4.7).
enum class DeviceHold : uint8_t {
  kNone = 0,
  kReturning = 1,  // On the node's return_to_host list: offered to no claim.
  kReleased = 2,   // Released: offered only to a claim that pins it.
};

struct DeviceSlot {
  Device device;
  int16_t class_index = kNoClass;
  const ClaimEntry* owner = nullptr;  // The claim holding this device, if any.
  DeviceHold hold = DeviceHold::kNone;
};

// Per node and device class, what the filter's fast path needs.
struct ClassSummary {
  uint16_t healthy = 0;      // Healthy devices of the class in an IOMMU group.
  // Devices of the class owned by a claim or held (Released, returning):
  // what scoring counts as in use.
  uint16_t allocated = 0;
  uint16_t released = 0;     // Devices of the class held as Released.
  uint16_t returning = 0;    // Devices of the class waiting to return to the host.
  uint16_t free_usable = 0;  // Free devices in groups that can be allocated.
  uint16_t free_single = 0;  // ... of which in single-device groups.
  // Free single-device groups per NUMA node: (numa, count), by numa.
  absl::InlinedVector<std::pair<int16_t, uint16_t>, 2> free_single_by_numa;

  bool operator==(const ClassSummary&) const = default;
};

struct NodeState {
  std::string name;
  bool has_record = false;  // An inventory is known (and persisted).
  std::vector<DeviceSlot> devices;  // Sorted by address.
  std::vector<PciAddress> return_to_host;  // Sorted; slots have kReturning.
  std::vector<ReleasedDevice> released;     // Sorted; slots have kReleased.
  // Claims whose status.node is here, in no order. A node holds about one
  // claim per device: a vector takes half a hash set's memory and is as
  // quick to search at that size.
  std::vector<const ClaimEntry*> claims;
  // Of `claims`, those whose reserving pod has not received its devices yet
  // (ClaimStatus::HandoffPending). Almost always empty or tiny.
  absl::InlinedVector<const ClaimEntry*, 1> handoff_pending;
  absl::InlinedVector<ClassSummary, 2> summary;  // Indexed by class.
  uint64_t version = 0;                        // Last revision touching it.
  absl::Time last_report = absl::InfinitePast();  // In memory only.

  const DeviceSlot* Find(PciAddress address) const;
  bool HasClaim(const ClaimEntry* claim) const {
    return std::find(claims.begin(), claims.end(), claim) != claims.end();
  }
  // The Released mark of `address`, or nullptr.
  const ReleasedDevice* FindReleased(PciAddress address) const;
  NodeRecord ToRecord() const;
};

// Claims are kept as ClaimEntry (claim_entry.h) in a node_hash_set keyed by
// their own `key` (a map would store every key twice): lookups by ClaimKey
// are transparent.
struct ClaimByKeyHash {
  using is_transparent = void;
  size_t operator()(const ClaimKey& k) const { return absl::Hash<ClaimKey>()(k); }
  size_t operator()(const ClaimEntry& c) const { return absl::Hash<ClaimKey>()(c.key); }
};
struct ClaimByKeyEq {
  using is_transparent = void;
  static const ClaimKey& K(const ClaimKey& k) { return k; }
  static const ClaimKey& K(const ClaimEntry& c) { return c.key; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return K(a) == K(b);
  }
};
using ClaimSet = absl::node_hash_set<ClaimEntry, ClaimByKeyHash, ClaimByKeyEq>;

class ClusterState {
 public:
  explicit ClusterState(std::vector<DeviceClass> classes);

  // Applies one record. During recovery an inconsistency (a device in two
  // claims, a revision out of order) is DataLoss; live callers never produce
  // one, so for them an error is a bug.
  absl::Status Apply(const Record& record);
  // The same, taking the claims out of `record` instead of copying them (the
  // live path: the record is in the log already and not needed afterwards).
  absl::Status Apply(Record&& record);
  // The same, and sets `*touched_nodes` to the names of the nodes whose
  // `version` the record set (sorted, no repeats): a node whose inventory,
  // return list or claims changed, also one the record removed.
  absl::Status Apply(Record&& record, std::vector<std::string>* touched_nodes);

  // While deferred (during recovery), node summaries are not kept current
  // after every record; EndDeferredSummaries() recomputes each touched node
  // once. Replaying a million records then costs one summary per node instead
  // of one per record. Scheduling paths must not run while deferred.
  void BeginDeferredSummaries() { defer_summaries_ = true; }
  void EndDeferredSummaries();

  uint64_t revision() const { return revision_; }
  const std::vector<DeviceClass>& classes() const { return classes_; }
  // Index of the class with this resource name, or kNoClass.
  int16_t ClassIndex(std::string_view resource_name) const;
  int16_t Classify(const Device& device) const;

  const ClaimEntry* FindClaim(const ClaimKey& key) const;
  const NodeState* FindNode(std::string_view name) const;
  // nullptr when the node is unknown or there are more than kHotClasses
  // classes; then callers use FindNode().
  const NodeHot* FindHot(std::string_view name) const {
    return hot_enabled_ ? hot_.Find(name) : nullptr;
  }
  // out[i] = FindHot(names[i]) for every i, faster than that loop for many
  // names (HotTable::FindAll). Resizes `out`.
  void FindHots(absl::Span<const std::string_view> names,
                std::vector<const NodeHot*>& out) const {
    out.assign(names.size(), nullptr);
    if (hot_enabled_) hot_.FindAll(names, absl::MakeSpan(out));
  }
  // The node driver reported (in memory only; heartbeats are not persisted).
  void SetLastReport(std::string_view name, absl::Time t);

  const ClaimSet& claims() const { return claims_; }
  // How many claims are in `phase`, kept as claims change (Stats() would
  // otherwise walk every claim).
  size_t ClaimsIn(ClaimPhase phase) const { return claims_by_phase_[static_cast<size_t>(phase)]; }
  const absl::flat_hash_map<std::string, NodeState>& nodes() const { return nodes_; }

  // Every claim's devices exist at most once; bound claims have `count`
  // devices; node summaries are current. "" when all hold, else the first
  // violation (for tests and recovery).
  std::string CheckInvariants() const;

  // --- A snapshot at a cut (docs/design.md §8.4) ---------------------------
  // A checkpoint encodes the state at one revision R in chunks, releasing the
  // allocator's lock between them, while mutations go on. From BeginCut() to
  // EndCut() the state keeps the pre-image, as of R, of every node record and
  // claim a record changes or deletes: copied on the first such change after
  // R (copy-on-write), so that SnapshotBuilder (snapshot_builder.h) reads
  // every item as it was at R, whatever happened to it since.
  struct Cut {
    uint64_t revision = 0;
    std::vector<std::string> nodes;  // Nodes with a record at R, any order.
    // The claims at R, any order. A claim deleted since is gone from the
    // state but not from here: read them only through ClaimAtCut().
    std::vector<const ClaimEntry*> claims;
  };
  // The pre-images of a cut: claims by identity (a claim's address is not
  // reused before it is deleted, which keeps its image first), node records
  // by name (nullopt: no record at the cut). Node maps: a busy encode keeps
  // tens of thousands of claims, and a flat map's rehash would move them all
  // inside one mutation.
  struct CutImages {
    absl::node_hash_map<const ClaimEntry*, Claim> claims;
    absl::node_hash_map<std::string, std::optional<NodeRecord>> nodes;
  };
  // REQUIRES: no cut open.
  Cut BeginCut();
  // Closes the cut and hands its pre-images over, for the caller to destroy
  // once it released the allocator's lock: after a busy encode they are
  // thousands of claims. REQUIRES: a cut open.
  CutImages EndCut();
  // `claim` (from Cut::claims) as it was at the cut.
  Claim ClaimAtCut(const ClaimEntry* claim) const;
  // The record of `node` (from Cut::nodes) as it was at the cut.
  NodeRecord NodeAtCut(const std::string& node) const;

  // All nodes (with records) and claims as one snapshot record, sorted: what
  // a checkpoint writes (through SnapshotBuilder, which does not build it).
  Record Snapshot() const;

 private:
  template <typename RecordRef>
  absl::Status ApplyRecord(RecordRef&& record);
  absl::Status ApplyPutClaim(Claim claim, uint64_t revision);
  void ApplyDeleteClaim(const ClaimKey& key, uint64_t revision);
  absl::Status ApplyPutNode(const NodeRecord& node, uint64_t revision);
  void ApplyDeleteNode(const std::string& node, uint64_t revision);

  NodeState& GetOrCreateNode(const std::string& name);
  // Links `claim`'s devices to the slots of its node, marks the node changed
  // at `revision` and recomputes its summary.
  absl::Status LinkClaim(const ClaimEntry* claim, uint64_t revision);
  // Undoes LinkClaim. With kRelinkSameNode the claim is about to be linked
  // to the same node again: the summary is left to that LinkClaim, and the
  // node stays even if it has no inventory and no other claim.
  enum class Unlink { kFinal, kRelinkSameNode };
  void UnlinkClaim(const ClaimEntry* claim, uint64_t revision, Unlink mode);
  void CountClaim(const ClaimEntry& claim, int delta) {
    claims_by_phase_[static_cast<size_t>(claim.phase)] += delta;
  }
  void RecomputeSummary(NodeState& node);
  void SyncHot(const NodeState& node);
  NodeHot HotOf(const NodeState& node) const;
  // Snapshot order: nodes with records by name, then claims by key.
  std::vector<const NodeState*> SortedNodes() const;
  std::vector<const ClaimEntry*> SortedClaims() const;
  void EraseNode(absl::flat_hash_map<std::string, NodeState>::iterator it);
  NodeState* MutableNode(std::string_view name);
  void ComputeSummary(NodeState& node) const;
  // While a cut is open: keep what the claim / the node's record was
  // before its first change since the cut.
  void KeepCutImage(const ClaimEntry& claim) {
    if (cut_open_ && !cut_images_.claims.contains(&claim)) {
      cut_images_.claims.emplace(&claim, claim.ToClaim());
    }
  }
  void KeepCutImage(const std::string& node);
  // Marks `node` changed by the record at `revision` (its version).
  void Touch(NodeState& node, uint64_t revision) {
    node.version = revision;
    if (touched_ != nullptr) touched_->push_back(node.name);
  }

  std::vector<DeviceClass> classes_;
  uint64_t revision_ = 0;
  // The resource and node names of claims_ (ClaimEntry). Declared first:
  // entries keep pointers into it.
  NamePool names_;
  ClaimSet claims_;  // Pointer-stable elements.
  std::array<size_t, 3> claims_by_phase_{};  // Indexed by ClaimPhase.
  absl::flat_hash_map<std::string, NodeState> nodes_;
  const bool hot_enabled_;
  HotTable hot_;  // Same keys as nodes_ (when enabled).
  bool defer_summaries_ = false;
  absl::flat_hash_set<std::string> stale_summaries_;  // While deferred.
  // Where Touch reports, during an Apply that asked for it; else null.
  std::vector<std::string>* touched_ = nullptr;
  // Whether a cut is open (see BeginCut), and its pre-images.
  bool cut_open_ = false;
  CutImages cut_images_;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_CLUSTER_STATE_H_
