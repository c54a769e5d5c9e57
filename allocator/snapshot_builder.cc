#include "allocator/snapshot_builder.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace pdc {

SnapshotBuilder::SnapshotBuilder(ClusterState::Cut cut) : cut_(std::move(cut)) {
  std::sort(cut_.nodes.begin(), cut_.nodes.end());
  claim_starts_.reserve(cut_.claims.size());
  claims_.reserve(160 * cut_.claims.size());  // A little more than a typical claim.
}

void SnapshotBuilder::EncodeSome(const ClusterState& state, size_t max_items) {
  size_t budget = std::max<size_t>(max_items, 1);
  for (; budget > 0 && next_node_ < cut_.nodes.size(); --budget, ++next_node_) {
    PutsEncoder::EncodePut(state.NodeAtCut(cut_.nodes[next_node_]), &nodes_);
  }
  for (; budget > 0 && next_claim_ < cut_.claims.size(); --budget, ++next_claim_) {
    claim_starts_.push_back(claims_.size());
    PutsEncoder::EncodePut(state.ClaimAtCut(cut_.claims[next_claim_]), &claims_);
  }
}

std::string SnapshotBuilder::Finish() && {
  // Each claim's put and key, ordered by key as ClusterState::Snapshot()
  // orders them.
  struct Piece {
    std::pair<std::string_view, std::string_view> key;
    std::string_view put;
  };
  const std::string_view all = claims_;
  std::vector<Piece> pieces;
  pieces.reserve(claim_starts_.size());
  for (size_t i = 0; i < claim_starts_.size(); ++i) {
    const size_t end = i + 1 < claim_starts_.size() ? claim_starts_[i + 1] : all.size();
    const std::string_view put = all.substr(claim_starts_[i], end - claim_starts_[i]);
    pieces.push_back(Piece{PutsEncoder::EncodedClaimKey(put), put});
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.key < b.key; });
  PutsEncoder e(cut_.revision, cut_.nodes.size() + pieces.size());
  e.PutEncoded(nodes_);
  for (const Piece& p : pieces) e.PutEncoded(p.put);
  return std::move(e).Finish();
}

}  // namespace pdc
