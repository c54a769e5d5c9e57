#include "allocator/placement.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pdc {
namespace {

bool IsPinned(const ClaimSpec& spec) {
  return spec.address.has_value() || !spec.serial.empty();
}

// Lexicographically first subset of `candidates` (by position) whose sizes
// sum to exactly `target`; positions into `candidates`, or nullopt.
std::optional<std::vector<size_t>> ExactSubset(const std::vector<size_t>& sizes,
                                               size_t target) {
  const size_t k = sizes.size();
  // can[i][t]: sizes[i..k) can make t.
  std::vector<std::vector<char>> can(k + 1, std::vector<char>(target + 1, 0));
  can[k][0] = 1;
  for (size_t i = k; i-- > 0;) {
    for (size_t t = 0; t <= target; ++t) {
      can[i][t] = can[i + 1][t] || (sizes[i] <= t && can[i + 1][t - sizes[i]]);
    }
  }
  if (!can[0][target]) return std::nullopt;
  std::vector<size_t> picked;
  size_t t = target;
  for (size_t i = 0; i < k && t > 0; ++i) {
    if (sizes[i] <= t && can[i + 1][t - sizes[i]]) {
      picked.push_back(i);
      t -= sizes[i];
    }
  }
  return picked;
}

struct Selection {
  std::vector<size_t> groups;  // Indices into the node's free groups.
  int16_t failed_class = kNoClass;
};

// Picks groups for every class need from groups not yet used, optionally only
// on one NUMA node. Classes are served in index order.
Selection SelectGroups(const std::vector<FreeGroup>& groups, const std::vector<char>& used,
                       const std::vector<size_t>& need, std::optional<int16_t> numa) {
  Selection sel;
  for (size_t c = 0; c < need.size(); ++c) {
    if (need[c] == 0) continue;
    std::vector<size_t> positions;
    std::vector<size_t> sizes;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (used[g] || groups[g].class_index != static_cast<int16_t>(c)) continue;
      if (numa && groups[g].numa != *numa) continue;
      positions.push_back(g);
      sizes.push_back(groups[g].slots.size());
    }
    auto picked = ExactSubset(sizes, need[c]);
    if (!picked) {
      sel.failed_class = static_cast<int16_t>(c);
      return sel;
    }
    for (size_t p : *picked) sel.groups.push_back(positions[p]);
  }
  return sel;
}

absl::Status NotEnough(const NodeState& node, const std::vector<DeviceClass>& classes,
                       const std::vector<FreeGroup>& groups, const std::vector<char>& used,
                       int16_t cls, size_t want) {
  size_t free = 0;
  std::vector<size_t> sizes;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (used[g] || groups[g].class_index != cls) continue;
    free += groups[g].slots.size();
    sizes.push_back(groups[g].slots.size());
  }
  const std::string& resource = classes[cls].resource_name;
  if (free < want) {
    return absl::FailedPreconditionError(absl::StrCat("insufficient free ", resource,
                                                      ": want ", want, ", free ", free,
                                                      HeldDevicesNote(node.summary[cls])));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "free ", resource, " cannot be split along IOMMU groups: want ", want,
      ", free groups of sizes [", absl::StrJoin(sizes, ","), "]"));
}

}  // namespace

std::string HeldDevicesNote(const ClassSummary& summary) {
  std::string note;
  if (summary.released == 1) {
    absl::StrAppend(&note, "; 1 device released by a deleted claim (Retain): only a claim of "
                           "that claim's namespace may pin it back; an administrator may "
                           "release it or hand it over with pdcctl");
  } else if (summary.released > 1) {
    absl::StrAppend(&note, "; ", summary.released,
                    " devices released by deleted claims (Retain): only a claim of the "
                    "deleted claim's namespace may pin one back; an administrator may release "
                    "them or hand them over with pdcctl");
  }
  if (summary.returning == 1) {
    absl::StrAppend(&note, "; 1 device waiting to be erased and handed back to its host "
                           "driver (its claim was deleted with reclaimPolicy Delete)");
  } else if (summary.returning > 1) {
    absl::StrAppend(&note, "; ", summary.returning,
                    " devices waiting to be erased and handed back to their host driver "
                    "(their claims were deleted with reclaimPolicy Delete)");
  }
  return note;
}

std::vector<FreeGroup> UsableFreeGroups(const NodeState& node, bool with_released) {
  // (group id, slot index) for every managed device that is in a group.
  absl::InlinedVector<std::pair<int32_t, uint16_t>, 16> members;
  for (size_t i = 0; i < node.devices.size(); ++i) {
    const DeviceSlot& s = node.devices[i];
    if (s.class_index == kNoClass || s.device.iommu_group < 0) continue;
    members.emplace_back(s.device.iommu_group, static_cast<uint16_t>(i));
  }
  std::sort(members.begin(), members.end());
  std::vector<FreeGroup> groups;
  groups.reserve(members.size());
  for (size_t i = 0; i < members.size();) {
    size_t j = i;
    FreeGroup g;
    g.id = members[i].first;
    bool usable = true;
    for (; j < members.size() && members[j].first == g.id; ++j) {
      const DeviceSlot& s = node.devices[members[j].second];
      if (g.slots.empty()) {
        g.class_index = s.class_index;
        g.numa = s.device.numa_node;
      }
      usable = usable && s.owner == nullptr && s.device.health == DeviceHealth::kHealthy &&
               s.class_index == g.class_index &&
               (s.hold == DeviceHold::kNone ||
                (with_released && s.hold == DeviceHold::kReleased));
      if (s.hold == DeviceHold::kReleased) g.released = true;
      if (s.device.numa_node != g.numa) g.numa = -1;
      g.slots.push_back(members[j].second);
    }
    if (usable) groups.push_back(std::move(g));
    i = j;
  }
  std::sort(groups.begin(), groups.end(),
            [](const FreeGroup& a, const FreeGroup& b) { return a.slots[0] < b.slots[0]; });
  return groups;
}

bool FastFitApplies(const NodeState& node, const std::vector<PendingClaim>& pending) {
  for (const PendingClaim& p : pending) {
    if (IsPinned(*p.spec)) return false;
    const ClassSummary& c = node.summary[p.class_index];
    if (c.free_usable != c.free_single) return false;
  }
  return true;
}

absl::StatusOr<Placement> PlaceOnNode(const NodeState& node,
                                      const std::vector<DeviceClass>& classes,
                                      const std::vector<PendingClaim>& pending,
                                      std::optional<int16_t> bound_numa) {
  const bool any_pin = std::any_of(pending.begin(), pending.end(),
                                   [](const PendingClaim& p) { return IsPinned(*p.spec); });
  const std::vector<FreeGroup> groups = UsableFreeGroups(node, /*with_released=*/any_pin);
  std::vector<char> used(groups.size(), 0);
  Placement out;
  out.devices.resize(pending.size());
  std::vector<std::vector<PciAddress>> surplus(classes.size());
  std::vector<size_t> need(classes.size(), 0);
  std::vector<int16_t> numas;  // NUMA nodes of everything the pod gets here.
  if (bound_numa) numas.push_back(*bound_numa);

  // Pinned claims take their device's whole group first.
  for (size_t i = 0; i < pending.size(); ++i) {
    const ClaimSpec& spec = *pending[i].spec;
    if (!IsPinned(spec)) {
      need[pending[i].class_index] += static_cast<size_t>(spec.count);
      continue;
    }
    const std::string what = spec.address ? spec.address->ToString() : "serial " + spec.serial;
    std::optional<size_t> slot;
    for (size_t s = 0; s < node.devices.size(); ++s) {
      const Device& d = node.devices[s].device;
      if (spec.address && d.address != *spec.address) continue;
      if (!spec.serial.empty() && d.serial != spec.serial) continue;
      slot = s;
      break;
    }
    if (!slot) {
      return absl::FailedPreconditionError(absl::StrCat(
          "claim ", pending[i].key->ToString(), " is pinned to device ", what,
          ", which node ", node.name, " does not have"));
    }
    const DeviceSlot& pinned = node.devices[*slot];
    if (pinned.hold == DeviceHold::kReturning) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pinned device ", what, " on node ", node.name,
          " is waiting to be erased and handed back to its host driver (its claim was deleted "
          "with reclaimPolicy Delete); it is offered again once the node reports it back on "
          "its host driver, healthy"));
    }
    if (pinned.hold == DeviceHold::kReleased) {
      // A PersistentVolume's claimRef: only the namespace the data is of
      // may pin it back. The message names no other tenant.
      const ReleasedDevice* mark = node.FindReleased(pinned.device.address);
      if (mark != nullptr && mark->claim.ns != pending[i].key->ns) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pinned device ", what, " on node ", node.name,
            mark->claim.ns.empty()
                ? " is Released after an erase that was abandoned (its data may still be on "
                  "it); only an administrator may release it or hand it over (pdcctl)"
                : " is Released with the data of a deleted claim of another namespace; only "
                  "a claim of that namespace may pin it back, or an administrator may release "
                  "it or hand it over (pdcctl)"));
      }
    }
    std::optional<size_t> group;
    for (size_t g = 0; g < groups.size() && !group; ++g) {
      if (used[g]) continue;
      for (uint16_t s : groups[g].slots) {
        if (s == *slot) group = g;
      }
    }
    if (!group) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pinned device ", what, " on node ", node.name,
          " is not free (in use, unhealthy, or its IOMMU group is not wholly free)"));
    }
    if (groups[*group].released) {
      // The pin takes its own Released device, never a Released neighbour.
      for (uint16_t s : groups[*group].slots) {
        if (s != *slot && node.devices[s].hold == DeviceHold::kReleased) {
          // The neighbour's address is named only to its own namespace.
          const ReleasedDevice* mark = node.FindReleased(node.devices[s].device.address);
          const bool own = mark != nullptr && mark->claim.ns == pending[i].key->ns;
          return absl::FailedPreconditionError(absl::StrCat(
              "pinned device ", what, " on node ", node.name, " shares its IOMMU group with ",
              own ? node.devices[s].device.address.ToString() + ", which is Released (a deleted "
                                                                 "claim's data is on it); pin it too"
                  : "a Released device of another namespace; an administrator may release it "
                    "or hand it over with pdcctl"));
        }
      }
    }
    if (groups[*group].class_index != pending[i].class_index) {
      return absl::FailedPreconditionError(absl::StrCat("pinned device ", what, " is not a ",
                                                        spec.resource_name, " device"));
    }
    used[*group] = 1;
    numas.push_back(groups[*group].numa);
    for (uint16_t s : groups[*group].slots) {
      PciAddress a = node.devices[s].device.address;
      if (s == *slot) {
        out.devices[i].push_back(a);
      } else {
        surplus[groups[*group].class_index].push_back(a);
      }
    }
  }
  // Released groups no pin took are offered to nobody else.
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].released) used[g] = 1;
  }
  for (size_t c = 0; c < classes.size(); ++c) {
    if (surplus[c].size() > need[c]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a pinned device shares its IOMMU group with ", surplus[c].size(), " more ",
          classes[c].resource_name, " than the pod claims (", need[c],
          "); a group is assigned whole"));
    }
    need[c] -= surplus[c].size();
  }

  // Same NUMA node first: the one the pod already uses here, then the lowest.
  std::vector<int16_t> candidates;
  if (bound_numa && *bound_numa >= 0) candidates.push_back(*bound_numa);
  for (size_t i = 0; i < groups.size(); ++i) {
    const FreeGroup& g = groups[i];
    if (!used[i] && g.numa >= 0 &&
        std::find(candidates.begin(), candidates.end(), g.numa) == candidates.end()) {
      candidates.push_back(g.numa);
    }
  }
  std::sort(candidates.begin() + (bound_numa && *bound_numa >= 0 ? 1 : 0), candidates.end());
  std::optional<Selection> chosen;
  for (int16_t n : candidates) {
    Selection s = SelectGroups(groups, used, need, n);
    if (s.failed_class == kNoClass) {
      chosen = std::move(s);
      break;
    }
  }
  if (!chosen) {
    Selection s = SelectGroups(groups, used, need, std::nullopt);
    if (s.failed_class != kNoClass) {
      return NotEnough(node, classes, groups, used, s.failed_class, need[s.failed_class]);
    }
    chosen = std::move(s);
  }

  std::vector<std::vector<PciAddress>> pool = std::move(surplus);
  for (size_t g : chosen->groups) {
    numas.push_back(groups[g].numa);
    for (uint16_t s : groups[g].slots) {
      pool[groups[g].class_index].push_back(node.devices[s].device.address);
    }
  }
  for (auto& p : pool) std::sort(p.begin(), p.end());
  std::vector<size_t> next(classes.size(), 0);
  for (size_t i = 0; i < pending.size(); ++i) {
    const ClaimSpec& spec = *pending[i].spec;
    if (IsPinned(spec)) continue;
    const auto& p = pool[pending[i].class_index];
    size_t& n = next[pending[i].class_index];
    out.devices[i].assign(p.begin() + n, p.begin() + n + spec.count);
    n += spec.count;
  }
  out.numa_aligned =
      std::all_of(numas.begin(), numas.end(), [&](int16_t n) { return n == numas.front(); });
  return out;
}

}  // namespace pdc
