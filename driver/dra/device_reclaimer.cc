#include "driver/dra/device_reclaimer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "driver/device_kind.h"
#include "driver/dra/slice_builder.h"
#include "driver/pci_function.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::dra {

namespace {

std::string HolderRef(const PreparedClaim& c) {
  return absl::StrCat("claim ", c.ns, "/", c.name, " (uid ", c.uid, ")");
}

bool Names(const PreparedClaim& c, const std::string& device) {
  return std::any_of(c.devices.begin(), c.devices.end(),
                     [&](const PreparedDevice& d) { return d.device == device; });
}

}  // namespace

bool AllocatesDevice(const ResourceClaimView& claim, const std::string& driver,
                     const std::string& pool, const std::string& device) {
  if (!claim.allocated) return false;
  return std::any_of(claim.devices.begin(), claim.devices.end(), [&](const AllocatedDevice& d) {
    return d.driver == driver && d.pool == pool && d.device == device;
  });
}

DeviceReclaimer::DeviceReclaimer(ReclaimerOptions options, const ClaimIndex* index,
                                 ClaimSource* claims, PreparedCheckpoint* holders,
                                 const PreparedCheckpoint* prepared, BindJournal* journal,
                                 VfioBinder* binder)
    : options_(std::move(options)),
      index_(index),
      claims_(claims),
      holders_(holders),
      prepared_(prepared),
      journal_(journal),
      binder_(binder) {}

DeviceReclaimer::Liveness DeviceReclaimer::Holds(const PreparedClaim& holder,
                                                 const std::string& device,
                                                 const ClaimSnapshot& snapshot) {
  if (deleted_uids_.contains(holder.uid)) return Liveness::kGone;
  for (const ResourceClaimView& c : snapshot.claims) {
    if (c.uid == holder.uid &&
        AllocatesDevice(c, options_.driver_name, options_.node_name, device)) {
      return Liveness::kHolds;
    }
  }
  if (snapshot.unreadable.contains(absl::StrCat(holder.ns, "/", holder.name))) {
    return Liveness::kUnknown;
  }
  // The copy may lag behind the apiserver (a claim allocated a moment ago):
  // only the claim itself, read now, says it is gone.
  absl::StatusOr<ResourceClaimView> now = claims_->Get(holder.ns, holder.name);
  if (absl::IsNotFound(now.status())) {
    deleted_uids_.insert(holder.uid);
    return Liveness::kGone;
  }
  if (!now.ok()) {
    Note(device,
         absl::StrCat("cannot read ", HolderRef(holder), " that holds it (",
                      now.status().ToString(), "): withheld until it can be read"),
         true);
    return Liveness::kUnknown;
  }
  if (now->uid != holder.uid) {
    deleted_uids_.insert(holder.uid);
    return Liveness::kGone;
  }
  return AllocatesDevice(*now, options_.driver_name, options_.node_name, device)
             ? Liveness::kHolds
             : Liveness::kGone;
}

ReclaimPlan DeviceReclaimer::Plan(const std::vector<Device>& devices,
                                  const std::optional<std::set<PciAddress>>& extender_held) {
  ReclaimPlan plan;
  stale_requests_.clear();
  std::set<std::string> released;  // Device names waiting for an administrator.
  const std::optional<ClaimSnapshot> snapshot = index_->Snapshot();
  const std::vector<PreparedClaim> holders = holders_->Claims();
  const std::vector<PreparedClaim> prepared = prepared_->Claims();
  for (const Device& d : devices) {
    const std::string name = DeviceNameFromSerial(d.serial);
    if (name.empty()) continue;  // Never published: it has no name.
    const std::optional<JournalEntry> entry = journal_->Get(d.address);
    if (entry && entry->state == JournalState::kErasing) {
      plan.withheld[d.address] = "its erase is pending";
      continue;
    }
    if (extender_held && extender_held->contains(d.address)) {
      plan.withheld[d.address] = "held by a PersistentDeviceClaim (device-plugin mode)";
      continue;
    }
    const bool on_vfio = d.driver == kVfioPci;
    const bool pdc_bound = on_vfio && entry && entry->state == JournalState::kBound;
    std::vector<const PreparedClaim*> held_by;
    for (const PreparedClaim& h : holders) {
      if (Names(h, name)) held_by.push_back(&h);
    }
    if (!snapshot) {
      if (!held_by.empty() || pdc_bound) {
        plan.withheld[d.address] =
            "the ResourceClaims are not listed yet: whether a claim still holds it is unknown";
      }
      continue;
    }
    const bool scrubs = KindForClass(d.class_code).ScrubsOnReclaim();
    // What a freed device becomes: `whose` names the data on it.
    auto freed = [&](const std::string& whose, bool owner_known) {
      const bool release = ReleaseRequested(name);
      if (owner_known && options_.policy == ReclaimPolicy::kDelete && scrubs) {
        plan.withheld[d.address] = absl::StrCat("being erased: ", whose, ", reclaimPolicy Delete");
        plan.steps.push_back({ReclaimAction::kErase, d.address, name,
                              absl::StrCat(whose, ", reclaimPolicy Delete"), release, {}});
        return;
      }
      if (release) {
        plan.withheld[d.address] =
            absl::StrCat("released by an administrator: ", scrubs ? "being erased" : "handed back");
        plan.steps.push_back({scrubs ? ReclaimAction::kErase : ReclaimAction::kRestore, d.address,
                              name, absl::StrCat(whose, ", released by an administrator"), true,
                              {}});
        return;
      }
      released.insert(name);
      const std::string why =
          !owner_known ? std::string("whose data it is is not known, so it is not erased unasked")
          : options_.policy == ReclaimPolicy::kRetain
              ? std::string("reclaimPolicy Retain")
              : absl::StrCat("reclaimPolicy Delete, but its device kind (",
                             Sv(KindForClass(d.class_code).name()), ") cannot erase it");
      plan.withheld[d.address] =
          absl::StrCat("Released: holds the data of ", whose, " (", why,
                       "); withdrawn until an administrator releases it");
      Note(name,
           absl::StrCat("device ", name, " (", d.address.ToString(), ") is Released: it holds the ",
                        "data of ", whose, " (", why, "); not published until released (pdc-node ",
                        "--release-dra-device=", options_.driver_name, "/", name, ")"),
           true);
    };
    if (held_by.empty()) {
      if (!pdc_bound) continue;
      if (!extender_held) {
        plan.withheld[d.address] =
            "pdc-extender's allocations are not read yet: whether a PersistentDeviceClaim holds "
            "it is unknown";
        continue;
      }
      const ResourceClaimView* live = nullptr;
      for (const ResourceClaimView& c : snapshot->claims) {
        if (AllocatesDevice(c, options_.driver_name, options_.node_name, name)) live = &c;
      }
      if (live != nullptr) {
        plan.steps.push_back({ReclaimAction::kAdopt, d.address, name,
                              absl::StrCat("on vfio-pci with no holder recorded; claim ", live->ns,
                                           "/", live->name, " is allocated it"),
                              false, *live});
      } else {
        freed("a claim pdc-node has no record of (it is on vfio-pci and no claim is allocated it)",
              false);
      }
      continue;
    }
    std::vector<const PreparedClaim*> gone;
    bool unknown = false;
    for (const PreparedClaim* h : held_by) {
      switch (Holds(*h, name, *snapshot)) {
        case Liveness::kHolds:
          break;
        case Liveness::kGone:
          gone.push_back(h);
          break;
        case Liveness::kUnknown:
          unknown = true;
          break;
      }
    }
    if (gone.empty()) {
      noted_.erase(name);
      continue;
    }
    if (unknown) {
      plan.withheld[d.address] = "whether a claim that held it still does cannot be read";
      continue;
    }
    if (!on_vfio && !entry) {
      // The claim was recorded but its device never reached vfio-pci (the
      // bind failed or was interrupted and rolled back): no guest saw it.
      plan.steps.push_back({ReclaimAction::kForget, d.address, name,
                            absl::StrCat(HolderRef(*gone[0]), " is gone; the device never left "
                                                              "its host driver for it"),
                            false, {}});
      continue;
    }
    // Prepared for a claim that still holds it: never erased under it.
    const PreparedClaim* in_use = nullptr;
    for (const PreparedClaim& p : prepared) {
      if (!Names(p, name)) continue;
      const bool p_gone = std::any_of(gone.begin(), gone.end(),
                                      [&](const PreparedClaim* g) { return g->uid == p.uid; });
      if (!p_gone) in_use = &p;
    }
    if (in_use != nullptr) {
      plan.withheld[d.address] = absl::StrCat("prepared for ", HolderRef(*in_use),
                                              " but also holding the data of ",
                                              HolderRef(*gone[0]), "; left for an administrator");
      Note(name,
           absl::StrCat("device ", name, " (", d.address.ToString(), ") is prepared for ",
                        HolderRef(*in_use), " and holds the data of ", HolderRef(*gone[0]),
                        ", which no longer holds it: not erased under a live claim"),
           true);
      continue;
    }
    freed(absl::StrCat("deleted or deallocated ", HolderRef(*gone[0])), true);
  }
  // A request naming no Released device goes: it must not release a later
  // claim's data.
  if (!options_.release_dir.empty()) {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(options_.release_dir, ec)) {
      const std::string n = f.path().filename().string();
      const bool used = std::any_of(plan.steps.begin(), plan.steps.end(), [&](const ReclaimStep& s) {
        return s.release_request && s.device == n;
      });
      if (!used && !released.contains(n)) stale_requests_.push_back(n);
    }
  }
  return plan;
}

bool DeviceReclaimer::ReleaseRequested(const std::string& device) const {
  if (options_.release_dir.empty()) return false;
  struct stat st;
  return ::stat(absl::StrCat(options_.release_dir, "/", device).c_str(), &st) == 0;
}

void DeviceReclaimer::ConsumeRelease(const std::string& device) {
  const std::string path = absl::StrCat(options_.release_dir, "/", device);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("DRA {}: removing the release request {}: {}", options_.driver_name, path,
                 ErrnoStatus("unlink", path, errno).ToString());
    return;
  }
  (void)FsyncDirectory(options_.release_dir);
}

absl::Status DeviceReclaimer::DropHolder(const std::string& device) {
  for (PreparedClaim c : holders_->Claims()) {
    if (!Names(c, device)) continue;
    std::erase_if(c.devices, [&](const PreparedDevice& d) { return d.device == device; });
    absl::Status s = c.devices.empty() ? holders_->Remove(c.uid) : holders_->Put(c);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void DeviceReclaimer::Note(const std::string& device, const std::string& message, bool warn) {
  auto [it, inserted] = noted_.try_emplace(device, message);
  if (!inserted && it->second == message) return;
  it->second = message;
  if (warn) {
    spdlog::warn("DRA {}: {}", options_.driver_name, message);
  } else {
    spdlog::info("DRA {}: {}", options_.driver_name, message);
  }
}

void DeviceReclaimer::Apply(const ReclaimPlan& plan) {
  for (const ReclaimStep& step : plan.steps) {
    const std::string at = absl::StrCat(step.device, " (", step.address.ToString(), ")");
    absl::Status s;
    switch (step.action) {
      case ReclaimAction::kErase: {
        // Durable before the holder record goes: from here on the journal
        // keeps the device off the slices and off any claim until erased.
        absl::StatusOr<bool> marked = binder_->MarkErasePending(step.address);
        s = marked.status();
        if (s.ok()) s = DropHolder(step.device);
        if (s.ok()) {
          Note(step.device,
               absl::StrCat("withdrew device ", at, " from the ResourceSlice (", step.why, "): ",
                            *marked ? "its erase is journaled; it is published again once erased"
                                    : "pdc never bound it, nothing to erase"),
               false);
        }
        break;
      }
      case ReclaimAction::kRestore: {
        absl::StatusOr<RestoreOutcome> back = binder_->Restore(step.address);
        s = back.status();
        if (s.ok()) s = DropHolder(step.device);
        if (s.ok()) {
          Note(step.device,
               absl::StrCat("handed device ", at, " back to its host driver WITHOUT erasing it (",
                            step.why, ")"),
               true);
        }
        break;
      }
      case ReclaimAction::kForget:
        s = DropHolder(step.device);
        break;
      case ReclaimAction::kAdopt: {
        PreparedClaim record{step.adopter.uid, step.adopter.ns, step.adopter.name, {}};
        if (auto old = holders_->Get(step.adopter.uid)) record = *old;
        for (const AllocatedDevice& d : step.adopter.devices) {
          if (d.device == step.device && d.driver == options_.driver_name &&
              d.pool == options_.node_name) {
            record.devices.push_back({d.request, d.pool, d.device, step.address});
          }
        }
        s = holders_->Put(record);
        if (s.ok()) spdlog::warn("DRA {}: device {}: {}", options_.driver_name, at, step.why);
        break;
      }
    }
    if (!s.ok()) {
      spdlog::warn("DRA {}: device {}: {} (retried next pass)", options_.driver_name, at,
                   s.ToString());
      continue;
    }
    if (step.release_request) ConsumeRelease(step.device);
  }
  for (const std::string& n : stale_requests_) {
    spdlog::warn("DRA {}: release request {} names no Released device of this node: removed",
                 options_.driver_name, n);
    ConsumeRelease(n);
  }
  stale_requests_.clear();
}

}  // namespace pdc::driver::dra
