// SnapshotBuilder: encodes the allocator's state at one revision (a
// ClusterState cut) in chunks, so that a checkpoint need not hold the
// allocator's lock for the whole encode (docs/design.md §8.4). Internal to
// allocator/.
//
// The checkpoint opens a cut under the allocator's lock held exclusively
// (ClusterState::BeginCut), then calls EncodeSome() under the lock held
// shared, chunk by chunk, releasing it between chunks so that waiting
// mutations run; it closes the cut (EndCut) once Done(). Sorting and
// joining the pieces need no lock. The result is byte for byte
// EncodeRecord(Snapshot()) as of the cut: nodes by name, then claims by key.
//
// Thread-safety: one thread (the checkpoint's) uses a builder.
#ifndef PDC_ALLOCATOR_SNAPSHOT_BUILDER_H_
#define PDC_ALLOCATOR_SNAPSHOT_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "allocator/cluster_state.h"

namespace pdc {

class SnapshotBuilder {
 public:
  // Sorts the cut's nodes by name: no lock needed.
  explicit SnapshotBuilder(ClusterState::Cut cut);

  uint64_t revision() const { return cut_.revision; }
  bool Done() const { return next_node_ == cut_.nodes.size() && next_claim_ == cut_.claims.size(); }

  // Encodes up to `max_items` more nodes, then claims, as they were at the
  // cut. REQUIRES: the allocator's lock held (shared is enough) and the cut
  // `state` opened still open.
  void EncodeSome(const ClusterState& state, size_t max_items);

  // The encoded snapshot record. REQUIRES: Done(). No lock needed.
  std::string Finish() &&;

 private:
  ClusterState::Cut cut_;
  size_t next_node_ = 0;
  size_t next_claim_ = 0;
  std::string nodes_;  // Node puts, in name order.
  std::string claims_;  // Claim puts, in the cut's order ...
  std::vector<size_t> claim_starts_;  // ... each starting here.
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_SNAPSHOT_BUILDER_H_
