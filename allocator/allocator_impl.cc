#include "allocator/allocator_impl.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allocator/device_identity.h"
#include "allocator/snapshot_builder.h"
#include "allocator/validation.h"
#include "model/names.h"
#include "common/status_macros.h"

namespace pdc {
namespace {

absl::Status ValidateOptions(const AllocatorOptions& options) {
  RETURN_IF_ERROR(ValidateDeviceClasses(options.device_classes));
  if (options.node_stale_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("nodeStaleAfter: must be positive");
  }
  if (options.checkpoint_every_records == 0) {
    return absl::InvalidArgumentError("checkpointEveryRecords: must be at least 1");
  }
  if (options.checkpoint_every_bytes == 0) {
    return absl::InvalidArgumentError("checkpointLogBytes: must be at least 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateInventory(const NodeInventory& inv) {
  RETURN_IF_ERROR(model::ValidateObjectName("node", inv.node));
  if (inv.devices.size() > static_cast<size_t>(kMaxNodeDevices)) {
    return absl::InvalidArgumentError(absl::StrCat("devices: ", inv.devices.size(),
                                                   " devices; at most ", kMaxNodeDevices,
                                                   " per node"));
  }
  std::vector<PciAddress> seen;
  seen.reserve(inv.devices.size());
  for (size_t i = 0; i < inv.devices.size(); ++i) {
    const Device& d = inv.devices[i];
    const std::string field = absl::StrCat("devices[", i, "]");
    if (d.class_code > 0xffffff) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".class: more than 24 bits"));
    }
    if (d.iommu_group < -1) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".iommuGroup: ", d.iommu_group,
                                                     " (use -1 for none)"));
    }
    if (d.numa_node < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".numaNode: ", d.numa_node, " (use -1 for unknown)"));
    }
    if (d.serial.size() > 64 || d.driver.size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": serial or driver too long"));
    }
    seen.push_back(d.address);
  }
  std::sort(seen.begin(), seen.end());
  auto dup = std::adjacent_find(seen.begin(), seen.end());
  if (dup != seen.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("devices: address ", dup->ToString(), " is listed twice"));
  }
  return absl::OkStatus();
}

// The node reports another serial where a Released device was (both known).
bool SerialChanged(const ReleasedDevice& r, const NodeInventory& inv) {
  const Device* d = FindDevice(inv, r.address);
  return d != nullptr && !r.serial.empty() && !d->serial.empty() && d->serial != r.serial;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Allocator>> Allocator::Open(AllocatorOptions options,
                                                           Store* store, const Clock* clock,
                                                           RecoveryReport* report) {
  RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<AllocatorImpl>(std::move(options), store, clock);
  RETURN_IF_ERROR(impl->Recover(report));
  return std::unique_ptr<Allocator>(std::move(impl));
}

AllocatorImpl::SharedMessages::SharedMessages(const AllocatorOptions& options)
    : never_reported("no pdc node driver has reported devices from this node"),
      silent_since_start("the pdc node driver on this node has not reported since pdc-extender "
                         "started"),
      silent(absl::StrCat("the pdc node driver on this node has not reported for more than ",
                          absl::FormatDuration(options.node_stale_after))) {}

AllocatorImpl::AllocatorImpl(AllocatorOptions options, Store* store, const Clock* clock)
    : options_(std::move(options)),
      messages_(options_),
      store_(store),
      clock_(clock),
      state_(options_.device_classes) {}

absl::Status AllocatorImpl::Recover(RecoveryReport* report) {
  absl::MutexLock lock(&mu_);
  state_.BeginDeferredSummaries();
  ASSIGN_OR_RETURN(RecoveryReport r, store_->Recover([this](const Record& record) {
    mu_.AssertHeld();
    return state_.Apply(record);
  }));
  state_.EndDeferredSummaries();
  checkpoint_revision_ = r.snapshot_revision;
  if (std::string bad = state_.CheckInvariants(); !bad.empty()) {
    return absl::DataLossError(absl::StrCat("recovered state is inconsistent: ", bad));
  }
  if (report != nullptr) *report = r;
  return absl::OkStatus();
}

absl::Status AllocatorImpl::FailedLocked() const {
  if (!failed_.ok()) return failed_;
  return absl::OkStatus();
}

absl::StatusOr<AllocatorImpl::Commit> AllocatorImpl::CommitLocked(
    std::vector<Mutation> mutations) {
  RETURN_IF_ERROR(FailedLocked());
  Record record;
  record.revision = state_.revision() + 1;
  record.mutations = std::move(mutations);
  Commit commit;
  ASSIGN_OR_RETURN(commit.ticket, store_->Append(record));
  last_ticket_ = commit.ticket;
  const uint64_t revision = record.revision;
  if (absl::Status s = state_.Apply(std::move(record), &commit.nodes); !s.ok()) {
    // The record is in the log but not in memory: a bug. Stop mutating.
    failed_ = absl::InternalError(absl::StrCat("applying record ", revision, ": ",
                                               s.message()));
    return failed_;
  }
  return commit;
}

absl::Status AllocatorImpl::SyncOrFail(Commit commit) {
  absl::Status s = store_->Sync(commit.ticket);
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) {
      failed_ = absl::UnavailableError(absl::StrCat(
          "the store failed to persist a change (", s.message(),
          "); pdc stops accepting changes and must be restarted to recover from disk"));
    }
    return failed_;
  }
  if (listener_) {
    Change change;
    change.revision = revision();
    change.nodes = std::move(commit.nodes);
    change.moves = std::move(commit.moves);
    listener_(change);
  }
  return absl::OkStatus();
}

absl::Status AllocatorImpl::AwaitDurable(Store::Ticket ticket) {
  if (ticket == 0) return absl::OkStatus();
  absl::Status s = store_->Sync(ticket);
  if (s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (failed_.ok()) {
    failed_ = absl::UnavailableError(absl::StrCat(
        "the store failed to persist a change (", s.message(),
        "); pdc stops accepting changes and must be restarted to recover from disk"));
  }
  return failed_;
}

absl::Status AllocatorImpl::AwaitReadsDurable() const {
  Store::Ticket ticket = 0;
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(FailedLocked());
    ticket = last_ticket_;
  }
  // Records are appended in revision order and Sync covers every earlier
  // one: the last ticket at the call covers all the reader saw.
  if (ticket == 0) return absl::OkStatus();
  return store_->Sync(ticket);
}

void AllocatorImpl::SetChangeListener(ChangeListener listener) {
  listener_ = std::move(listener);
}

absl::Status AllocatorImpl::ReplaceInventory(NodeInventory inventory) {
  RETURN_IF_ERROR(ValidateInventory(inventory));
  std::vector<Device> kept;
  kept.reserve(inventory.devices.size());
  Commit commit;
  {
    MutationLock lock(this);
    for (Device& d : inventory.devices) {
      if (state_.Classify(d) == kNoClass) continue;
      // A reason only on an unhealthy device, and one on each: what the
      // record keeps, so memory and a recovered store agree.
      if (d.health == DeviceHealth::kHealthy) {
        d.unhealthy_reason = UnhealthyReason::kNone;
      } else if (d.unhealthy_reason == UnhealthyReason::kNone) {
        d.unhealthy_reason = UnhealthyReason::kUnspecified;
      }
      kept.push_back(std::move(d));
    }
    inventory.devices = std::move(kept);
    std::sort(inventory.devices.begin(), inventory.devices.end(),
              [](const Device& a, const Device& b) { return a.address < b.address; });
    // Acknowledgements are consumed here, never stored.
    std::vector<std::string> returned = std::move(inventory.returned);
    inventory.returned.clear();
    std::sort(returned.begin(), returned.end());
    const SerialIndex serials(inventory);
    RefuseDuplicateSerials(serials, inventory);
    const NodeState* node = state_.FindNode(inventory.node);
    NodeRecord next;
    next.inventory = inventory;
    std::vector<Mutation> mutations;
    std::vector<DeviceMove> moves;
    if (node != nullptr) {
      // A device leaves the return list only when the node acknowledges
      // that drive (its identity: serial, else address) as handed back —
      // erased, for a class pdc-node erases — and reports it on a host
      // driver and healthy. Being on a host driver is not enough: a reboot,
      // a lost journal or a manual rebind puts a drive there unerased. One
      // the node does not report now stays on it: it may come back on
      // vfio-pci with the deleted claim's data.
      for (PciAddress a : node->return_to_host) {
        const Device* d = FindDevice(inventory, a);
        const bool acknowledged =
            d != nullptr &&
            std::binary_search(returned.begin(), returned.end(),
                               d->serial.empty() ? a.ToString() : d->serial);
        if (!acknowledged || d->driver == "vfio-pci" || d->driver.empty() ||
            d->health != DeviceHealth::kHealthy) {
          next.return_to_host.push_back(a);
        }
      }
      // Claims and Released marks follow their drives by serial
      // (device_identity.h); a claim whose drive is not found turns Lost.
      std::vector<const ClaimEntry*> claims(node->claims.begin(), node->claims.end());
      std::sort(claims.begin(), claims.end(),
                [](const ClaimEntry* a, const ClaimEntry* b) { return a->key < b->key; });
      IdentityUpdate update =
          FollowDevices(inventory, serials, claims, node->released, next.return_to_host);
      next.released = std::move(update.released);
      for (Claim& c : update.claims) mutations.push_back(PutClaim{std::move(c)});
      moves = std::move(update.moves);
    }
    if (node == nullptr || !node->has_record || node->ToRecord() != next) {
      mutations.insert(mutations.begin(), PutNode{std::move(next)});
    }
    if (!mutations.empty()) {
      ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
      commit.moves = std::move(moves);
    }
    state_.SetLastReport(inventory.node, clock_->Now());
  }
  if (commit.ticket == 0) return absl::OkStatus();
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::RemoveNode(std::string_view name) {
  Commit commit;
  {
    MutationLock lock(this);
    const NodeState* node = state_.FindNode(name);
    if (node == nullptr || !node->has_record) {
      return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
    }
    std::vector<Mutation> mutations;
    if (node->released.empty() && node->return_to_host.empty()) {
      mutations.push_back(DeleteNode{std::string(name)});
    } else {
      // Released devices, and devices still to be erased and handed back,
      // keep their hold should the node come back with them: the node stays
      // known, with no devices, until then.
      NodeRecord rec;
      rec.inventory.node = std::string(name);
      rec.released = node->released;
      rec.return_to_host = node->return_to_host;
      mutations.push_back(PutNode{std::move(rec)});
    }
    std::vector<const ClaimEntry*> claims(node->claims.begin(), node->claims.end());
    std::sort(claims.begin(), claims.end(),
              [](const ClaimEntry* a, const ClaimEntry* b) { return a->key < b->key; });
    for (const ClaimEntry* c : claims) {
      if (c->phase != ClaimPhase::kBound) continue;
      Claim updated = c->ToClaim();
      updated.status.phase = ClaimPhase::kLost;
      updated.status.lost_reason = absl::StrCat("node ", Sv(name), " was removed");
      mutations.push_back(PutClaim{std::move(updated)});
    }
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  return SyncOrFail(std::move(commit));
}

absl::StatusOr<Claim> AllocatorImpl::CreateClaim(const ClaimKey& key, const ClaimSpec& spec,
                                                 std::string_view uid) {
  RETURN_IF_ERROR(ValidateClaimKey(key));
  RETURN_IF_ERROR(ValidateClaimSpec(spec, options_.device_classes));
  Claim claim;
  Commit commit;
  {
    MutationLock lock(this);
    if (state_.FindClaim(key) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("claim ", key.ToString(), " already exists"));
    }
    claim.key = key;
    claim.spec = spec;
    claim.created_revision = state_.revision() + 1;
    claim.uid = uid.empty() ? MakeClaimUid(key, claim.created_revision) : std::string(uid);
    ASSIGN_OR_RETURN(commit, CommitLocked({PutClaim{claim}}));
  }
  RETURN_IF_ERROR(SyncOrFail(std::move(commit)));
  return claim;
}

absl::StatusOr<Claim> AllocatorImpl::GetClaim(const ClaimKey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  const ClaimEntry* c = state_.FindClaim(key);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
  }
  return c->ToClaim();
}

std::vector<Claim> AllocatorImpl::ListClaims(std::string_view ns) const {
  std::vector<Claim> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const ClaimEntry& claim : state_.claims()) {
      if (ns.empty() || claim.key.ns == ns) out.push_back(claim.ToClaim());
    }
  }
  std::sort(out.begin(), out.end(), [](const Claim& a, const Claim& b) { return a.key < b.key; });
  return out;
}

absl::Status AllocatorImpl::DeleteClaim(const ClaimKey& key, bool force) {
  Commit commit;
  {
    MutationLock lock(this);
    const ClaimEntry* c = state_.FindClaim(key);
    if (c == nullptr) {
      return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
    }
    if (c->status.reserved_for && !force) {
      return absl::FailedPreconditionError(absl::StrCat(
          "claim ", key.ToString(), " is in use by VM ", c->status.reserved_for->vm, " (pod ",
          c->status.reserved_for->pod_name,
          "); stop the VM or release the claim first, or delete with force"));
    }
    std::vector<Mutation> mutations;
    mutations.push_back(pdc::DeleteClaim{key});
    const NodeState* node = state_.FindNode(c->status.node());
    if (c->reclaim_policy == ReclaimPolicy::kDelete && node != nullptr &&
        !c->status.devices.empty()) {
      // Every device goes on the return list, also one the node does not
      // report now: until it is back on its host driver (erased), it holds
      // the claim's data. Without a record (the node was removed) one with
      // no devices keeps the list.
      NodeRecord rec = node->has_record ? node->ToRecord() : NodeRecord{};
      rec.inventory.node = node->name;
      for (const BoundDevice& b : c->status.devices) rec.return_to_host.push_back(b.address);
      std::sort(rec.return_to_host.begin(), rec.return_to_host.end());
      rec.return_to_host.erase(std::unique(rec.return_to_host.begin(), rec.return_to_host.end()),
                               rec.return_to_host.end());
      mutations.push_back(PutNode{std::move(rec)});
    } else if (c->reclaim_policy == ReclaimPolicy::kRetain && node != nullptr &&
               !c->status.devices.empty()) {
      // The devices keep the claim's data: Released, also those the node
      // does not report now (they may come back). Without a record (the node
      // was removed) one with no devices keeps the marks.
      NodeRecord rec = node->has_record ? node->ToRecord() : NodeRecord{};
      rec.inventory.node = node->name;
      for (const BoundDevice& b : c->status.devices) {
        ReleasedDevice r{b.address, b.serial, key, c->uid()};
        if (SerialChanged(r, rec.inventory)) continue;  // Another drive is there now.
        std::erase_if(rec.released,
                      [&](const ReleasedDevice& x) { return x.address == b.address; });
        rec.released.push_back(std::move(r));
      }
      std::sort(rec.released.begin(), rec.released.end(),
                [](const ReleasedDevice& a, const ReleasedDevice& b) {
                  return a.address < b.address;
                });
      mutations.push_back(PutNode{std::move(rec)});
    }
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::SetReclaimPolicy(const ClaimKey& key, ReclaimPolicy policy) {
  Commit commit;
  {
    MutationLock lock(this);
    const ClaimEntry* c = state_.FindClaim(key);
    if (c == nullptr) {
      return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
    }
    if (c->reclaim_policy == policy) return absl::OkStatus();
    Claim updated = c->ToClaim();
    updated.spec.reclaim_policy = policy;
    ASSIGN_OR_RETURN(commit, CommitLocked({PutClaim{std::move(updated)}}));
  }
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::Release(const ClaimKey& key, std::string_view pod_uid) {
  Commit commit;
  {
    MutationLock lock(this);
    const ClaimEntry* c = state_.FindClaim(key);
    if (c == nullptr) {
      return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
    }
    if (!c->status.reserved_for) return absl::OkStatus();
    if (!pod_uid.empty() && c->status.reserved_for->pod_uid != pod_uid) {
      return absl::FailedPreconditionError(absl::StrCat(
          "claim ", key.ToString(), " is reserved by pod ", c->status.reserved_for->pod_uid,
          ", not ", Sv(pod_uid)));
    }
    Claim updated = c->ToClaim();
    updated.status.reserved_for.reset();
    ASSIGN_OR_RETURN(commit, CommitLocked({PutClaim{std::move(updated)}}));
  }
  return SyncOrFail(std::move(commit));
}

absl::StatusOr<std::vector<ClaimKey>> AllocatorImpl::ReleaseVm(std::string_view ns,
                                                               std::string_view vm_uid) {
  if (vm_uid.empty()) {
    return absl::InvalidArgumentError("VM uid: must not be empty to release a VM's claims");
  }
  std::vector<ClaimKey> keys;
  Commit commit;
  {
    MutationLock lock(this);
    RETURN_IF_ERROR(FailedLocked());
    std::vector<Mutation> mutations;
    for (const ClaimEntry& c : state_.claims()) {
      if (c.key.ns != ns || !c.status.reserved_for || c.status.reserved_for->vm_uid != vm_uid) {
        continue;
      }
      keys.push_back(c.key);
      Claim u = c.ToClaim();
      u.status.reserved_for.reset();
      mutations.push_back(PutClaim{std::move(u)});
    }
    if (mutations.empty()) return keys;
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  RETURN_IF_ERROR(SyncOrFail(std::move(commit)));
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<ReservingVm> AllocatorImpl::ReservingVms(std::string_view ns) const {
  // (namespace, UID) -> name; a UID names one VM, so any of its claims says
  // the name.
  std::map<std::pair<std::string, std::string>, std::string> vms;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const ClaimEntry& c : state_.claims()) {
      if (!ns.empty() && c.key.ns != ns) continue;
      const std::optional<Reservation>& r = c.status.reserved_for;
      if (r && !r->vm_uid.empty()) vms.try_emplace({c.key.ns, r->vm_uid}, r->vm);
    }
  }
  std::vector<ReservingVm> out;
  out.reserve(vms.size());
  for (auto& [key, name] : vms) out.push_back({key.first, key.second, std::move(name)});
  return out;
}

namespace {

// NotFound or FailedPrecondition when `node` has no Released mark at
// `address`, saying what the device is instead.
absl::Status NotReleased(const NodeState* node, std::string_view name, PciAddress address) {
  if (node == nullptr || !node->has_record) {
    return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
  }
  const DeviceSlot* slot = node->Find(address);
  if (slot == nullptr) {
    return absl::NotFoundError(absl::StrCat("node ", Sv(name), " has no device ",
                                            address.ToString(), " and no Released mark for it"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", address.ToString(), " on node ", Sv(name), " is not Released (it is ",
      slot->owner != nullptr ? "held by claim " + slot->owner->key.ToString()
      : slot->hold == DeviceHold::kReturning
          ? "waiting to be erased and returned to its host driver; an erase that will not "
            "finish is ended with pdcctl abandon-erase"
          : "free",
      ")"));
}

}  // namespace

absl::Status AllocatorImpl::ReleaseDevice(std::string_view name, PciAddress address) {
  Commit commit;
  {
    MutationLock lock(this);
    const NodeState* node = state_.FindNode(name);
    if (node == nullptr || !node->has_record || node->FindReleased(address) == nullptr) {
      return NotReleased(node, name, address);
    }
    NodeRecord rec = node->ToRecord();
    std::erase_if(rec.released, [&](const ReleasedDevice& r) { return r.address == address; });
    ASSIGN_OR_RETURN(commit, CommitLocked({PutNode{std::move(rec)}}));
  }
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::HandOverDevice(std::string_view name, PciAddress address,
                                           const ClaimKey& to) {
  if (to.ns.empty() || to.name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hand-over of device ", address.ToString(), " on node ", Sv(name),
        ": the claim must be namespace/name, got \"", to.ToString(), "\""));
  }
  Commit commit;
  {
    MutationLock lock(this);
    const NodeState* node = state_.FindNode(name);
    if (node == nullptr || !node->has_record || node->FindReleased(address) == nullptr) {
      return NotReleased(node, name, address);
    }
    NodeRecord rec = node->ToRecord();
    for (ReleasedDevice& r : rec.released) {
      if (r.address != address) continue;
      r.claim = to;
      r.claim_uid.clear();
    }
    ASSIGN_OR_RETURN(commit, CommitLocked({PutNode{std::move(rec)}}));
  }
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::AbandonErase(std::string_view name, PciAddress address) {
  Commit commit;
  {
    MutationLock lock(this);
    const NodeState* node = state_.FindNode(name);
    if (node == nullptr) {
      return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
    }
    NodeRecord rec = node->has_record ? node->ToRecord() : NodeRecord{};
    rec.inventory.node = node->name;
    const auto it = std::find(rec.return_to_host.begin(), rec.return_to_host.end(), address);
    if (it == rec.return_to_host.end()) {
      const DeviceSlot* slot = node->Find(address);
      if (slot == nullptr && node->FindReleased(address) == nullptr) {
        return absl::NotFoundError(absl::StrCat("node ", Sv(name), " has no device ",
                                                address.ToString(), " waiting to be erased"));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", address.ToString(), " on node ", Sv(name),
          " is not waiting to be erased and returned to its host driver (it is ",
          node->FindReleased(address) != nullptr ? "Released"
          : slot->owner != nullptr               ? "held by claim " + slot->owner->key.ToString()
                                                 : "free",
          ")"));
    }
    rec.return_to_host.erase(it);
    // The serial the device has now, if the node reports it: the mark
    // follows its drive (a different drive at the address drops it).
    std::string serial;
    if (const DeviceSlot* slot = node->Find(address); slot != nullptr) {
      serial = slot->device.serial;
    }
    std::erase_if(rec.released, [&](const ReleasedDevice& r) { return r.address == address; });
    rec.released.push_back(ReleasedDevice{address, std::move(serial), ClaimKey{}, ""});
    std::sort(rec.released.begin(), rec.released.end(),
              [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
    ASSIGN_OR_RETURN(commit, CommitLocked({PutNode{std::move(rec)}}));
  }
  return SyncOrFail(std::move(commit));
}

absl::Status AllocatorImpl::ReclaimWithheld(const ClaimKey& key, std::string_view uid,
                                            std::string_view name,
                                            const std::vector<BoundDevice>& own,
                                            const std::vector<PciAddress>& shared,
                                            ReclaimPolicy policy) {
  Commit commit;
  {
    MutationLock lock(this);
    if (state_.FindClaim(key) != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "claim ", key.ToString(), " is taken up; it is deleted as any claim"));
    }
    const NodeState* node = state_.FindNode(name);
    if (node == nullptr) {
      return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
    }
    NodeRecord rec = node->has_record ? node->ToRecord() : NodeRecord{};
    rec.inventory.node = node->name;
    auto mark = [&](PciAddress a, std::string serial, ClaimKey claim, std::string claim_uid) {
      std::erase_if(rec.released, [&](const ReleasedDevice& r) { return r.address == a; });
      rec.released.push_back(
          ReleasedDevice{a, std::move(serial), std::move(claim), std::move(claim_uid)});
    };
    for (const BoundDevice& b : own) {
      if (policy == ReclaimPolicy::kDelete) {
        std::erase_if(rec.released, [&](const ReleasedDevice& r) { return r.address == b.address; });
        if (std::find(rec.return_to_host.begin(), rec.return_to_host.end(), b.address) ==
            rec.return_to_host.end()) {
          rec.return_to_host.push_back(b.address);
        }
      } else {
        mark(b.address, b.serial, key, std::string(uid));
      }
    }
    for (PciAddress a : shared) {
      const ReleasedDevice* r = node->FindReleased(a);
      mark(a, r != nullptr ? r->serial : std::string(), ClaimKey{}, "");
    }
    std::sort(rec.return_to_host.begin(), rec.return_to_host.end());
    std::sort(rec.released.begin(), rec.released.end(),
              [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
    std::vector<Mutation> mutations;
    mutations.push_back(pdc::DeleteClaim{key});
    mutations.push_back(PutNode{std::move(rec)});
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  return SyncOrFail(std::move(commit));
}

bool AllocatorImpl::ReportingLocked(const NodeState& node, absl::Time now) const {
  return node.has_record && now - node.last_report <= options_.node_stale_after;
}

NodeView AllocatorImpl::ViewLocked(const NodeState& node, absl::Time now) const {
  NodeView v;
  v.name = node.name;
  v.inventory = node.ToRecord().inventory;
  v.reporting = ReportingLocked(node, now);
  v.last_report = node.last_report;
  v.return_to_host = node.return_to_host;
  v.released = node.released;
  return v;
}

absl::StatusOr<NodeView> AllocatorImpl::GetNode(std::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  const NodeState* node = state_.FindNode(name);
  if (node == nullptr || !node->has_record) {
    return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
  }
  return ViewLocked(*node, clock_->Now());
}

std::vector<NodeView> AllocatorImpl::ListNodes() const {
  std::vector<NodeView> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (const auto& [name, node] : state_.nodes()) {
      if (node.has_record) out.push_back(ViewLocked(node, now));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const NodeView& a, const NodeView& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<NodeAllocations> AllocatorImpl::GetNodeAllocations(std::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  const NodeState* node = state_.FindNode(name);
  if (node == nullptr) {
    return absl::NotFoundError(absl::StrCat("node ", Sv(name), " is not known"));
  }
  NodeAllocations out;
  out.version = node->version;
  out.return_to_host = node->return_to_host;
  for (const DeviceSlot& s : node->devices) {
    if (s.owner == nullptr || s.owner->phase != ClaimPhase::kBound) continue;
    out.claimed.push_back(NodeAllocation{s.device.address, s.owner->key,
                                         s.owner->spec.resource_name(),
                                         s.owner->reclaim_policy,
                                         s.owner->status.reserved_for,
                                         s.owner->status.HandoffPending()});
  }
  // Each reserved device's place among its pod's devices of the resource.
  struct Ranked {
    const std::string* pod_uid;
    const std::string* resource;
    HandoffPosition position;
    size_t index;  // Into out.claimed.
  };
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < out.claimed.size(); ++i) {
    const NodeAllocation& a = out.claimed[i];
    if (!a.reserved_for) continue;
    const DeviceSlot* s = node->Find(a.address);
    ranked.push_back(Ranked{&a.reserved_for->pod_uid, &a.resource_name,
                            HandoffPosition{a.reserved_for->claim_rank, a.claim,
                                            s->device.serial, a.address},
                            i});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (*a.pod_uid != *b.pod_uid) return *a.pod_uid < *b.pod_uid;
    if (*a.resource != *b.resource) return *a.resource < *b.resource;
    return HandoffOrderLess(a.position, b.position);
  });
  for (size_t i = 0, k = 0; i < ranked.size(); ++i) {
    k = i > 0 && *ranked[i].pod_uid == *ranked[i - 1].pod_uid &&
                *ranked[i].resource == *ranked[i - 1].resource
            ? k + 1
            : 0;
    out.claimed[ranked[i].index].handoff_index = static_cast<uint32_t>(k);
  }
  return out;
}

AllocatorStats AllocatorImpl::Stats() const {
  absl::ReaderMutexLock lock(&mu_);
  AllocatorStats s;
  s.revision = state_.revision();
  const absl::Time now = clock_->Now();
  for (const auto& [name, node] : state_.nodes()) {
    if (!node.has_record) continue;
    ++s.nodes;
    if (!ReportingLocked(node, now)) ++s.nodes_not_reporting;
    for (const DeviceSlot& d : node.devices) {
      if (d.owner != nullptr) {
        ++s.devices_allocated;
      } else if (d.hold == DeviceHold::kReleased) {
        ++s.devices_released;
      } else if (d.hold == DeviceHold::kReturning) {
        ++s.devices_returning;
      } else if (d.device.health != DeviceHealth::kHealthy || d.device.iommu_group < 0) {
        ++s.devices_unhealthy;
      } else {
        ++s.devices_free;
      }
    }
  }
  s.claims_pending = state_.ClaimsIn(ClaimPhase::kPending);
  s.claims_bound = state_.ClaimsIn(ClaimPhase::kBound);
  s.claims_lost = state_.ClaimsIn(ClaimPhase::kLost);
  return s;
}

uint64_t AllocatorImpl::revision() const {
  absl::ReaderMutexLock lock(&mu_);
  return state_.revision();
}

absl::Status AllocatorImpl::Checkpoint() {
  absl::MutexLock checkpoint_lock(&checkpoint_mu_);
  std::optional<SnapshotBuilder> builder;
  {
    // The cut: the revision, the store's log cut at it, and the claims and
    // nodes the snapshot holds. Brief, but exclusive: it opens the cut's
    // copy-on-write (ClusterState::BeginCut).
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(FailedLocked());
    if (state_.revision() == checkpoint_revision_) return absl::OkStatus();
    RETURN_IF_ERROR(store_->BeginCheckpoint(state_.revision()));
    builder.emplace(state_.BeginCut());
  }
  // The encode, a chunk at a time under the lock held shared: filters and
  // reads go on throughout, and a mutation waits for one chunk at most. It
  // then changes the state, and the chunks after it still read every item
  // as it was at the cut.
  if (between_chunks_) between_chunks_();
  while (!builder->Done()) {
    {
      absl::ReaderMutexLock lock(&mu_);
      builder->EncodeSome(state_, checkpoint_chunk_);
    }
    LetWaitingMutationsThrough();
    if (between_chunks_) between_chunks_();
  }
  // Destroyed after the lock is released: they may be thousands of claims.
  ClusterState::CutImages images;
  {
    absl::MutexLock lock(&mu_);
    images = state_.EndCut();
  }
  images = {};
  const uint64_t revision = builder->revision();
  const std::string snapshot = std::move(*builder).Finish();
  RETURN_IF_ERROR(store_->WriteEncodedCheckpoint(revision, snapshot));
  // Only a written snapshot counts: after a failed one the next call writes
  // again even when nothing changed since.
  absl::MutexLock lock(&mu_);
  checkpoint_revision_ = revision;
  return absl::OkStatus();
}

void AllocatorImpl::CountMutation(bool served) {
  absl::MutexLock lock(&turn_mu_);
  if (!served) {
    ++mutations_asking_;
    return;
  }
  ++mutations_served_;
  turn_taken_.SignalAll();
}

void AllocatorImpl::LetWaitingMutationsThrough() {
  absl::MutexLock lock(&turn_mu_);
  const uint64_t asking = mutations_asking_;
  while (mutations_served_ < asking) turn_taken_.Wait(&turn_mu_);
}

Record AllocatorImpl::SnapshotForTest() const {
  absl::ReaderMutexLock lock(&mu_);
  return state_.Snapshot();
}

void AllocatorImpl::SetCheckpointChunkForTest(size_t items,
                                              std::function<void()> between_chunks) {
  absl::MutexLock checkpoint_lock(&checkpoint_mu_);
  checkpoint_chunk_ = items;
  between_chunks_ = std::move(between_chunks);
}

bool AllocatorImpl::CheckpointDue() const {
  return store_->RecordsSinceCheckpoint() >= options_.checkpoint_every_records ||
         store_->BytesSinceCheckpoint() >= options_.checkpoint_every_bytes;
}

absl::Status AllocatorImpl::Health() const {
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(FailedLocked());
  }
  return store_->Health();
}

std::string AllocatorImpl::CheckInvariantsForTest() const {
  absl::ReaderMutexLock lock(&mu_);
  return state_.CheckInvariants();
}

}  // namespace pdc
