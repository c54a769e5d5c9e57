#include "allocator/cluster_state.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allocator/placement.h"
#include "common/status_macros.h"

namespace pdc {

const DeviceSlot* NodeState::Find(PciAddress address) const {
  auto it = std::lower_bound(
      devices.begin(), devices.end(), address,
      [](const DeviceSlot& s, PciAddress a) { return s.device.address < a; });
  if (it == devices.end() || it->device.address != address) return nullptr;
  return &*it;
}

const ReleasedDevice* NodeState::FindReleased(PciAddress address) const {
  auto it = std::lower_bound(
      released.begin(), released.end(), address,
      [](const ReleasedDevice& r, PciAddress a) { return r.address < a; });
  if (it == released.end() || it->address != address) return nullptr;
  return &*it;
}

NodeRecord NodeState::ToRecord() const {
  NodeRecord r;
  r.inventory.node = name;
  r.inventory.devices.reserve(devices.size());
  for (const DeviceSlot& s : devices) r.inventory.devices.push_back(s.device);
  r.return_to_host = return_to_host;
  r.released = released;
  return r;
}

ClusterState::ClusterState(std::vector<DeviceClass> classes)
    : classes_(std::move(classes)), hot_enabled_(classes_.size() <= kHotClasses) {}

int16_t ClusterState::ClassIndex(std::string_view resource_name) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].resource_name == resource_name) return static_cast<int16_t>(i);
  }
  return kNoClass;
}

int16_t ClusterState::Classify(const Device& device) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].Matches(device)) return static_cast<int16_t>(i);
  }
  return kNoClass;
}

const ClaimEntry* ClusterState::FindClaim(const ClaimKey& key) const {
  auto it = claims_.find(key);
  return it == claims_.end() ? nullptr : &*it;
}

const NodeState* ClusterState::FindNode(std::string_view name) const {
  auto it = nodes_.find(Sv(name));
  return it == nodes_.end() ? nullptr : &it->second;
}

NodeState* ClusterState::MutableNode(std::string_view name) {
  auto it = nodes_.find(Sv(name));
  return it == nodes_.end() ? nullptr : &it->second;
}

void ClusterState::SetLastReport(std::string_view name, absl::Time t) {
  if (NodeState* node = MutableNode(name)) {
    node->last_report = t;
    SyncHot(*node);
  }
}

NodeHot ClusterState::HotOf(const NodeState& node) const {
  NodeHot h;
  h.has_record = node.has_record;
  h.handoffs_pending = static_cast<uint8_t>(std::min<size_t>(node.handoff_pending.size(), 255));
  for (size_t c = 0; c < node.summary.size() && c < kHotClasses; ++c) {
    h.all_single[c] = node.summary[c].free_usable == node.summary[c].free_single ? 1 : 0;
    h.free_single[c] = node.summary[c].free_single;
    h.healthy[c] = node.summary[c].healthy;
    h.allocated[c] = node.summary[c].allocated;
    h.held[c] = node.summary[c].released != 0 || node.summary[c].returning != 0 ? 1 : 0;
    for (const auto& [numa, count] : node.summary[c].free_single_by_numa) {
      h.max_single_on_numa[c] = std::max(h.max_single_on_numa[c], count);
    }
  }
  h.last_report_ns = absl::ToUnixNanos(node.last_report);
  return h;
}

void ClusterState::SyncHot(const NodeState& node) {
  if (hot_enabled_) hot_.Put(node.name, HotOf(node));
}

void ClusterState::EraseNode(absl::flat_hash_map<std::string, NodeState>::iterator it) {
  if (hot_enabled_) hot_.Erase(it->first);
  nodes_.erase(it);
}

absl::Status ClusterState::Apply(const Record& record) { return ApplyRecord(record); }

absl::Status ClusterState::Apply(Record&& record) { return ApplyRecord(std::move(record)); }

absl::Status ClusterState::Apply(Record&& record, std::vector<std::string>* touched_nodes) {
  touched_nodes->clear();
  touched_ = touched_nodes;
  absl::Status s = ApplyRecord(std::move(record));
  touched_ = nullptr;
  std::sort(touched_nodes->begin(), touched_nodes->end());
  touched_nodes->erase(std::unique(touched_nodes->begin(), touched_nodes->end()),
                       touched_nodes->end());
  return s;
}

template <typename RecordRef>
absl::Status ClusterState::ApplyRecord(RecordRef&& record) {
  // An rvalue record gives its claims away; a const one is copied from.
  constexpr bool kOwned = !std::is_const_v<std::remove_reference_t<RecordRef>>;
  if (record.revision <= revision_) {
    return absl::DataLossError(absl::StrCat("record revision ", record.revision,
                                            " does not follow revision ", revision_));
  }
  // Claims one record puts again are unlinked from their devices first: a
  // record that moves several claims' drives (a bus renumbering, device
  // identity) may hand one claim an address another claim of the same
  // record still holds until its own put.
  if (record.mutations.size() > 1) {
    for (const auto& m : record.mutations) {
      const auto* p = std::get_if<PutClaim>(&m);
      if (p == nullptr) continue;
      if (const ClaimEntry* existing = FindClaim(p->claim.key)) {
        UnlinkClaim(existing, record.revision, Unlink::kRelinkSameNode);
      }
    }
  }
  for (auto& m : record.mutations) {
    if (auto* p = std::get_if<PutClaim>(&m)) {
      if constexpr (kOwned) {
        RETURN_IF_ERROR(ApplyPutClaim(std::move(p->claim), record.revision));
      } else {
        RETURN_IF_ERROR(ApplyPutClaim(p->claim, record.revision));
      }
    } else if (const auto* p = std::get_if<DeleteClaim>(&m)) {
      ApplyDeleteClaim(p->key, record.revision);
    } else if (const auto* p = std::get_if<PutNode>(&m)) {
      RETURN_IF_ERROR(ApplyPutNode(p->node, record.revision));
    } else if (const auto* p = std::get_if<DeleteNode>(&m)) {
      ApplyDeleteNode(p->node, record.revision);
    }
  }
  revision_ = record.revision;
  return absl::OkStatus();
}

NodeState& ClusterState::GetOrCreateNode(const std::string& name) {
  auto [it, inserted] = nodes_.try_emplace(name);
  if (inserted) {
    it->second.name = name;
    it->second.summary.assign(classes_.size(), ClassSummary{});
    SyncHot(it->second);
  }
  return it->second;
}

absl::Status ClusterState::LinkClaim(const ClaimEntry* claim, uint64_t revision) {
  const std::string& node_name = claim->status.node();
  if (node_name.empty()) return absl::OkStatus();
  NodeState& node = GetOrCreateNode(node_name);
  Touch(node, revision);
  if (!node.HasClaim(claim)) node.claims.push_back(claim);
  if (claim->status.HandoffPending() &&
      std::find(node.handoff_pending.begin(), node.handoff_pending.end(), claim) ==
          node.handoff_pending.end()) {
    node.handoff_pending.push_back(claim);
  }
  for (const BoundDevice& b : claim->status.devices) {
    auto* slot = const_cast<DeviceSlot*>(node.Find(b.address));
    if (slot == nullptr) continue;  // Lost, or inventory not yet known.
    if (slot->owner != nullptr && slot->owner != claim) {
      return absl::DataLossError(absl::StrCat(
          "device ", b.address.ToString(), " on node ", node_name, " is held by claim ",
          slot->owner->key.ToString(), " and claim ", claim->key.ToString()));
    }
    slot->owner = claim;
  }
  RecomputeSummary(node);
  return absl::OkStatus();
}

void ClusterState::UnlinkClaim(const ClaimEntry* claim, uint64_t revision, Unlink mode) {
  if (claim->status.node().empty()) return;
  auto it = nodes_.find(claim->status.node());
  if (it == nodes_.end()) return;
  NodeState& node = it->second;
  Touch(node, revision);
  if (auto pos = std::find(node.claims.begin(), node.claims.end(), claim);
      pos != node.claims.end()) {
    *pos = node.claims.back();
    node.claims.pop_back();
  }
  node.handoff_pending.erase(
      std::remove(node.handoff_pending.begin(), node.handoff_pending.end(), claim),
      node.handoff_pending.end());
  for (DeviceSlot& slot : node.devices) {
    if (slot.owner == claim) slot.owner = nullptr;
  }
  if (mode == Unlink::kRelinkSameNode) return;
  RecomputeSummary(node);
  if (!node.has_record && node.claims.empty()) EraseNode(it);
}

absl::Status ClusterState::ApplyPutClaim(Claim claim, uint64_t revision) {
  auto it = claims_.find(claim.key);
  if (it == claims_.end()) {
    it = claims_.insert(ClaimEntry(std::move(claim), names_)).first;
  } else {
    // The key, which the set hashes, is unchanged; the element stays put so
    // device slots may keep pointing at it.
    auto& existing = const_cast<ClaimEntry&>(*it);
    KeepCutImage(existing);
    UnlinkClaim(&existing, revision,
                existing.status.node() == claim.status.node ? Unlink::kRelinkSameNode
                                                            : Unlink::kFinal);
    CountClaim(existing, -1);
    // The new entry pools its names before the old one gives them back, so
    // a name both hold stays pooled.
    ClaimEntry replacement(std::move(claim), names_);
    existing.ReleaseNames(names_);
    existing = std::move(replacement);
  }
  CountClaim(*it, +1);
  return LinkClaim(&*it, revision);
}

void ClusterState::ApplyDeleteClaim(const ClaimKey& key, uint64_t revision) {
  auto it = claims_.find(key);
  if (it == claims_.end()) return;
  KeepCutImage(*it);
  UnlinkClaim(&*it, revision, Unlink::kFinal);
  CountClaim(*it, -1);
  const_cast<ClaimEntry&>(*it).ReleaseNames(names_);
  claims_.erase(it);
}

absl::Status ClusterState::ApplyPutNode(const NodeRecord& record, uint64_t revision) {
  KeepCutImage(record.inventory.node);
  NodeState& node = GetOrCreateNode(record.inventory.node);
  node.has_record = true;
  Touch(node, revision);
  node.devices.clear();
  node.devices.reserve(record.inventory.devices.size());
  for (const Device& d : record.inventory.devices) {
    node.devices.push_back(DeviceSlot{d, Classify(d), nullptr});
  }
  std::sort(node.devices.begin(), node.devices.end(),
            [](const DeviceSlot& a, const DeviceSlot& b) {
              return a.device.address < b.device.address;
            });
  node.return_to_host = record.return_to_host;
  node.released = record.released;
  for (const ReleasedDevice& r : node.released) {
    if (auto* slot = const_cast<DeviceSlot*>(node.Find(r.address))) {
      slot->hold = DeviceHold::kReleased;
    }
  }
  // A device on its way back to the host is not offered even to a pin.
  for (PciAddress a : node.return_to_host) {
    if (auto* slot = const_cast<DeviceSlot*>(node.Find(a))) slot->hold = DeviceHold::kReturning;
  }
  // Re-link the claims that live on this node to the new slots.
  std::vector<const ClaimEntry*> claims(node.claims.begin(), node.claims.end());
  for (const ClaimEntry* c : claims) RETURN_IF_ERROR(LinkClaim(c, revision));
  RecomputeSummary(node);
  return absl::OkStatus();
}

void ClusterState::ApplyDeleteNode(const std::string& name, uint64_t revision) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return;
  KeepCutImage(name);
  NodeState& node = it->second;
  node.has_record = false;
  Touch(node, revision);
  node.devices.clear();
  node.return_to_host.clear();
  node.released.clear();
  RecomputeSummary(node);
  // The NodeState stays while claims still name the node, so they can be
  // found again if it comes back.
  if (node.claims.empty()) EraseNode(it);
}

void ClusterState::RecomputeSummary(NodeState& node) {
  if (defer_summaries_) {
    stale_summaries_.insert(node.name);
    return;
  }
  ComputeSummary(node);
  SyncHot(node);
}

void ClusterState::EndDeferredSummaries() {
  defer_summaries_ = false;
  for (const std::string& name : stale_summaries_) {
    if (NodeState* node = MutableNode(name)) {
      ComputeSummary(*node);
      SyncHot(*node);
    }
  }
  stale_summaries_.clear();
}

void ClusterState::ComputeSummary(NodeState& node) const {
  node.summary.assign(classes_.size(), ClassSummary{});
  for (const DeviceSlot& s : node.devices) {
    if (s.class_index == kNoClass) continue;
    ClassSummary& c = node.summary[s.class_index];
    if (s.device.health == DeviceHealth::kHealthy && s.device.iommu_group >= 0) {
      ++c.healthy;
    }
    if (s.owner != nullptr || s.hold != DeviceHold::kNone) ++c.allocated;
    if (s.owner == nullptr && s.hold == DeviceHold::kReleased) ++c.released;
    if (s.owner == nullptr && s.hold == DeviceHold::kReturning) ++c.returning;
  }
  for (const FreeGroup& g : UsableFreeGroups(node)) {
    ClassSummary& c = node.summary[g.class_index];
    c.free_usable = static_cast<uint16_t>(c.free_usable + g.slots.size());
    if (g.slots.size() != 1) continue;
    ++c.free_single;
    auto it = std::lower_bound(c.free_single_by_numa.begin(), c.free_single_by_numa.end(),
                               g.numa, [](const auto& e, int16_t n) { return e.first < n; });
    if (it == c.free_single_by_numa.end() || it->first != g.numa) {
      it = c.free_single_by_numa.insert(it, {g.numa, 0});
    }
    ++it->second;
  }
}

std::string ClusterState::CheckInvariants() const {
  absl::flat_hash_map<std::pair<std::string, uint32_t>, const ClaimEntry*> seen;
  std::array<size_t, 3> by_phase{};
  for (const ClaimEntry& claim : claims_) {
    const ClaimKey& key = claim.key;
    ++by_phase[static_cast<size_t>(claim.phase)];
    if (claim.phase == ClaimPhase::kPending) {
      if (!claim.status.devices.empty()) {
        return absl::StrCat("pending claim ", key.ToString(), " has devices");
      }
      continue;
    }
    if (claim.status.devices.size() != static_cast<size_t>(claim.count)) {
      return absl::StrCat("claim ", key.ToString(), " has ", claim.status.devices.size(),
                          " devices, wants ", claim.count);
    }
    for (const BoundDevice& b : claim.status.devices) {
      auto [it, inserted] =
          seen.try_emplace(std::make_pair(claim.status.node(), b.address.packed()), &claim);
      if (!inserted) {
        return absl::StrCat("device ", b.address.ToString(), " on ", claim.status.node(),
                            " is in claims ", it->second->key.ToString(), " and ",
                            key.ToString());
      }
      if (claim.phase != ClaimPhase::kBound) continue;
      const NodeState* node = FindNode(claim.status.node());
      const DeviceSlot* slot = node ? node->Find(b.address) : nullptr;
      if (slot == nullptr) {
        return absl::StrCat("bound claim ", key.ToString(), " names device ",
                            b.address.ToString(), " missing from node ", claim.status.node());
      }
      if (slot->owner != &claim) {
        return absl::StrCat("device ", b.address.ToString(), " does not link back to ",
                            key.ToString());
      }
    }
  }
  if (by_phase != claims_by_phase_) {
    return "the per-phase claim counts are stale";
  }
  if (hot_enabled_ && hot_.size() != nodes_.size()) {
    return absl::StrCat("the filter fast-path table has ", hot_.size(), " nodes, not ",
                        nodes_.size());
  }
  for (const auto& [name, node] : nodes_) {
    NodeState fresh;
    fresh.devices = node.devices;
    ComputeSummary(fresh);
    if (fresh.summary != node.summary) {
      return absl::StrCat("node ", name, " has a stale free-device summary");
    }
    size_t pending = 0;
    for (const ClaimEntry* c : node.claims) pending += c->status.HandoffPending() ? 1 : 0;
    bool pending_linked = true;
    for (const ClaimEntry* c : node.handoff_pending) {
      pending_linked = pending_linked && node.HasClaim(c);
    }
    if (pending != node.handoff_pending.size() || !pending_linked) {
      return absl::StrCat("node ", name, " has a stale pending hand-off index");
    }
    if (hot_enabled_) {
      const NodeHot* h = hot_.Find(name);
      if (h == nullptr || !(*h == HotOf(node))) {
        return absl::StrCat("node ", name, " has a stale filter fast-path entry");
      }
    }
    for (const DeviceSlot& s : node.devices) {
      const DeviceHold want =
          std::binary_search(node.return_to_host.begin(), node.return_to_host.end(),
                             s.device.address)
              ? DeviceHold::kReturning
          : node.FindReleased(s.device.address) != nullptr ? DeviceHold::kReleased
                                                           : DeviceHold::kNone;
      if (s.hold != want) {
        return absl::StrCat("device ", s.device.address.ToString(), " on ", name,
                            " has a stale return/Released mark");
      }
      if (s.owner != nullptr && s.hold != DeviceHold::kNone) {
        return absl::StrCat("device ", s.device.address.ToString(), " on ", name,
                            " is held by a claim and also Released or returning to the host");
      }
      if (s.owner == nullptr) continue;
      auto it = seen.find(std::make_pair(name, s.device.address.packed()));
      if (it == seen.end() || it->second != s.owner) {
        return absl::StrCat("device ", s.device.address.ToString(), " on ", name,
                            " is linked to a claim that does not list it");
      }
    }
  }
  return "";
}

std::vector<const NodeState*> ClusterState::SortedNodes() const {
  std::vector<const NodeState*> nodes;
  for (const auto& [name, node] : nodes_) {
    if (node.has_record) nodes.push_back(&node);
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeState* a, const NodeState* b) { return a->name < b->name; });
  return nodes;
}

std::vector<const ClaimEntry*> ClusterState::SortedClaims() const {
  std::vector<const ClaimEntry*> claims;
  claims.reserve(claims_.size());
  for (const ClaimEntry& claim : claims_) claims.push_back(&claim);
  std::sort(claims.begin(), claims.end(),
            [](const ClaimEntry* a, const ClaimEntry* b) { return a->key < b->key; });
  return claims;
}

void ClusterState::KeepCutImage(const std::string& name) {
  if (!cut_open_ || cut_images_.nodes.contains(name)) return;
  const NodeState* node = FindNode(name);
  std::optional<NodeRecord> image;
  if (node != nullptr && node->has_record) image = node->ToRecord();
  cut_images_.nodes.emplace(name, std::move(image));
}

ClusterState::Cut ClusterState::BeginCut() {
  cut_open_ = true;
  Cut cut;
  cut.revision = revision_;
  cut.claims.reserve(claims_.size());
  for (const ClaimEntry& claim : claims_) cut.claims.push_back(&claim);
  for (const auto& [name, node] : nodes_) {
    if (node.has_record) cut.nodes.push_back(name);
  }
  return cut;
}

ClusterState::CutImages ClusterState::EndCut() {
  cut_open_ = false;
  return std::exchange(cut_images_, CutImages{});
}

Claim ClusterState::ClaimAtCut(const ClaimEntry* claim) const {
  auto it = cut_images_.claims.find(claim);
  return it == cut_images_.claims.end() ? claim->ToClaim() : it->second;
}

NodeRecord ClusterState::NodeAtCut(const std::string& name) const {
  if (auto it = cut_images_.nodes.find(name); it != cut_images_.nodes.end()) {
    // Cut::nodes had a record at the cut, so its image has one.
    return it->second.value_or(NodeRecord{});
  }
  // Unchanged since the cut, so still there with its record.
  return FindNode(name)->ToRecord();
}

Record ClusterState::Snapshot() const {
  Record r;
  r.revision = revision_;
  const std::vector<const NodeState*> nodes = SortedNodes();
  const std::vector<const ClaimEntry*> claims = SortedClaims();
  r.mutations.reserve(nodes.size() + claims.size());
  // Nodes first, so that replaying claims links them to existing slots.
  for (const NodeState* n : nodes) r.mutations.push_back(PutNode{n->ToRecord()});
  for (const ClaimEntry* c : claims) r.mutations.push_back(PutClaim{c->ToClaim()});
  return r;
}

}  // namespace pdc
