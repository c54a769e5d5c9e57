#include "driver/node_reconciler.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "driver/device_kind.h"
#include "driver/discovery.h"
#include "driver/nvme_firmware.h"
#include "driver/pci_function.h"
#include "spdlog/spdlog.h"

namespace pdc::driver {

Reconciler::Reconciler(Sysfs* sys, VfioBinder* binder, BindJournal* journal, ExtenderApi* api,
                       NodeMetrics* metrics, const Clock* clock, ReconcilerOptions options)
    : sys_(sys),
      binder_(binder),
      journal_(journal),
      api_(api),
      metrics_(metrics),
      clock_(clock),
      options_(std::move(options)) {
  last_pass_unix_nanos_ = absl::ToUnixNanos(clock_->Now());
}

absl::Status Reconciler::Start() {
  absl::Status s = binder_->Recover();
  if (!s.ok()) spdlog::warn("recovering interrupted binds: {}", s.ToString());
  std::vector<std::string> pending;
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state == JournalState::kErasing) pending.push_back(e.address.ToString());
  }
  if (!pending.empty()) {
    spdlog::warn("erase pending from before the restart for {}: unhealthy until erased",
                 absl::StrJoin(pending, ", "));
  }
  return s;
}

bool Reconciler::Healthy() const {
  const absl::Time now = clock_->Now();
  if (now < absl::FromUnixNanos(busy_until_unix_nanos_.load())) return true;  // Erasing.
  const absl::Duration since_pass = now - absl::FromUnixNanos(last_pass_unix_nanos_.load());
  return since_pass < 3 * options_.heartbeat + options_.backoff_max;
}

absl::StatusOr<NodeInventory> Reconciler::Discover() {
  DiscoveryOptions d{options_.classes, expected_driver_};
  Stopwatch sw(clock_);
  ASSIGN_OR_RETURN(DiscoveryResult r, driver::Discover(*sys_, options_.node, d));
  if (metrics_) metrics_->discovery_seconds->ObserveDuration(sw.Elapsed());
  std::map<std::string, int> by_driver;
  // A pending erase is the drive's, wherever it is now (a renumbering).
  std::set<std::string> erasing_serials;
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state == JournalState::kErasing && !e.serial.empty()) erasing_serials.insert(e.serial);
  }
  for (Device& dev : r.inventory.devices) {
    ++by_driver[dev.driver];
    // sysfs shows no serial once nvme let go; the journal remembers it, for
    // this boot: after a reboot another drive may be at the address.
    auto e = journal_->Get(dev.address);
    if (dev.serial.empty() && dev.driver == kVfioPci && e && !e->serial.empty()) {
      if (journal_->SerialCurrent(*e)) {
        dev.serial = e->serial;
      } else {
        MarkUnhealthy(dev, UnhealthyReason::kUnverifiedIdentity);
        r.problems.push_back(absl::StrCat(
            dev.address.ToString(), " has been on vfio-pci since an earlier boot: its journal "
            "names serial \"", e->serial, "\", but after a reboot another drive may be at this "
            "address and vfio-pci shows no serial, so it is not offered (unhealthy) until it is "
            "bound to its host driver once"));
      }
    }
    // Bound by someone else: never free, never adopted.
    if (dev.driver == kVfioPci && !e) {
      MarkUnhealthy(dev, UnhealthyReason::kHostInUse);
      r.problems.push_back(absl::StrCat(
          dev.address.ToString(), " is on vfio-pci but pdc-node did not bind it (no bind-journal "
          "entry): someone else did and may use it, so it is not offered (unhealthy); unbind it "
          "from vfio-pci on the host to offer it"));
    }
    // It may hold a previous VM's data: never offered until erased. Said
    // over any other reason (its driver is wrong because of the erase).
    if ((e && e->state == JournalState::kErasing) ||
        (!dev.serial.empty() && erasing_serials.contains(dev.serial))) {
      dev.health = DeviceHealth::kUnhealthy;
      dev.unhealthy_reason = UnhealthyReason::kErasing;
    }
  }
  driver::RefuseSharedSerials(&r);
  MarkHostUsed(&r.inventory);
  // Acknowledgements of drives handed back (erased) after a Delete: the
  // extender frees a device only once it sees that drive's here.
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state != JournalState::kReturned) continue;
    r.inventory.returned.push_back(e.serial.empty() ? e.address.ToString() : e.serial);
  }
  std::sort(r.inventory.returned.begin(), r.inventory.returned.end());
  last_discovered_ = r.inventory;
  for (const std::string& p : r.problems) {
    if (last_error_.emplace("discovery:" + p, p).second) spdlog::warn("discovery: {}", p);
  }
  if (metrics_) metrics_->SetDevicesByDriver(std::move(by_driver));
  if (options_.on_inventory) options_.on_inventory(r.inventory);
  return std::move(r.inventory);
}

void Reconciler::MarkHostUsed(NodeInventory* inventory) {
  // Only devices that would be offered: the others are unhealthy already,
  // and a bind of them gives its own reason.
  std::vector<PciAddress> candidates;
  for (const Device& d : inventory->devices) {
    if (d.health == DeviceHealth::kHealthy && d.driver != kVfioPci) {
      candidates.push_back(d.address);
    }
  }
  const std::map<PciAddress, std::string> used =
      candidates.empty() ? std::map<PciAddress, std::string>{} : binder_->HostUses(candidates);
  for (Device& d : inventory->devices) {
    const std::string key = absl::StrCat("host-use:", d.address.ToString());
    auto it = used.find(d.address);
    if (it == used.end()) {
      if (last_error_.erase(key) > 0 && d.health == DeviceHealth::kHealthy) {
        spdlog::info("{}: the host no longer uses it, offered again", d.address.ToString());
      }
      continue;
    }
    // Never offered while the host uses it: the allocator skips unhealthy
    // devices. The inventory says HostInUse; the log says how.
    MarkUnhealthy(d, UnhealthyReason::kHostInUse);
    auto [e, inserted] = last_error_.try_emplace(key, it->second);
    if (inserted || e->second != it->second) {
      e->second = it->second;
      spdlog::warn("{} is not offered (unhealthy): {}", d.address.ToString(), it->second);
    }
  }
  if (metrics_) metrics_->host_used->Set(static_cast<double>(used.size()));
}

NodeInventory Reconciler::Reportable(const NodeInventory& discovered) const {
  if (options_.unreported_resources.empty()) return discovered;
  NodeInventory out = discovered;
  std::erase_if(out.devices, [this](const Device& d) {
    const DeviceClass* c = MatchingClass(options_.classes, d);
    return c != nullptr &&
           std::find(options_.unreported_resources.begin(), options_.unreported_resources.end(),
                     c->resource_name) != options_.unreported_resources.end();
  });
  return out;
}

absl::Status Reconciler::Report(const NodeInventory& discovered, bool force) {
  const NodeInventory inventory = Reportable(discovered);
  const absl::Time now = clock_->Now();
  if (!force && last_reported_ == inventory && now - last_report_time_ < options_.heartbeat) {
    return absl::OkStatus();
  }
  auto version = api_->PutInventory(inventory);
  if (!version.ok()) {
    if (metrics_) metrics_->extender_errors->WithLabels({"inventory"})->Increment();
    return version.status();
  }
  if (metrics_) {
    metrics_->reports->Increment();
    metrics_->last_report->Set(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  }
  last_reported_ = inventory;
  last_report_time_ = now;
  ++reports_;
  return absl::OkStatus();
}

void Reconciler::NoteError(const std::string& key, const absl::Status& s,
                           std::string_view operation, PassResult* result) {
  const std::string reason = FailureReason(s);
  if (metrics_) metrics_->failures->WithLabels({std::string(operation), reason})->Increment();
  result->errors.push_back(absl::StrCat(key, ": ", s.message()));
  std::string message(s.message());
  auto [it, inserted] = last_error_.try_emplace(key, message);
  if (inserted || it->second != message) {
    it->second = message;
    spdlog::warn("{} {}: {} ({})", operation, key, message, reason);
  }
}

void Reconciler::LogMovedClaims(const NodeAllocations& allocations) {
  std::map<ClaimKey, std::vector<PciAddress>> now;
  for (const NodeAllocation& c : allocations.claimed) now[c.claim].push_back(c.address);
  for (const auto& [claim, addresses] : now) {
    auto before = claim_devices_.find(claim);
    if (before == claim_devices_.end() || before->second == addresses) continue;
    // A bound claim keeps its drives: pdc-extender followed them by serial
    // to new PCI addresses (a bus renumbering, docs/design.md §4.1).
    auto join = [](const std::vector<PciAddress>& v) {
      return absl::StrJoin(v, ",",
                           [](std::string* out, PciAddress a) { out->append(a.ToString()); });
    };
    spdlog::warn("claim {}: its drives are now at {} (were at {}): they moved to new PCI "
                 "addresses and the claim followed them by serial",
                 claim.ToString(), join(addresses), join(before->second));
  }
  claim_devices_ = std::move(now);
}

absl::Status Reconciler::SameDriveAsReported(const PciFunctionInfo& now) const {
  const Device* reported = nullptr;
  if (last_reported_) {
    for (const Device& d : last_reported_->devices) {
      if (d.address == now.address) reported = &d;
    }
  }
  // Not reported there: nothing to compare (the binder's own checks decide).
  if (reported == nullptr) return absl::OkStatus();
  std::string serial = now.serial;
  if (serial.empty() && now.driver == kVfioPci) {
    // On vfio-pci sysfs shows no serial: the journal vouches for the drive
    // in the boot it read the serial in.
    if (auto e = journal_->Get(now.address); e && !e->serial.empty() && journal_->SerialCurrent(*e)) {
      serial = e->serial;
    }
  }
  // "No serial" is an answer like any other: it matches only "no serial".
  if (serial == reported->serial) return absl::OkStatus();
  auto say = [](const std::string& s) {
    return s.empty() ? std::string("no serial") : absl::StrCat("serial ", s);
  };
  return WithFailureReason(
      absl::FailedPreconditionError(absl::StrCat(
          "the drive at ", now.address.ToString(), " has ", say(serial), ", not the ",
          say(reported->serial), " pdc-extender was told of: it was swapped or the bus "
          "renumbered since the report, or its identity cannot be read; not bound until "
          "pdc-extender has the new inventory")),
      kReasonDriveChanged);
}

void Reconciler::Apply(const NodeAllocations& allocations, PassResult* result) {
  std::set<PciAddress> claimed;
  std::map<int32_t, std::vector<PciAddress>> by_group;
  std::map<PciAddress, std::string> expected;
  for (const NodeAllocation& c : allocations.claimed) {
    claimed.insert(c.address);
    expected[c.address] = std::string(kVfioPci);
    auto info = ReadPciFunction(*sys_, c.address);
    if (!info.ok()) {
      NoteError(c.address.ToString(), info.status(), "bind", result);
      continue;
    }
    if (absl::Status same = SameDriveAsReported(*info); !same.ok()) {
      NoteError(c.address.ToString(), same, "bind", result);
      continue;
    }
    // A device without a group is bound alone and refused with its reason.
    const int32_t key = info->iommu_group >= 0 ? info->iommu_group : -1 - static_cast<int32_t>(c.address.packed() & 0x7fffffff);
    by_group[key].push_back(c.address);
  }
  expected_driver_ = std::move(expected);
  LogMovedClaims(allocations);
  for (const auto& [group, addresses] : by_group) {
    const std::string key = group >= 0 ? absl::StrCat("iommu group ", group) : addresses[0].ToString();
    Stopwatch sw(clock_);
    auto out = binder_->Bind(addresses);
    if (!out.ok()) {
      NoteError(key, out.status(), "bind", result);
      continue;
    }
    last_error_.erase(key);
    if (*out == BindOutcome::kBound) {
      result->bound += static_cast<int>(addresses.size());
      spdlog::info("bound {} device(s) of {} to vfio-pci in {}", addresses.size(), key,
                   absl::FormatDuration(sw.Elapsed()));
      if (metrics_) {
        metrics_->binds->WithLabels({"bound"})->Increment(static_cast<double>(addresses.size()));
        metrics_->bind_seconds->ObserveDuration(sw.Elapsed());
      }
    } else if (metrics_) {
      metrics_->binds->WithLabels({"already_bound"})->Increment(static_cast<double>(addresses.size()));
    }
  }
  for (PciAddress a : allocations.return_to_host) {
    if (claimed.contains(a)) continue;  // Claimed again since: keep it.
    ReturnToHost(a, result);
  }
  // Erases the extender no longer lists were acknowledged (or never
  // needed): their `returned` entries go.
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state != JournalState::kReturned ||
        std::binary_search(allocations.return_to_host.begin(), allocations.return_to_host.end(),
                           e.address)) {
      continue;
    }
    if (absl::Status s = binder_->ForgetReturned(e.address); !s.ok()) {
      NoteError(e.address.ToString(), s, "restore", result);
    }
  }
  RunPendingErases(claimed, result);
  std::sort(result->errors.begin(), result->errors.end());
}

void Reconciler::ReturnToHost(PciAddress a, PassResult* result) {
  const std::string key = a.ToString();
  auto info = ReadPciFunction(*sys_, a);
  if (absl::IsNotFound(info.status())) return;  // Not here now: handed back when it is.
  if (!info.ok()) {
    NoteError(key, info.status(), "restore", result);
    return;
  }
  std::optional<JournalEntry> entry = journal_->Get(a);
  // Handed back already; waiting for the extender to see the acknowledgement.
  if (entry && entry->state == JournalState::kReturned) {
    // Erased on vfio-pci, where handing it to nvme failed: again.
    if (info->driver == kVfioPci) {
      if (absl::Status s = binder_->ReturnErased(a); !s.ok()) NoteError(key, s, "restore", result);
    }
    return;
  }
  const DeviceKind& kind = KindOf(*info);
  if (kind.ScrubsOnReclaim() || (entry && KindScrubbingOn(entry->original_driver) != nullptr)) {
    // Journaled before anything moves; RunPendingErases does the rest.
    auto pending = binder_->MarkErasePending(a);
    if (!pending.ok()) NoteError(key, pending.status(), "erase", result);
    if (pending.ok() && !*pending && metrics_) {
      metrics_->restores->WithLabels({"already_restored"})->Increment();
    }
    return;
  }
  Stopwatch sw(clock_);
  auto out = binder_->Restore(a);
  if (!out.ok()) {
    NoteError(key, out.status(), "restore", result);
    return;
  }
  // A class pdc-node does not erase is done once it is back: acknowledged
  // (by its serial, else its address) until the extender drops it.
  auto back = ReadPciFunction(*sys_, a);
  absl::Status acked = journal_->Put(JournalEntry{
      a, JournalState::kReturned, entry ? entry->original_driver : std::string(),
      back.ok() ? back->serial : std::string()});
  if (!acked.ok()) {
    NoteError(key, WithFailureReason(acked, kReasonJournal), "restore", result);
    return;
  }
  last_error_.erase(key);
  if (*out == RestoreOutcome::kRestored) {
    ++result->restored;
    const std::string driver = entry && !entry->original_driver.empty()
                                   ? entry->original_driver
                                   : std::string("its host driver");
    spdlog::warn(
        "handed {} (class {:06x}) back to {} in {} WITHOUT erasing it: its device kind ({}) "
        "has no scrub; whatever the previous VM left on this device stays there",
        key, info->class_code, driver, absl::FormatDuration(sw.Elapsed()), kind.name());
    if (metrics_) {
      metrics_->restores->WithLabels({"restored"})->Increment();
      metrics_->restore_seconds->ObserveDuration(sw.Elapsed());
      metrics_->erases->WithLabels({"not_supported"})->Increment();
    }
  } else if (metrics_) {
    metrics_->restores->WithLabels({"already_restored"})->Increment();
  }
}

void Reconciler::RunPendingErases(const std::set<PciAddress>& claimed, PassResult* result) {
  int pending = 0;
  for (const JournalEntry& e : journal_->Entries()) {
    if (e.state != JournalState::kErasing) continue;
    ++pending;
    auto& retry = erase_retry_[e.address];
    if (claimed.contains(e.address)) {
      // The binder refuses it; the allocator should not have offered it.
      continue;
    }
    if (clock_->Now() < retry.next) {
      result->errors.push_back(absl::StrCat(
          e.address.ToString(), ": erase pending, retried in ",
          absl::FormatDuration(retry.next - clock_->Now()), " (", retry.message, ")"));
      continue;
    }
    PciAddress at = e.address;
    if (!FollowErase(e, claimed, &at, result)) continue;
    EraseOne(at, result);
    auto now = journal_->Get(at);
    if (!now || now->state != JournalState::kErasing) --pending;
  }
  for (auto it = erase_retry_.begin(); it != erase_retry_.end();) {
    auto e = journal_->Get(it->first);
    it = e && e->state == JournalState::kErasing ? std::next(it) : erase_retry_.erase(it);
  }
  if (metrics_) metrics_->erases_pending->Set(pending);
}

bool Reconciler::FollowErase(const JournalEntry& e, const std::set<PciAddress>& claimed,
                             PciAddress* at, PassResult* result) {
  *at = e.address;
  if (e.serial.empty() || !last_discovered_) return true;  // The erase refuses it.
  const Device* here = nullptr;
  const Device* there = nullptr;
  for (const Device& d : last_discovered_->devices) {
    if (d.address == e.address) here = &d;
    if (d.address != e.address && d.serial == e.serial && d.driver != kVfioPci) there = &d;
  }
  // Its drive shows its serial at another address (a renumbering moved it)
  // and another drive, or none, is at the journaled one: the erase follows
  // the drive, never the address.
  const bool gone_here = here == nullptr || (!here->serial.empty() && here->serial != e.serial);
  if (!gone_here || there == nullptr) return true;
  const std::string key = e.address.ToString();
  if (claimed.contains(there->address) || journal_->Get(there->address)) {
    NoteError(key,
              WithFailureReason(absl::FailedPreconditionError(absl::StrCat(
                                    "the drive whose erase is pending (serial ", e.serial,
                                    ") is now at ", there->address.ToString(),
                                    ", which pdc also holds for something else; held until an "
                                    "administrator sorts them out")),
                                kReasonDriveChanged),
              "erase", result);
    return false;
  }
  if (absl::Status s = binder_->MoveErase(e.address, there->address); !s.ok()) {
    NoteError(key, s, "erase", result);
    return false;
  }
  // The drive now at the old address is another one: nothing of the
  // deleted claim is on it, so it is acknowledged (the extender's return
  // list is by address and holds it until then).
  if (here != nullptr && !here->serial.empty()) {
    absl::Status s = journal_->Put(JournalEntry{e.address, JournalState::kReturned, "",
                                                here->serial});
    if (!s.ok()) NoteError(key, WithFailureReason(s, kReasonJournal), "erase", result);
  }
  spdlog::warn("the drive whose erase was pending at {} (serial {}) is now at {}: erasing it "
               "there; {} is another drive and is left alone",
               key, e.serial, there->address.ToString(), key);
  erase_retry_.erase(e.address);
  *at = there->address;
  return true;
}

void Reconciler::EraseOne(PciAddress a, PassResult* result) {
  const std::string key = a.ToString();
  Stopwatch sw(clock_);
  EraseReturnOptions eo = options_.erase;
  eo.clock = clock_;
  eo.erase.before_command = [this](absl::Duration timeout) {
    busy_until_unix_nanos_ = absl::ToUnixNanos(clock_->Now() + timeout + options_.heartbeat);
  };
  // The kind that scrubs it: by its class, or by the driver it came from
  // when the function at the address is not of a scrubbing kind now.
  const DeviceKind* kind = nullptr;
  if (auto info = ReadPciFunction(*sys_, a); info.ok() && KindOf(*info).ScrubsOnReclaim()) {
    kind = &KindOf(*info);
  } else if (auto e = journal_->Get(a)) {
    kind = KindScrubbingOn(e->original_driver);
  }
  const ScrubContext context{binder_, sys_, options_.nvme_admin, &eo};
  absl::StatusOr<ScrubReport> report =
      kind != nullptr
          ? kind->Scrub(context, a)
          : absl::StatusOr<ScrubReport>(WithFailureReason(
                absl::FailedPreconditionError(absl::StrCat(
                    "erasing ", key, ": the function at this address is of no device kind "
                    "that scrubs, nor was its original driver; the erase stays pending")),
                kReasonEraseUnsupported));
  busy_until_unix_nanos_ = 0;
  if (!report.ok()) {
    auto& retry = erase_retry_[a];
    retry.backoff =
        NextBackoff(retry.backoff, options_.erase_backoff_initial, options_.erase_backoff_max);
    retry.next = clock_->Now() + retry.backoff;
    retry.message = std::string(report.status().message());
    // Handing it back to nvme failed (a restore), or the erase itself did.
    const std::string reason = FailureReason(report.status());
    const bool erase_step = reason.starts_with("erase_") || reason == kReasonFirmwareChanged;
    NoteError(key, report.status(), erase_step ? "erase" : "restore", result);
    if (metrics_) {
      metrics_->erases->WithLabels({"failed"})->Increment();
      if (reason == kReasonFirmwareChanged) {
        metrics_->firmware_changes->WithLabels({"held"})->Increment();
      }
    }
    return;
  }
  for (const std::string& w : report->warnings) {
    spdlog::warn("{}", w);
    if (metrics_) metrics_->firmware_changes->WithLabels({"reported"})->Increment();
  }
  erase_retry_.erase(a);
  last_error_.erase(key);
  ++result->restored;
  ++result->erased;
  spdlog::info("erased {} ({}) and handed it back to its host driver in {}", key, report->what,
               absl::FormatDuration(sw.Elapsed()));
  if (metrics_) {
    metrics_->erases->WithLabels({"erased"})->Increment();
    metrics_->erase_seconds->ObserveDuration(sw.Elapsed());
    metrics_->restores->WithLabels({"restored"})->Increment();
    metrics_->restore_seconds->ObserveDuration(sw.Elapsed());
  }
}

absl::StatusOr<PassResult> Reconciler::RunOnce(absl::Duration wait) {
  PassResult result;
  auto finish = [&] {
    last_pass_unix_nanos_ = absl::ToUnixNanos(clock_->Now());
    if (metrics_) metrics_->passes->Increment();
  };
  // After a pass that failed, pdc-extender may be another process (a new
  // leader, a restart) that knows this node only from the claims: it gets
  // the inventory at once, not at the next heartbeat, and is asked for its
  // allocations from the start (its versions are its own). Any failure
  // below leaves resync_ set for the next pass.
  const bool resync = std::exchange(resync_, true);
  if (resync) since_ = 0;
  ASSIGN_OR_RETURN(NodeInventory inventory, Discover());
  const uint64_t before = reports_;
  if (absl::Status s = Report(inventory, resync); !s.ok()) {
    finish();
    return s;
  }
  result.reported = reports_ != before;
  auto allocations = api_->GetAllocations(options_.node, since_, wait);
  if (!allocations.ok()) {
    if (metrics_) metrics_->extender_errors->WithLabels({"allocations"})->Increment();
    finish();
    return allocations.status();
  }
  since_ = allocations->version;
  if (options_.on_allocations) options_.on_allocations(*allocations);
  if (metrics_) metrics_->allocations_version->Set(static_cast<double>(since_));
  Apply(*allocations, &result);
  if (result.bound > 0 || result.restored > 0) {
    // Tell the extender at once: a returned device's new driver lets it drop
    // the returnToHost entry.
    ASSIGN_OR_RETURN(NodeInventory after, Discover());
    if (absl::Status s = Report(after, true); !s.ok()) {
      finish();
      return s;
    }
    result.reported = true;
  }
  resync_ = false;
  finish();
  return result;
}

void Reconciler::Run(absl::Notification* stop) {
  absl::Duration backoff = absl::ZeroDuration();
  while (!stop->HasBeenNotified()) {
    auto pass = RunOnce(std::min(options_.heartbeat, absl::Seconds(60)));
    if (pass.ok()) {
      if (backoff > absl::ZeroDuration()) spdlog::info("pdc-extender reachable again");
      backoff = absl::ZeroDuration();
      continue;
    }
    backoff = NextBackoff(backoff, options_.backoff_initial, options_.backoff_max);
    spdlog::warn("reconcile pass failed, devices left as they are, retrying in {}: {}",
                 absl::FormatDuration(backoff), pass.status().ToString());
    stop->WaitForNotificationWithTimeout(backoff);
  }
}

}  // namespace pdc::driver
