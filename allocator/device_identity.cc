#include "allocator/device_identity.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace pdc {

const Device* FindDevice(const NodeInventory& inv, PciAddress address) {
  auto it = std::lower_bound(
      inv.devices.begin(), inv.devices.end(), address,
      [](const Device& d, PciAddress a) { return d.address < a; });
  if (it == inv.devices.end() || it->address != address) return nullptr;
  return &*it;
}

namespace {

// Where one device of a claim, or a Released mark, is after the update.
struct Located {
  PciAddress old_address;
  PciAddress address;         // Where it is now (== old_address when kept).
  std::string missing;        // Non-empty: not found, and why.
  size_t owner = 0;           // Index of the claim, or of the mark.
  bool is_mark = false;
  std::string_view serial;  // Points into the claim or mark.

  bool moved() const { return missing.empty() && address != old_address; }
};

Located Locate(const NodeInventory& inv, const SerialIndex& index, PciAddress address,
               std::string_view serial) {
  Located l;
  l.old_address = address;
  l.address = address;
  l.serial = serial;
  if (!serial.empty()) {
    absl::Span<const PciAddress> at = index.Find(serial);
    if (at.size() > 1) {
      l.missing = AmbiguousSerialReason(inv.node, serial, at);
      return l;
    }
    if (at.size() == 1) {
      l.address = at[0];
      return l;
    }
  }
  const Device* d = FindDevice(inv, address);
  if (d == nullptr) {
    l.missing = absl::StrCat("device ", address.ToString(), " is no longer reported by node ",
                             inv.node);
    if (!serial.empty()) absl::StrAppend(&l.missing, ", nor is its serial ", Sv(serial));
  } else if (!serial.empty() && !d->serial.empty()) {
    // Not found by serial, so the serial at the address is another one.
    l.missing = absl::StrCat("device ", address.ToString(), " on node ", inv.node,
                             " now has serial ", d->serial, ", the claim was bound to serial ",
                             Sv(serial));
  }
  // Else the device at the address has no serial (or the claim knew none):
  // the address is its identity.
  return l;
}

}  // namespace

SerialIndex::SerialIndex(const NodeInventory& inventory) {
  by_serial_.reserve(inventory.devices.size());
  for (const Device& d : inventory.devices) {
    if (!d.serial.empty()) by_serial_[d.serial].push_back(d.address);
  }
  for (auto& [serial, addresses] : by_serial_) std::sort(addresses.begin(), addresses.end());
}

absl::Span<const PciAddress> SerialIndex::Find(std::string_view serial) const {
  if (serial.empty()) return {};
  auto it = by_serial_.find(serial);
  if (it == by_serial_.end()) return {};
  return it->second;
}

std::vector<std::string_view> SerialIndex::Duplicates() const {
  std::vector<std::string_view> out;
  for (const auto& [serial, addresses] : by_serial_) {
    if (addresses.size() > 1) out.push_back(serial);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RefuseDuplicateSerials(const SerialIndex& index, NodeInventory& inventory) {
  for (Device& d : inventory.devices) {
    if (index.Find(d.serial).size() > 1) MarkUnhealthy(d, UnhealthyReason::kAmbiguousIdentity);
  }
}

std::string AmbiguousSerialReason(std::string_view node, std::string_view serial,
                                  absl::Span<const PciAddress> addresses) {
  return absl::StrCat(
      "serial ", Sv(serial), " is reported by ", addresses.size(), " devices on node ", Sv(node),
      " (",
      absl::StrJoin(addresses, ", ",
                    [](std::string* out, PciAddress a) { out->append(a.ToString()); }),
      "): pdc cannot tell which one holds the claim's data, so it offers none of them");
}

IdentityUpdate FollowDevices(const NodeInventory& inventory, const SerialIndex& index,
                             const std::vector<const ClaimEntry*>& claims,
                             const std::vector<ReleasedDevice>& released,
                             const std::vector<PciAddress>& return_to_host) {
  std::vector<Located> all;
  // Why each claim is Lost, by claim index; "" while it is not.
  std::vector<std::string> lost(claims.size());
  for (size_t i = 0; i < claims.size(); ++i) {
    if (claims[i]->phase == ClaimPhase::kPending) continue;
    for (const BoundDevice& b : claims[i]->status.devices) {
      Located l = Locate(inventory, index, b.address, b.serial);
      l.owner = i;
      if (lost[i].empty()) lost[i] = l.missing;
      all.push_back(std::move(l));
    }
  }
  // Released marks follow their serial. One whose serial is nowhere while
  // another serial is at its address is dropped: that is another drive,
  // without the deleted claim's data (a swapped drive).
  std::vector<char> dropped(released.size(), 0);
  for (size_t i = 0; i < released.size(); ++i) {
    const ReleasedDevice& r = released[i];
    Located l = Locate(inventory, index, r.address, r.serial);
    l.owner = i;
    l.is_mark = true;
    const Device* d = FindDevice(inventory, r.address);
    dropped[i] = !l.missing.empty() && d != nullptr && !r.serial.empty() &&
                 !d->serial.empty() && d->serial != r.serial && index.Find(r.serial).empty();
    all.push_back(std::move(l));
  }
  // A claim that turns (or stays) Lost still follows the drives it found:
  // its status then names them where they are, so they stay held by it.
  // A move onto an address that something else still names (a Lost claim,
  // a device waiting to return to its host, a mark that stays) is not made:
  // the mover keeps its old address — a claim turns Lost — which may in turn
  // block another move, so repeat until nothing changes. Safe by
  // construction: a drive nobody can be sure of is given to nobody.
  for (bool changed = true; changed;) {
    changed = false;
    // (address, index into `all`), grouped by address.
    std::vector<std::pair<PciAddress, size_t>> at;
    at.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].is_mark && dropped[all[i].owner]) continue;
      at.emplace_back(all[i].address, i);
    }
    std::sort(at.begin(), at.end());
    for (size_t first = 0, last = 0; first < at.size(); first = last) {
      const PciAddress address = at[first].first;
      std::vector<size_t> who;
      for (last = first; last < at.size() && at[last].first == address; ++last) {
        who.push_back(at[last].second);
      }
      const bool returning =
          std::binary_search(return_to_host.begin(), return_to_host.end(), address);
      if (who.size() < 2 && !returning) continue;
      for (size_t i : who) {
        Located& l = all[i];
        if (!l.moved()) continue;
        std::string other = "a device waiting to return to its host driver";
        for (size_t j : who) {
          if (j == i) continue;
          other = all[j].is_mark
                      ? absl::StrCat("the Released mark of deleted claim ",
                                     released[all[j].owner].claim.ToString())
                      : absl::StrCat("claim ", claims[all[j].owner]->key.ToString());
          break;
        }
        l.address = l.old_address;
        changed = true;
        if (l.is_mark) continue;  // The mark stays where it was.
        lost[l.owner] = absl::StrCat(
            "its drive (serial ", Sv(l.serial), ") moved from ", l.old_address.ToString(), " to ",
            address.ToString(), " on node ", inventory.node, ", which ", other,
            " still names; pdc gives that device to nobody until one of them is deleted or "
            "released");
      }
    }
  }

  IdentityUpdate out;
  size_t k = 0;
  for (size_t i = 0; i < claims.size(); ++i) {
    const ClaimEntry& c = *claims[i];
    if (c.phase == ClaimPhase::kPending) continue;
    const ClaimPhase phase = lost[i].empty() ? ClaimPhase::kBound : ClaimPhase::kLost;
    bool same = phase == c.phase && lost[i] == c.lost_reason();
    for (size_t j = 0; same && j < c.status.devices.size(); ++j) {
      same = all[k + j].address == c.status.devices[j].address;
    }
    if (same) {  // The usual heartbeat: nothing to copy.
      k += c.status.devices.size();
      continue;
    }
    Claim updated = c.ToClaim();
    std::vector<DeviceMove> moves;
    for (BoundDevice& b : updated.status.devices) {
      const Located& l = all[k++];
      if (l.address == b.address) continue;
      moves.push_back(DeviceMove{inventory.node, b.serial, b.address, l.address, c.key, false});
      b.address = l.address;
    }
    std::sort(updated.status.devices.begin(), updated.status.devices.end(),
              [](const BoundDevice& a, const BoundDevice& b) { return a.address < b.address; });
    updated.status.phase = phase;
    updated.status.lost_reason = std::move(lost[i]);
    out.moves.insert(out.moves.end(), moves.begin(), moves.end());
    out.claims.push_back(std::move(updated));
  }
  for (size_t i = 0; i < released.size(); ++i, ++k) {
    if (dropped[i]) continue;
    const Located& l = all[k];
    ReleasedDevice r = released[i];
    if (l.address != r.address) {
      out.moves.push_back(DeviceMove{inventory.node, r.serial, r.address, l.address, r.claim,
                                     true});
      r.address = l.address;
    }
    out.released.push_back(std::move(r));
  }
  std::sort(out.released.begin(), out.released.end(),
            [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
  return out;
}

}  // namespace pdc
