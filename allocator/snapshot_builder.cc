#include "allocator/snapshot_builder.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace pdc {

SnapshotBuilder::SnapshotBuilder(ClusterState::Cut cut) : cut_(std::move(cut)) {
  std::sort(cut_.nodes.begin(), cut_.nodes.end());
  // Enough for typical nodes and claims: growing a buffer of megabytes
  // inside a chunk would hold the lock for the copy.
  claim_starts_.reserve(cut_.claims.size());
  claims_.reserve(256 * cut_.claims.size());
  nodes_.reserve(512 * cut_.nodes.size());
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

namespace {

// The first eight bytes of `s`, zero-padded, as a big-endian number: it
// orders strings as their bytes do, except that a tie needs a full compare.
uint64_t Prefix(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) {
    v = (v << 8) | (i < s.size() ? static_cast<uint8_t>(s[i]) : 0u);
  }
  return v;
}

}  // namespace

std::string SnapshotBuilder::Finish() && {
  // Each claim's put with its key, ordered by key as ClusterState::Snapshot()
  // orders them. The comparisons use the namespace's rank among the few
  // namespaces and the name's first bytes, held in the piece itself: the
  // encoded bytes, megabytes of them, are read only on a tie.
  struct Piece {
    uint32_t ns_rank;
    uint64_t name_prefix;
    std::string_view name;
    std::string_view put;
  };
  const std::string_view all = claims_;
  std::vector<Piece> pieces;
  pieces.reserve(claim_starts_.size());
  absl::flat_hash_map<std::string_view, uint32_t> ns_rank;
  for (size_t i = 0; i < claim_starts_.size(); ++i) {
    const size_t end = i + 1 < claim_starts_.size() ? claim_starts_[i + 1] : all.size();
    const std::string_view put = all.substr(claim_starts_[i], end - claim_starts_[i]);
    const auto [ns, name] = PutsEncoder::EncodedClaimKey(put);
    ns_rank.try_emplace(ns, 0);
    pieces.push_back(Piece{0, Prefix(name), name, put});
  }
  std::vector<std::string_view> namespaces;
  namespaces.reserve(ns_rank.size());
  for (const auto& [ns, rank] : ns_rank) namespaces.push_back(ns);
  std::sort(namespaces.begin(), namespaces.end());
  for (size_t i = 0; i < namespaces.size(); ++i) ns_rank[namespaces[i]] = static_cast<uint32_t>(i);
  for (Piece& p : pieces) p.ns_rank = ns_rank[PutsEncoder::EncodedClaimKey(p.put).first];
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    if (a.ns_rank != b.ns_rank) return a.ns_rank < b.ns_rank;
    if (a.name_prefix != b.name_prefix) return a.name_prefix < b.name_prefix;
    return a.name < b.name;
  });
  PutsEncoder e(cut_.revision, cut_.nodes.size() + pieces.size(),
                nodes_.size() + claims_.size());
  e.PutEncoded(nodes_);
  for (const Piece& p : pieces) e.PutEncoded(p.put);
  return std::move(e).Finish();
}

}  // namespace pdc
