#include "extender/kube_api_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace {

// A deleted claim whose devices were on their way back to their host
// driver when pdc last wrote it: not a claim any more.
bool IsReclaimingObject(const api::ClaimObject& o) {
  return o.meta.deleting && api::IsReclaiming(o.conditions);
}

}  // namespace

KubeApiStore::KubeApiStore(kube::KubeApi* api, Options options)
    : options_(std::move(options)),
      calls_(api, StoreCalls::Options{options_.call_timeout, options_.write_deadline,
                                      options_.list_page, options_.clock, options_.may_write}),
      objects_(&calls_, ClaimObjects::Options{options_.owner_of, options_.on_status,
                                              [this](const ClaimKey& key, std::string_view uid) {
                                                Forgotten(key, uid);
                                              }}),
      reclaims_(&objects_, options_.clock),
      holds_(&calls_, options_.holds_namespace) {}

// --- Recovery ----------------------------------------------------------------

absl::StatusOr<RecoveryReport> KubeApiStore::Recover(const RecordVisitor& apply) {
  absl::MutexLock write_lock(&write_mu_);
  std::vector<api::ClaimObject> objects;
  RETURN_IF_ERROR(objects_.List(&objects));
  absl::flat_hash_map<std::string, Holds> holds;
  RETURN_IF_ERROR(holds_.List(&holds));

  // Which claims' status names each device.
  std::map<std::pair<std::string, PciAddress>, std::vector<const api::ClaimObject*>> owners;
  for (const api::ClaimObject& o : objects) {
    if (!HoldsDevices(o.claim) || IsReclaimingObject(o)) continue;
    for (const BoundDevice& d : o.claim.status.devices) {
      owners[{o.claim.status.node, d.address}].push_back(&o);
    }
  }
  absl::flat_hash_map<ClaimKey, bool> conflicted;
  std::vector<ClaimConflict> conflicts;
  for (auto& [where, claims] : owners) {
    if (claims.size() < 2) continue;
    ClaimConflict c{where.first, where.second, {}};
    for (const api::ClaimObject* o : claims) {
      c.claims.push_back(o->claim.key);
      conflicted[o->claim.key] = true;
    }
    std::sort(c.claims.begin(), c.claims.end());
    spdlog::error(
        "device {} on node {} is in the status of {} claims ({}, ...): pdc "
        "uses it "
        "for none of them until an administrator deletes the wrong claims",
        where.second.ToString(), where.first, claims.size(), c.claims.front().ToString());
    conflicts.push_back(std::move(c));
  }
  // Objects that cannot be taken as they are (a spec that does not read, or
  // one that contradicts its status: edited after the bind) are withheld
  // the same way, each on its own: one object never stops the start.
  std::vector<WithheldObject> invalid;
  for (const api::ClaimObject& o : objects) {
    if (!HoldsDevices(o.claim) || IsReclaimingObject(o) || conflicted.contains(o.claim.key)) {
      continue;
    }
    WithheldObject w{o.claim.key, o.meta.uid, "", ""};
    if (!o.spec_problem.empty()) {
      w.reason = o.has_status ? "SpecUnreadable" : "StatusUnreadable";
      w.message = o.spec_problem;
    } else if (std::string why = ClaimContradiction(o.claim); !why.empty()) {
      w.reason = "SpecContradictsStatus";
      w.message = std::move(why);
    } else {
      continue;
    }
    w.message = absl::StrCat(w.message,
                             ": pdc keeps the claim's devices and uses them for no "
                             "claim; delete the claim (its reclaim policy applies) "
                             "and create it again as it should be");
    spdlog::error("claim {} is withheld: {}", o.claim.key.ToString(), w.message);
    conflicted[o.claim.key] = true;
    invalid.push_back(std::move(w));
  }

  // The snapshot: holds first, a claim's devices winning over a hold of the
  // same device (a crash between the two writes of a delete or of a pinned
  // bind); conflicted claims left out, their devices held as Released.
  for (const api::ClaimObject& o : objects) {
    if (!HoldsDevices(o.claim) || conflicted.contains(o.claim.key) || IsReclaimingObject(o)) {
      continue;
    }
    auto it = holds.find(o.claim.status.node);
    if (it == holds.end()) continue;
    for (const BoundDevice& d : o.claim.status.devices) {
      auto& ret = it->second.return_to_host;
      ret.erase(std::remove(ret.begin(), ret.end(), d.address), ret.end());
      auto& rel = it->second.released;
      rel.erase(std::remove_if(rel.begin(), rel.end(),
                               [&](const ReleasedDevice& r) { return r.address == d.address; }),
                rel.end());
    }
  }
  // Every device of a claim in conflict holds that claim's data, the ones
  // no other claim names too: all are held Released.
  for (const api::ClaimObject& o : objects) {
    if (!conflicted.contains(o.claim.key)) continue;
    Holds& h = holds[o.claim.status.node];
    for (const BoundDevice& d : o.claim.status.devices) {
      auto held = std::find_if(h.released.begin(), h.released.end(),
                               [&](const ReleasedDevice& r) { return r.address == d.address; });
      if (held == h.released.end()) {
        h.released.push_back(ReleasedDevice{d.address, d.serial, o.claim.key, o.claim.uid});
      } else if (held->claim.ns != o.claim.key.ns) {
        // Named by claims of two namespaces: its data may be either's, so
        // no claim may pin it; only an administrator decides.
        held->claim = ClaimKey{};
        held->claim_uid.clear();
      }
    }
    std::sort(
        h.released.begin(), h.released.end(),
        [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
  }
  // Deleted claims waiting for their devices to be erased: the devices
  // still on the holds' way back to the host driver.
  absl::flat_hash_map<ClaimKey, ClaimReclaims::Reclaim> reclaims;
  for (const api::ClaimObject& o : objects) {
    if (!IsReclaimingObject(o)) continue;
    ClaimReclaims::Reclaim& r = reclaims[o.claim.key];
    r.uid = o.meta.uid;
    r.node = o.claim.status.node;
    auto it = holds.find(r.node);
    if (it == holds.end()) continue;
    for (const BoundDevice& d : o.claim.status.devices) r.devices.push_back(d.address);
    r.devices = NodeHoldsObjects::Returning(r.devices, it->second);
  }

  // Revisions only grow, also across restarts (pdc-node's long-polls
  // compare them): start from the wall clock in microseconds.
  Record snapshot;
  snapshot.revision =
      std::max<uint64_t>(1, static_cast<uint64_t>(absl::ToUnixMicros(options_.clock->Now())));
  // Inventories are not stored: until a node's driver reports, its
  // inventory is what the Bound claims' status says of their devices.
  std::map<std::string, NodeRecord> records;
  for (auto& [node, h] : holds) {
    if (h.empty()) continue;
    NodeRecord& r = records[node];
    r.inventory.node = node;
    r.return_to_host = std::move(h.return_to_host);
    r.released = std::move(h.released);
  }
  facts_.clear();
  conflicted_.clear();
  held_.clear();
  withheld_reclaimed_.clear();
  for (const api::ClaimObject& o : objects) {
    const ClaimStatus& st = o.claim.status;
    if (conflicted.contains(o.claim.key)) conflicted_[o.claim.key] = o.claim;
    if (st.phase != ClaimPhase::kBound || conflicted.contains(o.claim.key) ||
        reclaims.contains(o.claim.key)) {
      continue;
    }
    NodeRecord& r = records[st.node];
    r.inventory.node = st.node;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      Device dev;
      dev.address = st.devices[i].address;
      dev.serial = st.devices[i].serial;
      if (i < o.device_facts.size()) {
        dev.iommu_group = o.device_facts[i].iommu_group;
        dev.numa_node = o.device_facts[i].numa_node;
      }
      r.inventory.devices.push_back(std::move(dev));
    }
  }
  std::vector<std::string> nodes;
  for (auto& [node, r] : records) {
    std::sort(r.inventory.devices.begin(), r.inventory.devices.end(),
              [](const Device& a, const Device& b) { return a.address < b.address; });
    nodes.push_back(node);
    LearnFacts(r.inventory);
    snapshot.mutations.push_back(PutNode{std::move(r)});
  }
  size_t claims = 0;
  for (const api::ClaimObject& o : objects) objects_.Restore(o);
  reclaims_.Restore(reclaims);
  {
    absl::MutexLock lock(&mu_);
    for (const api::ClaimObject& o : objects) {
      if (conflicted.contains(o.claim.key) || reclaims.contains(o.claim.key)) continue;
      held_[o.claim.key] = o.claim.uid;
      snapshot.mutations.push_back(PutClaim{o.claim});
      ++claims;
    }
    conflicts_ = conflicts;
    invalid_ = std::move(invalid);
    withheld_.clear();
    for (const auto& [key, yes] : conflicted) withheld_.insert(key);
  }
  if (!snapshot.mutations.empty()) RETURN_IF_ERROR(apply(snapshot));
  spdlog::info(
      "recovered {} claims and the holds of {} nodes from the Kubernetes API{}", claims,
      nodes.size(),
      conflicts.empty() ? "" : absl::StrCat("; ", conflicts.size(), " devices in conflict"));
  RecoveryReport report;
  report.snapshot_revision = snapshot.revision;
  report.last_revision = snapshot.revision;
  {
    absl::MutexLock lock(&mu_);
    appended_ = synced_ = 0;
  }
  return report;
}

// --- Writes ------------------------------------------------------------------

absl::StatusOr<Store::Ticket> KubeApiStore::Append(const Record& record) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  pending_.push_back(Pending{++appended_, record});
  return appended_;
}

absl::Status KubeApiStore::Sync(Ticket ticket) {
  absl::MutexLock write_lock(&write_mu_);
  std::vector<Pending> batch;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    if (synced_ >= ticket) return absl::OkStatus();
    batch.swap(pending_);
  }
  if (batch.empty()) return absl::OkStatus();
  const Ticket last = batch.back().ticket;
  absl::Status s = WriteBatch(std::move(batch));
  absl::Status failed;
  {
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      synced_ = last;
      return absl::OkStatus();
    }
    failed_ = absl::UnavailableError(
        absl::StrCat("the Kubernetes API did not record a change: ", s.message()));
    spdlog::error("{}", StdSv(failed_.message()));
    failed = failed_;
  }
  if (options_.on_failed) options_.on_failed(failed);
  return failed;
}

absl::Status KubeApiStore::Health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status KubeApiStore::WriteBatch(std::vector<Pending> batch) {
  // The net effect of the batch: the last state of each claim and node.
  std::map<ClaimKey, std::optional<Claim>> claims;
  // Of each claim let go, the allocator's UID ("" unknown).
  std::map<ClaimKey, std::string> dropped;
  std::map<std::string, Holds> nodes;
  for (Pending& p : batch) {
    for (Mutation& m : p.record.mutations) {
      if (auto* put = std::get_if<PutClaim>(&m)) {
        held_[put->claim.key] = put->claim.uid;
        claims[put->claim.key] = std::move(put->claim);
      } else if (auto* del = std::get_if<DeleteClaim>(&m)) {
        auto h = held_.find(del->key);
        dropped[del->key] = h != held_.end() ? h->second : "";
        if (h != held_.end()) held_.erase(h);
        claims[del->key] = std::nullopt;
      } else if (auto* node = std::get_if<PutNode>(&m)) {
        LearnFacts(node->node.inventory);
        nodes[node->node.inventory.node] =
            Holds{std::move(node->node.return_to_host), std::move(node->node.released)};
      } else if (auto* gone = std::get_if<DeleteNode>(&m)) {
        facts_.erase(gone->node);
        nodes[gone->node] = Holds{};
      }
    }
  }
  // Refused writes whose backoff is over, unless the batch writes a newer
  // state of their claim.
  const absl::Time now = options_.clock->Now();
  for (const auto& [key, r] : refused_) {
    if (claims.contains(key) || r.next_try > now) continue;
    claims[key] = r.claim;
    if (!r.claim.has_value()) dropped[key] = r.dropped_uid;
  }
  // 1. What holds gain.
  for (const auto& [node, h] : nodes) {
    Holds now = holds_.Persisted(node);
    Holds grown = now;
    for (PciAddress a : h.return_to_host) {
      if (std::find(grown.return_to_host.begin(), grown.return_to_host.end(), a) ==
          grown.return_to_host.end()) {
        grown.return_to_host.push_back(a);
      }
    }
    for (const ReleasedDevice& r : h.released) {
      auto it = std::find_if(grown.released.begin(), grown.released.end(),
                             [&](const ReleasedDevice& x) { return x.address == r.address; });
      if (it == grown.released.end()) {
        grown.released.push_back(r);
      } else {
        *it = r;
      }
    }
    std::sort(grown.return_to_host.begin(), grown.return_to_host.end());
    std::sort(
        grown.released.begin(), grown.released.end(),
        [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
    if (grown != now) RETURN_IF_ERROR(holds_.Write(node, grown));
  }
  // 2. Claims' statuses; 3. claims let go.
  for (const auto& [key, claim] : claims) {
    if (claim.has_value()) RETURN_IF_ERROR(Refusable(key, claim, "", WriteClaim(*claim)));
  }
  for (const auto& [key, claim] : claims) {
    if (!claim.has_value()) {
      RETURN_IF_ERROR(Refusable(key, claim, dropped[key], DropClaim(key, dropped[key], nodes)));
    }
  }
  // 4. What holds lose; 5. the finalizers of deleted claims whose devices
  // are back on their host driver now.
  for (const auto& [node, h] : nodes) {
    if (h != holds_.Persisted(node)) RETURN_IF_ERROR(holds_.Write(node, h));
  }
  std::set<std::string> changed;
  for (const auto& [node, h] : nodes) changed.insert(node);
  return reclaims_.Settle(reclaims_.On(changed), holds_);
}

absl::Status KubeApiStore::Refusable(const ClaimKey& key, const std::optional<Claim>& claim,
                                     std::string_view dropped_uid, absl::Status s) {
  if (s.ok()) {
    refused_.erase(key);
    return s;
  }
  if (!IsObjectRefusal(s)) return s;
  auto [it, added] = refused_.try_emplace(key);
  RefusedWrite& r = it->second;
  r.backoff = added ? options_.refused_retry : std::min(2 * r.backoff, options_.refused_retry_max);
  r.claim = claim;
  r.dropped_uid = std::string(dropped_uid);
  r.next_try = options_.clock->Now() + r.backoff;
  std::optional<ObjectState> st = objects_.Object(key);
  spdlog::warn(
      "claim {}: the Kubernetes API refused its write ({}); that claim's write is tried again "
      "in {}, the store goes on for the others",
      key.ToString(), StdSv(s.message()), absl::FormatDuration(r.backoff));
  if (options_.on_refused) {
    options_.on_refused(key, st.has_value() ? st->uid : "", claim, StdSv(s.message()));
  }
  return absl::OkStatus();
}

absl::Status KubeApiStore::RetryRefused() {
  absl::MutexLock write_lock(&write_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
  }
  if (refused_.empty()) return absl::OkStatus();
  return WriteBatch({});
}

bool KubeApiStore::Reclaiming(const ClaimKey& key) const { return reclaims_.Reclaiming(key); }

absl::Status KubeApiStore::SettleReclaim(const ClaimKey& key) {
  absl::MutexLock write_lock(&write_mu_);
  return reclaims_.Settle({key}, holds_);
}

void KubeApiStore::LearnFacts(const NodeInventory& inventory) {
  auto& facts = facts_[inventory.node];
  facts.clear();
  for (const Device& d : inventory.devices) {
    if (d.iommu_group < 0 && d.numa_node < 0) continue;
    facts.emplace_back(d.address, api::DeviceFacts{d.iommu_group, d.numa_node});
  }
  // Inventories are sorted by address (model/types.h); keep it so.
  std::sort(facts.begin(), facts.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  if (facts.empty()) facts_.erase(inventory.node);
}

std::vector<api::DeviceFacts> KubeApiStore::FactsOf(const ClaimStatus& status) const {
  std::vector<api::DeviceFacts> out(status.devices.size());
  auto node = facts_.find(status.node);
  if (node == facts_.end()) return out;
  for (size_t i = 0; i < status.devices.size(); ++i) {
    auto it = std::lower_bound(node->second.begin(), node->second.end(), status.devices[i].address,
                               [](const auto& f, PciAddress a) { return f.first < a; });
    if (it != node->second.end() && it->first == status.devices[i].address) out[i] = it->second;
  }
  return out;
}

absl::Status KubeApiStore::ReportConflicts() {
  absl::MutexLock write_lock(&write_mu_);
  const std::vector<ClaimConflict> conflicts = this->conflicts();
  for (const ClaimConflict& c : conflicts) {
    for (const ClaimKey& key : c.claims) {
      auto it = conflicted_.find(key);
      if (it == conflicted_.end()) continue;
      std::vector<std::string> others;
      for (const ClaimKey& k : c.claims) {
        if (k != key) others.push_back(k.ToString());
      }
      const std::string message =
          absl::StrCat("device ", c.address.ToString(), " on node ", c.node,
                       " is also in the status of claim(s) ", absl::StrJoin(others, ", "),
                       ": pdc uses it for none of them until an administrator deletes the "
                       "wrong claim(s) "
                       "and restarts pdc-extender");
      // One claim's refusal leaves the others' conditions to write.
      if (absl::Status w = WriteClaim(it->second, message); !w.ok()) {
        if (!IsObjectRefusal(w)) return w;
        spdlog::warn("claim {}: {}", key.ToString(), StdSv(w.message()));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<KubeApiStore::WithheldObject> KubeApiStore::invalid() const {
  absl::MutexLock lock(&mu_);
  return invalid_;
}

absl::Status KubeApiStore::ReportWithheld() {
  absl::MutexLock write_lock(&write_mu_);
  for (const WithheldObject& w : invalid()) {
    const std::string what =
        absl::StrCat("write the Withheld condition of claim ", w.key.ToString());
    absl::StatusOr<bool> written = objects_.WriteConditions(
        w.key, w.uid,
        [&](const ObjectState& st) {
          return api::WithheldConditions(w.reason, w.message, st.generation, st.conditions,
                                         options_.clock->Now());
        },
        what);
    if (!written.ok() && !IsObjectRefusal(written.status())) return written.status();
    if (!written.ok())
      spdlog::warn("claim {}: {}", w.key.ToString(), StdSv(written.status().message()));
  }
  return absl::OkStatus();
}

absl::Status KubeApiStore::WriteClaim(const Claim& claim, std::string_view conflict) {
  return objects_.WriteStatus(claim, FactsOf(claim.status), conflict);
}

absl::Status KubeApiStore::DropClaim(const ClaimKey& key, std::string_view claim_uid,
                                     const std::map<std::string, Holds>& batch_holds) {
  std::optional<ObjectState> st = objects_.Object(key);
  objects_.ClearUnrecorded(key);
  objects_.Dropped(claim_uid);
  if (st.has_value() && !claim_uid.empty() && st->claim_uid != claim_uid) {
    // The object under the name records another claim (one being erased,
    // withheld, re-created): the claim let go never had a record there, and
    // that object is not its to delete or to release.
    spdlog::info(
        "claim {} (uid {}) let go; the object of that name (UID {}) is another "
        "claim's and is left alone",
        key.ToString(), claim_uid, st->uid);
    return absl::OkStatus();
  }
  if (st.has_value() && st->generated && !st->deleting) {
    // A claim pdc generated for a VM, let go while its object stays (the
    // bind that created it was undone, its VM is gone): the object goes
    // too, rather than outlive the claim it recorded. Only that object
    // (UID precondition); one being deleted already needs no DELETE.
    ASSIGN_OR_RETURN(bool deleting, objects_.Delete(key, st->uid));
    if (!deleting) return absl::OkStatus();
    st = objects_.Object(key);  // Now deleting: the finalizer below lets it go.
  }
  if (st.has_value() && !st->devices.empty()) {
    // Devices going back to their host driver hold the claim's data until
    // pdc-node has erased them: the claim's object stays until then.
    auto it = batch_holds.find(st->node);
    std::vector<PciAddress> returning = NodeHoldsObjects::Returning(
        st->devices, it != batch_holds.end() ? it->second : holds_.Persisted(st->node));
    if (!returning.empty()) return reclaims_.Start(key, *st, std::move(returning));
  }
  return objects_.SetFinalizer(key, false);
}

absl::Status KubeApiStore::SetFinalizer(const ClaimKey& key, bool present, std::string_view uid) {
  return objects_.SetFinalizer(key, present, uid);
}

absl::StatusOr<KubeApiStore::ObjectState> KubeApiStore::Reread(const ClaimKey& key,
                                                               absl::Time deadline) {
  return objects_.Reread(key, deadline);
}

// --- What the watch says -----------------------------------------------------

void KubeApiStore::Observe(const api::ObjectMeta& meta) { objects_.Observe(meta); }

void KubeApiStore::Forget(const ClaimKey& key, std::string_view uid) { objects_.Forget(key, uid); }

void KubeApiStore::Forgotten(const ClaimKey& key, std::string_view uid) {
  reclaims_.Forgotten(key,
                      uid);  // Its finalizer was taken off, by pdc or by hand.
  absl::MutexLock lock(&mu_);
  withheld_.erase(key);
  // A claim of a conflict deleted: the claims it leaves alone with their
  // device are taken up at the next start (recovery decides afresh).
  for (auto c = conflicts_.begin(); c != conflicts_.end();) {
    auto k = std::find(c->claims.begin(), c->claims.end(), key);
    if (k == c->claims.end()) {
      ++c;
      continue;
    }
    c->claims.erase(k);
    if (c->claims.size() > 1) {
      ++c;
      continue;
    }
    spdlog::warn(
        "device {} on node {} is no longer in two claims ({} was deleted){}; "
        "it stays "
        "unused until pdc-extender restarts and reads the claims again",
        c->address.ToString(), c->node, key.ToString(),
        c->claims.empty() ? ""
                          : absl::StrCat(": claim ", c->claims[0].ToString(), " is taken up then"));
    c = conflicts_.erase(c);
  }
}

std::optional<KubeApiStore::ObjectState> KubeApiStore::Object(const ClaimKey& key) const {
  return objects_.Object(key);
}

absl::Status KubeApiStore::Recorded(const ClaimKey& key, std::string_view claim_uid,
                                    std::string_view node, std::string_view pod_uid) const {
  return objects_.Recorded(key, claim_uid, node, pod_uid);
}

std::string KubeApiStore::WhyNameTaken(const ClaimKey& key) const {
  std::optional<ObjectState> found = objects_.Object(key);
  if (!found.has_value()) return "";
  const ObjectState& st = *found;
  const std::string object =
      absl::StrCat("PersistentDeviceClaim ", key.ToString(), " (UID ", st.uid, ")");
  if (std::optional<ClaimReclaims::Reclaim> r = reclaims_.Of(key); r && r->uid == st.uid) {
    std::vector<std::string> devices;
    for (PciAddress a : r->devices) devices.push_back(a.ToString());
    return absl::StrCat(object, " is being deleted and waits until pdc-node on node ", r->node,
                        " has erased device(s) ", absl::StrJoin(devices, ","),
                        " and returned them to their host driver (reclaimPolicy Delete); the "
                        "VM gets a new claim of that name once that object is gone");
  }
  if (Withheld(key)) {
    return absl::StrCat(object,
                        " is withheld for a device conflict (condition DeviceConflict): the "
                        "VM waits until an administrator deletes the wrong claim and that "
                        "object is gone");
  }
  std::vector<std::string> others;
  for (const std::string& f : st.finalizers) {
    if (f != api::kClaimFinalizer) others.push_back(f);
  }
  if (st.deleting) {
    return absl::StrCat(object, " is being deleted",
                        others.empty()
                            ? ""
                            : absl::StrCat(" and waits for finalizer(s) ",
                                           absl::StrJoin(others, ","), " that pdc does not own"),
                        "; the VM gets a new claim of that name once that object is gone");
  }
  return absl::StrCat(object,
                      " exists but is no claim pdc holds (not taken up yet, or its spec was "
                      "refused); the VM waits until that object is taken up or deleted");
}

bool KubeApiStore::Withheld(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  return withheld_.contains(key);
}

std::optional<KubeApiStore::WithheldReclaim> KubeApiStore::WithheldReclaimOf(const ClaimKey& key,
                                                                             std::string_view uid) {
  absl::MutexLock write_lock(&write_mu_);
  auto it = conflicted_.find(key);
  if (it == conflicted_.end() || it->second.uid != uid || withheld_reclaimed_.contains(key)) {
    return std::nullopt;
  }
  WithheldReclaim out;
  out.claim = it->second;
  // Shared: named by another claim of a conflict as recovery found it,
  // also one deleted since (its data may be on the device).
  for (const BoundDevice& d : out.claim.status.devices) {
    const bool shared = std::any_of(conflicted_.begin(), conflicted_.end(), [&](const auto& o) {
      const Claim& other = o.second;
      return other.key != key && other.status.node == out.claim.status.node &&
             std::any_of(other.status.devices.begin(), other.status.devices.end(),
                         [&](const BoundDevice& x) { return x.address == d.address; });
    });
    if (shared) {
      out.shared.push_back(d.address);
    } else {
      out.own.push_back(d);
    }
  }
  return out;
}

void KubeApiStore::WithheldReclaimed(const ClaimKey& key) {
  absl::MutexLock write_lock(&write_mu_);
  withheld_reclaimed_.insert(key);
}

std::vector<ClaimConflict> KubeApiStore::conflicts() const {
  absl::MutexLock lock(&mu_);
  return conflicts_;
}

}  // namespace pdc::extender
