#include "driver/vfio_binder.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/device_kind.h"
#include "driver/discovery.h"
#include "driver/host_usage.h"

namespace pdc::driver {
namespace {

constexpr char kReasonUrl[] = "pdc.kubevirt.io/driver-failure-reason";

absl::Status WithReason(absl::Status s, std::string_view reason) {
  return WithFailureReason(std::move(s), reason);
}

absl::Status Refuse(std::string_view reason, std::string message) {
  return WithReason(absl::FailedPreconditionError(std::move(message)), reason);
}

std::string Describe(const PciFunctionInfo& i) {
  return absl::StrFormat("%s (%04x:%04x class %06x%s)", i.address.ToString(), i.vendor_id,
                         i.device_id, i.class_code,
                         i.driver.empty() ? "" : absl::StrCat(", driver ", i.driver));
}

std::string ProbePath() { return "bus/pci/drivers_probe"; }
std::string UnbindPath(std::string_view drv) {
  return absl::StrCat("bus/pci/drivers/", Sv(drv), "/unbind");
}

}  // namespace

absl::Status WithFailureReason(absl::Status s, std::string_view reason) {
  if (!s.ok() && !s.GetPayload(kReasonUrl)) s.SetPayload(kReasonUrl, absl::Cord(Sv(reason)));
  return s;
}

std::string FailureReason(const absl::Status& status) {
  if (status.ok()) return "";
  if (auto p = status.GetPayload(kReasonUrl)) return std::string(*p);
  if (absl::IsNotFound(status)) return std::string(kReasonNotFound);
  return std::string(kReasonSysfs);
}

VfioBinder::VfioBinder(Sysfs* sys, Sysfs* dev, Sysfs* proc, BindJournal* journal,
                       BinderOptions options)
    : sys_(sys),
      dev_(dev),
      journal_(journal),
      options_(std::move(options)),
      host_{sys, dev, proc, options_.mountinfo_path, options_.nvme_admin, options_.policy} {}

bool VfioBinder::PdcDrive(const PciFunctionInfo& info) const {
  // The drive is the one pdc bound: same (non-empty) serial as journaled.
  auto e = journal_->Get(info.address);
  return e && !e->serial.empty() && e->serial == info.serial;
}

bool VfioBinder::WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < std::max(1, options_.verify_attempts); ++i) {
    if (done()) return true;
    options_.clock->SleepFor(options_.verify_interval);
  }
  return done();
}

std::string VfioBinder::CurrentDriver(PciAddress address) {
  auto d = LinkName(*sys_, DevicePath(address) + "/driver");
  return d.ok() ? *d : "";
}

absl::Status VfioBinder::CheckBindable(const std::vector<PciAddress>& addresses) {
  absl::MutexLock lock(&mu_);
  std::vector<PciFunctionInfo> infos;
  for (PciAddress a : addresses) {
    auto info = ReadPciFunction(*sys_, a);
    if (!info.ok()) return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
    infos.push_back(std::move(*info));
  }
  return CheckBindableLocked(infos, nullptr);
}

std::map<PciAddress, std::string> VfioBinder::HostUses(const std::vector<PciAddress>& addresses) {
  absl::MutexLock lock(&mu_);
  std::vector<HostUsageQuery> queries;
  std::map<PciAddress, std::string> out;
  for (PciAddress a : addresses) {
    auto info = ReadPciFunction(*sys_, a);
    if (absl::IsNotFound(info.status())) continue;  // Unplugged meanwhile.
    if (!info.ok()) {
      out[a] = absl::StrCat("cannot tell whether the host uses it: ", info.status().ToString());
      continue;
    }
    if (info->driver == kVfioPci) continue;
    const DeviceClass* c = MatchingClass(options_.classes, ToDevice(*info));
    if (c != nullptr) {
      const bool ours = PdcDrive(*info);
      queries.push_back({std::move(*info), c, ours});
    }
  }
  auto results = HostUsesOfEach(host_, queries);
  for (size_t k = 0; k < queries.size(); ++k) {
    const PciAddress a = queries[k].info.address;
    if (!results[k].ok()) {
      out[a] = absl::StrCat("cannot tell whether the host uses it: ", results[k].status().ToString());
    } else if (!results[k]->empty()) {
      out[a] = absl::StrCat("the host uses it: ", absl::StrJoin(*results[k], "; "));
    }
  }
  return out;
}

absl::Status VfioBinder::CheckBindableLocked(const std::vector<PciFunctionInfo>& infos,
                                             BlockDeviceHold* hold) {
  if (infos.empty()) return absl::InvalidArgumentError("no device to bind");
  std::set<PciAddress> wanted;
  for (const PciFunctionInfo& i : infos) wanted.insert(i.address);
  std::set<int32_t> groups;
  for (const PciFunctionInfo& i : infos) {
    if (MatchingClass(options_.classes, ToDevice(i)) == nullptr) {
      return Refuse(kReasonUnmatchedClass,
                    absl::StrCat("refusing to bind ", Describe(i),
                                 " to vfio-pci: no configured device class matches it"));
    }
    if (i.iommu_group < 0) {
      return Refuse(kReasonNoIommuGroup,
                    absl::StrCat("refusing to bind ", Describe(i),
                                 " to vfio-pci: it is in no IOMMU group (is the IOMMU "
                                 "enabled, e.g. intel_iommu=on?)"));
    }
    groups.insert(i.iommu_group);
  }
  for (int32_t g : groups) {
    auto members = IommuGroupMembers(*sys_, g);
    if (!members.ok()) return WithReason(members.status(), kReasonSysfs);
    for (PciAddress m : *members) {
      if (wanted.contains(m)) continue;
      auto info = ReadPciFunction(*sys_, m);
      if (!info.ok()) return WithReason(info.status(), kReasonSysfs);
      if (info->IsPciBridge()) continue;
      if (MatchingClass(options_.classes, ToDevice(*info)) != nullptr) {
        return Refuse(kReasonGroupPartial,
                      absl::StrCat("refusing to bind only part of IOMMU group ", g,
                                   ": it also holds ", Describe(*info),
                                   "; a group goes to vfio-pci whole, bind its devices together"));
      }
      return Refuse(kReasonGroupShared,
                    absl::StrCat("refusing to bind IOMMU group ", g, " to vfio-pci: it also holds ",
                                 Describe(*info),
                                 ", which is neither an allowed device nor a PCI bridge"));
    }
  }
  if (!sys_->Exists("bus/pci/drivers/vfio-pci")) {
    return Refuse(kReasonVfioMissing,
                  "the vfio-pci driver is not loaded (modprobe vfio-pci)");
  }
  std::set<std::string> erasing_serials;  // A pending erase follows its drive.
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state == JournalState::kErasing && !e.serial.empty()) erasing_serials.insert(e.serial);
  }
  for (const PciFunctionInfo& i : infos) {
    if (auto e = journal_->Get(i.address);
        (e && e->state == JournalState::kErasing) ||
        (!i.serial.empty() && erasing_serials.contains(i.serial))) {
      return Refuse(kReasonErasePending,
                    absl::StrCat("refusing to bind ", Describe(i),
                                 ": its erase is pending, it may still hold the previous "
                                 "VM's data"));
    }
  }
  for (const PciFunctionInfo& i : infos) {
    if (i.driver == kVfioPci) {
      // Ours (journaled) stays ours. Anything else on vfio-pci was bound by
      // someone else, for a purpose pdc cannot see: never adopted.
      if (journal_->Get(i.address)) continue;
      return Refuse(kReasonNotBoundByPdc,
                    absl::StrCat("refusing to take ", Describe(i),
                                 ": it is on vfio-pci but pdc did not bind it (no bind-journal "
                                 "entry), so someone else did and may use it; unbind it from "
                                 "vfio-pci on the host to offer it"));
    }
    const DeviceClass* device_class = MatchingClass(options_.classes, ToDevice(i));
    auto uses = HostUsesOf(host_, i, *device_class, hold, PdcDrive(i));
    if (!uses.ok()) {
      return Refuse(kReasonHostInUse,
                    absl::StrCat("refusing to bind ", Describe(i),
                                 ": cannot tell whether the host uses it: ",
                                 uses.status().ToString()));
    }
    if (!uses->empty()) {
      return Refuse(kReasonHostInUse,
                    absl::StrCat("refusing to bind ", Describe(i),
                                 " to vfio-pci: the host uses it: ", absl::StrJoin(*uses, "; ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BindOutcome> VfioBinder::Bind(const std::vector<PciAddress>& addresses) {
  absl::MutexLock lock(&mu_);
  std::vector<PciFunctionInfo> infos;
  for (PciAddress a : addresses) {
    auto info = ReadPciFunction(*sys_, a);
    if (!info.ok()) {
      return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
    }
    infos.push_back(std::move(*info));
  }
  std::sort(infos.begin(), infos.end(),
            [](const auto& x, const auto& y) { return x.address < y.address; });
  // Held until this call returns: after the unbind the block devices are gone.
  BlockDeviceHold hold;
  RETURN_IF_ERROR(CheckBindableLocked(infos, &hold));

  const bool all_bound = std::all_of(infos.begin(), infos.end(), [](const auto& i) {
    return i.driver == kVfioPci;
  });
  if (all_bound) {
    for (const PciFunctionInfo& i : infos) {
      if (!dev_->Exists(absl::StrCat("vfio/", i.iommu_group))) {
        return WithReason(absl::UnavailableError(absl::StrCat(
                              i.address.ToString(), " is on vfio-pci but /dev/vfio/",
                              i.iommu_group, " is missing")),
                          kReasonProbeFailed);
      }
      // An interrupted bind that reached vfio-pci is done.
      if (auto e = journal_->Get(i.address); e && e->state != JournalState::kBound) {
        JournalEntry done = *e;
        done.state = JournalState::kBound;
        RETURN_IF_ERROR(WithReason(journal_->Put(done), kReasonJournal));
      }
    }
    return BindOutcome::kAlreadyBound;
  }
  std::vector<PciFunctionInfo> moved;
  for (const PciFunctionInfo& i : infos) {
    if (i.driver == kVfioPci) continue;
    absl::Status s = BindOneLocked(i);
    if (!s.ok()) {
      // All or nothing: a half-bound group is not viable for a VM anyway.
      for (const PciFunctionInfo& m : moved) {
        auto e = journal_->Get(m.address);
        if (GiveBackLocked(m.address, e ? e->original_driver : m.driver).ok()) {
          (void)journal_->Remove(m.address);
        }
      }
      return s;
    }
    moved.push_back(i);
  }
  return BindOutcome::kBound;
}

absl::Status VfioBinder::BindOneLocked(const PciFunctionInfo& i) {
  const std::string addr = i.address.ToString();
  const std::string dir = DevicePath(i.address);
  JournalEntry entry{i.address, JournalState::kBinding, i.driver, i.serial};
  // What the drive's firmware is now, compared when it comes back.
  entry.firmware = KindOf(i).FirmwareState(host_, i);
  entry.dsn = i.dsn;
  if (auto old = journal_->Get(i.address)) {
    // Keep the driver we knew from the first time (e.g. an interrupted
    // restore), never its serial: the drive at the address now may be
    // another one, and what it shows (possibly nothing) is what is known.
    entry.original_driver = old->original_driver;
  }
  RETURN_IF_ERROR(WithReason(journal_->Put(entry), kReasonJournal));

  absl::Status s = sys_->Write(dir + "/driver_override", kVfioPci);
  if (s.ok() && !i.driver.empty()) s = sys_->Write(UnbindPath(i.driver), addr);
  if (s.ok()) s = sys_->Write(ProbePath(), addr);
  if (s.ok()) {
    const std::string group_node = absl::StrCat("vfio/", i.iommu_group);
    const bool ok = WaitFor([&] {
      return CurrentDriver(i.address) == kVfioPci && dev_->Exists(group_node);
    });
    if (!ok) {
      const std::string now = CurrentDriver(i.address);
      s = WithReason(
          absl::UnavailableError(absl::StrCat(
              "binding ", addr, " to vfio-pci failed: after the probe its driver is \"", now,
              "\"", now == kVfioPci ? absl::StrCat(" but /dev/vfio/", i.iommu_group, " is missing") : "",
              " (see the kernel log)")),
          kReasonProbeFailed);
    }
  } else {
    s = WithReason(s, kReasonSysfs);
  }
  if (!s.ok()) {
    const std::string reason = FailureReason(s);
    absl::Status back = GiveBackLocked(i.address, entry.original_driver);
    std::string message;
    if (back.ok()) {
      (void)journal_->Remove(i.address);
      message = absl::StrCat(s.message(), "; device given back to ",
                             entry.original_driver.empty() ? "no driver" : entry.original_driver);
    } else {
      message = absl::StrCat(s.message(), "; giving it back failed too: ", back.ToString());
    }
    return WithReason(absl::Status(s.code(), message), reason);
  }
  entry.state = JournalState::kBound;
  return WithReason(journal_->Put(entry), kReasonJournal);
}

absl::Status VfioBinder::GiveBackLocked(PciAddress address, const std::string& original) {
  const std::string addr = address.ToString();
  const std::string dir = DevicePath(address);
  // "\n" clears the override; reading it then gives "(null)".
  if (CurrentDriver(address) == kVfioPci) {
    // The kernel's unbind waits until the group's opener lets go (vfio-pci's
    // remove blocks on the device's users): wait here instead, with a reason.
    RETURN_IF_ERROR(VfioGroupFreeLocked(address, "giving it back"));
  }
  RETURN_IF_ERROR(WithReason(sys_->Write(dir + "/driver_override", "\n"), kReasonSysfs));
  if (CurrentDriver(address) == kVfioPci) {
    RETURN_IF_ERROR(WithReason(sys_->Write(UnbindPath(kVfioPci), addr), kReasonSysfs));
  }
  const std::string now = CurrentDriver(address);
  if (now.empty()) {
    RETURN_IF_ERROR(WithReason(sys_->Write(ProbePath(), addr), kReasonSysfs));
  }
  const bool ok = WaitFor([&] {
    const std::string d = CurrentDriver(address);
    return original.empty() ? d != kVfioPci : d == original;
  });
  if (!ok) {
    return WithReason(
        absl::UnavailableError(absl::StrCat(
            "giving ", addr, " back to ", original.empty() ? "the host" : original,
            " failed: its driver is \"", CurrentDriver(address), "\" (see the kernel log)")),
        kReasonRestoreFailed);
  }
  return absl::OkStatus();
}

absl::StatusOr<RestoreOutcome> VfioBinder::Restore(PciAddress address) {
  absl::MutexLock lock(&mu_);
  return RestoreLocked(address);
}

absl::StatusOr<RestoreOutcome> VfioBinder::RestoreLocked(PciAddress address) {
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (entry && entry->state == JournalState::kErasing) {
    return Refuse(kReasonErasePending,
                  absl::StrCat("not handing ", address.ToString(),
                               " back without its erase: the erase is pending"));
  }
  // On the host: off vfio-pci, no override, and on a driver unless it never
  // had one (an interrupted restore leaves it on none).
  const bool on_host = info->driver != kVfioPci && info->driver_override.empty() &&
                       (!info->driver.empty() || !entry || entry->original_driver.empty());
  if (on_host) {
    if (entry) RETURN_IF_ERROR(WithReason(journal_->Remove(address), kReasonJournal));
    return RestoreOutcome::kAlreadyRestored;
  }
  JournalEntry restoring = entry.value_or(JournalEntry{address, JournalState::kRestoring, "", ""});
  restoring.state = JournalState::kRestoring;
  RETURN_IF_ERROR(WithReason(journal_->Put(restoring), kReasonJournal));
  RETURN_IF_ERROR(GiveBackLocked(address, restoring.original_driver));
  RETURN_IF_ERROR(WithReason(journal_->Remove(address), kReasonJournal));
  return RestoreOutcome::kRestored;
}

absl::StatusOr<bool> VfioBinder::MarkErasePending(PciAddress address) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (entry && entry->state == JournalState::kErasing) return true;
  // Erased already; the extender has not seen the acknowledgement yet.
  if (entry && entry->state == JournalState::kReturned) return false;
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  // No record of it (a lost journal, a manual rebind): the extender says a
  // deleted claim's drive is here, but which drive that was is unknown, so
  // it is journaled with no identity and its erase refuses (held for an
  // administrator) rather than erasing whatever drive is at the address.
  JournalEntry erasing = entry.value_or(
      JournalEntry{address, JournalState::kErasing,
                   info->driver == kVfioPci ? "" : info->driver, ""});
  erasing.state = JournalState::kErasing;
  RETURN_IF_ERROR(WithReason(journal_->Put(erasing), kReasonJournal));
  return true;
}

std::optional<JournalEntry> VfioBinder::ErasingEntry(PciAddress address) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kErasing) return std::nullopt;
  return entry;
}

absl::Status VfioBinder::VfioGroupFreeLocked(PciAddress address, std::string_view doing) {
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  if (info->iommu_group < 0) return absl::OkStatus();
  auto users = VfioGroupUsers(host_, info->iommu_group);
  if (absl::IsNotFound(users.status())) return absl::OkStatus();  // No group node: no opener.
  if (!users.ok()) {
    return Refuse(kReasonVfioGroupInUse,
                  absl::StrCat("not ", Sv(doing), " (", address.ToString(),
                               "): cannot tell whether /dev/vfio/", info->iommu_group,
                               " is open: ", users.status().ToString()));
  }
  if (!users->empty()) {
    return WithReason(
        absl::UnavailableError(absl::StrCat(
            "waiting before ", Sv(doing), " (", address.ToString(), "): /dev/vfio/",
            info->iommu_group, " is open in ", absl::StrJoin(*users, ", "),
            " (a VM still holds it); unbinding now would block until it lets go")),
        kReasonVfioGroupInUse);
  }
  return absl::OkStatus();
}

absl::Status VfioBinder::VfioGroupFree(PciAddress address, std::string_view doing) {
  absl::MutexLock lock(&mu_);
  return VfioGroupFreeLocked(address, doing);
}

absl::StatusOr<PciFunctionInfo> VfioBinder::PendingEraseDriveLocked(PciAddress address) {
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kErasing) {
    return absl::FailedPreconditionError(
        absl::StrCat("no erase is pending for ", address.ToString()));
  }
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  if (entry->serial.empty()) {
    return Refuse(kReasonEraseNoIdentity,
                  absl::StrCat("not erasing ", Describe(*info), ": the journal names no drive "
                               "for its pending erase, so which drive holds the deleted claim's "
                               "data cannot be checked; held until an administrator erases it"));
  }
  // The Device Serial Number names the drive on any driver (vfio-pci too):
  // another one, or none where one was read at bind, is not ours.
  if (!entry->dsn.empty() && info->dsn != entry->dsn) {
    return Refuse(kReasonDriveChanged,
                  absl::StrCat("not erasing ", Describe(*info), ": its PCIe Device Serial Number "
                               "is ", info->dsn.empty() ? std::string("unreadable or absent")
                                                        : "\"" + info->dsn + "\"",
                               ", not \"", entry->dsn, "\" journaled when drive \"",
                               entry->serial, "\" was bound: another drive is at the address (a "
                               "renumbering or a swap); left alone"));
  }
  // On a host driver sysfs names the drive: another one is not ours.
  if (!info->serial.empty() && info->serial != entry->serial) {
    return Refuse(kReasonDriveChanged,
                  absl::StrCat("not erasing ", Describe(*info), ": it is drive \"", info->serial,
                               "\", not \"", entry->serial, "\" whose erase is pending (a "
                               "renumbering or a swap); left alone"));
  }
  return *std::move(info);
}

absl::StatusOr<PciFunctionInfo> VfioBinder::PendingEraseDrive(PciAddress address) {
  absl::MutexLock lock(&mu_);
  return PendingEraseDriveLocked(address);
}

absl::Status VfioBinder::GiveBackForErase(PciAddress address) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const PciFunctionInfo info, PendingEraseDriveLocked(address));
  if (info.driver == "nvme" && info.driver_override.empty()) return absl::OkStatus();
  // The erase goes through nvme, whatever the device had before.
  return GiveBackLocked(address, "nvme");
}

absl::Status VfioBinder::CheckUnusedForErase(const PciFunctionInfo& function,
                                             BlockDeviceHold* hold) {
  absl::MutexLock lock(&mu_);
  const DeviceClass* c = MatchingClass(options_.classes, ToDevice(function));
  DeviceClass any;  // A storage function's rule does not depend on its class.
  auto uses = HostUsesOf(host_, function, c != nullptr ? *c : any, hold);
  if (!uses.ok()) {
    return Refuse(kReasonHostInUse,
                  absl::StrCat("not erasing ", Describe(function),
                               ": cannot tell whether the host uses it: ", uses.status().ToString()));
  }
  if (!uses->empty()) {
    return Refuse(kReasonHostInUse,
                  absl::StrCat("not erasing ", Describe(function), ": the host uses it: ",
                               absl::StrJoin(*uses, "; ")));
  }
  return absl::OkStatus();
}

absl::Status VfioBinder::HoldForErase(PciAddress address) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kErasing) {
    return absl::FailedPreconditionError(
        absl::StrCat("no erase is pending for ", address.ToString()));
  }
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  if (info->driver == kVfioPci) return absl::OkStatus();
  const std::string addr = address.ToString();
  absl::Status s = sys_->Write(DevicePath(address) + "/driver_override", kVfioPci);
  if (s.ok() && !info->driver.empty()) s = sys_->Write(UnbindPath(info->driver), addr);
  if (s.ok()) s = sys_->Write(ProbePath(), addr);
  if (!s.ok()) return WithReason(s, kReasonSysfs);
  if (!WaitFor([&] { return CurrentDriver(address) == kVfioPci; })) {
    return WithReason(absl::UnavailableError(absl::StrCat(
                          "putting ", addr, " back on vfio-pci failed: its driver is \"",
                          CurrentDriver(address), "\" (see the kernel log)")),
                      kReasonProbeFailed);
  }
  return absl::OkStatus();
}

absl::Status VfioBinder::CompleteErase(PciAddress address, std::string_view identity) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kErasing) {
    return absl::FailedPreconditionError(
        absl::StrCat("no erase is pending for ", address.ToString()));
  }
  JournalEntry returned = *entry;
  returned.state = JournalState::kReturned;
  if (!identity.empty()) returned.serial = std::string(identity);
  return WithReason(journal_->Put(returned), kReasonJournal);
}

absl::Status VfioBinder::ReturnErased(PciAddress address) {
  absl::MutexLock lock(&mu_);
  return ReturnErasedLocked(address);
}

absl::Status VfioBinder::ReturnErasedLocked(PciAddress address) {
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kReturned) {
    return absl::FailedPreconditionError(
        absl::StrCat("no erased drive waits to be handed back at ", address.ToString()));
  }
  auto info = ReadPciFunction(*sys_, address);
  if (!info.ok()) {
    return WithReason(info.status(), absl::IsNotFound(info.status()) ? kReasonNotFound : kReasonSysfs);
  }
  if (info->driver != kVfioPci && info->driver_override != kVfioPci) return absl::OkStatus();
  return GiveBackLocked(address, "nvme");
}

absl::Status VfioBinder::ForgetReturned(PciAddress address) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(address);
  if (!entry || entry->state != JournalState::kReturned) return absl::OkStatus();
  // Erased on vfio-pci and not handed back yet: without its entry it would
  // look bound by someone else.
  if (auto info = ReadPciFunction(*sys_, address); info.ok() && info->driver == kVfioPci) {
    RETURN_IF_ERROR(ReturnErasedLocked(address));
  }
  return WithReason(journal_->Remove(address), kReasonJournal);
}

absl::Status VfioBinder::MoveErase(PciAddress from, PciAddress to) {
  absl::MutexLock lock(&mu_);
  std::optional<JournalEntry> entry = journal_->Get(from);
  if (!entry || entry->state != JournalState::kErasing) {
    return absl::FailedPreconditionError(
        absl::StrCat("no erase is pending for ", from.ToString()));
  }
  return WithReason(journal_->Move(from, to), kReasonJournal);
}

absl::Status VfioBinder::Recover() {
  absl::MutexLock lock(&mu_);
  absl::Status first;
  for (const JournalEntry& e : journal_->Entries()) {
    absl::Status s;
    switch (e.state) {
      case JournalState::kBound:
      case JournalState::kErasing:
      case JournalState::kReturned:
        break;
      case JournalState::kRestoring:
        s = RestoreLocked(e.address).status();
        break;
      case JournalState::kBinding: {
        auto info = ReadPciFunction(*sys_, e.address);
        if (!info.ok()) {
          s = info.status();
          break;
        }
        if (info->driver == kVfioPci && dev_->Exists(absl::StrCat("vfio/", info->iommu_group))) {
          JournalEntry done = e;
          done.state = JournalState::kBound;
          s = journal_->Put(done);
        } else {
          s = GiveBackLocked(e.address, e.original_driver);
          if (s.ok()) s = journal_->Remove(e.address);
        }
        break;
      }
    }
    if (!s.ok() && first.ok()) {
      first = absl::Status(s.code(), absl::StrCat("recovering ", e.address.ToString(), " (",
                                                  Sv(ToString(e.state)), "): ", s.message()));
    }
  }
  return first;
}

}  // namespace pdc::driver
