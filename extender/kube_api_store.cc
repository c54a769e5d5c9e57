#include "extender/kube_api_store.h"

#include "allocator/validation.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/json_util.h"
#include "common/backoff.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "kube/kube_reflector.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;

namespace {

constexpr std::string_view kMergePatch = "application/merge-patch+json";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kHoldsPrefix = "pdc-holds-";

bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// resourceVersions are etcd revisions (kube-apiserver's etcd3 storage):
// numbers that only grow. 0 when one is not a number.
uint64_t RvNumber(std::string_view rv) {
  uint64_t n = 0;
  return absl::SimpleAtoi(Sv(rv), &n) ? n : 0;
}

KubeApiStore::ObjectState StateOf(const api::ObjectMeta& meta) {
  const api::OwnerReference* owner = meta.Controller();
  const bool generated = owner != nullptr && owner->api_version.starts_with("kubevirt.io/") &&
                         (owner->kind == "VirtualMachine" || owner->kind == "VirtualMachineInstance");
  return {meta.uid,     meta.resource_version, meta.generation, meta.finalizers,
          meta.deleting, meta.uid,             std::nullopt,    {},
          generated};
}

bool HasFinalizer(const std::vector<std::string>& finalizers) {
  return std::find(finalizers.begin(), finalizers.end(), api::kClaimFinalizer) != finalizers.end();
}

std::string ConfigMapsPath(std::string_view ns) {
  return absl::StrCat("/api/v1/namespaces/", Sv(ns), "/configmaps");
}
std::string ConfigMapPath(std::string_view ns, std::string_view name) {
  return absl::StrCat(ConfigMapsPath(ns), "/", Sv(name));
}

// Devices of a claim that holds some (Bound or Lost).
bool HoldsDevices(const Claim& c) {
  return c.status.phase != ClaimPhase::kPending && !c.status.node.empty();
}

// Keeps in `st` the node and devices `claim`'s status names.
void RememberDevices(const Claim& claim, KubeApiStore::ObjectState* st) {
  st->node.clear();
  st->devices.clear();
  st->reserved_pod_uid =
      claim.status.reserved_for.has_value() ? claim.status.reserved_for->pod_uid : "";
  if (!HoldsDevices(claim)) return;
  st->node = claim.status.node;
  for (const BoundDevice& d : claim.status.devices) st->devices.push_back(d.address);
}

// A deleted claim whose devices were on their way back to their host
// driver when pdc last wrote it: not a claim any more.
bool IsReclaimingObject(const api::ClaimObject& o) {
  return o.meta.deleting && api::IsReclaiming(o.conditions);
}

}  // namespace

std::string HoldsConfigMapName(std::string_view node) {
  // FNV-1a, 64 bits: a node name is up to 253 bytes, a ConfigMap name too,
  // so the name cannot embed it; the node's name is inside and checked.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : node) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%s%016x", Sv(kHoldsPrefix), h);
}

KubeApiStore::KubeApiStore(kube::KubeApi* api, Options options)
    : api_(api), options_(std::move(options)) {}

absl::StatusOr<pdc::HttpResponse> KubeApiStore::Call(std::string_view method, const std::string& path,
                                                const std::string& body,
                                                std::string_view content_type,
                                                std::string_view what, absl::Time deadline) {
  const absl::Duration initial = absl::Milliseconds(100);
  absl::Duration backoff = initial;
  for (;;) {
    const absl::Duration left = deadline - options_.clock->Now();
    if (left <= absl::ZeroDuration()) {
      return absl::UnavailableError(absl::StrCat(
          Sv(what), ": the apiserver did not take the write within ",
          absl::FormatDuration(options_.write_deadline)));
    }
    if (method != "GET" && options_.may_write && !options_.may_write()) {
      return absl::FailedPreconditionError(
          absl::StrCat(Sv(what), ": not written, this replica is no longer the leader"));
    }
    absl::StatusOr<pdc::HttpResponse> r =
        api_->Call(method, path, body, content_type, what, std::min(left, options_.call_timeout));
    absl::Status s;
    if (r.ok()) {
      if (r->status != 429 && r->status < 500) return r;
      s = kube::FromApiserver(r->status, r->body, what);
    } else {
      s = r.status();
    }
    if (!Retryable(s)) return s;
    spdlog::warn("{} failed, retrying in {}: {}", what, absl::FormatDuration(backoff),
                 StdSv(s.message()));
    options_.clock->SleepFor(std::min(backoff, left));
    backoff = NextBackoff(backoff, initial, absl::Seconds(5));
  }
}

// --- Recovery ----------------------------------------------------------------

absl::Status KubeApiStore::ListClaims(std::vector<api::ClaimObject>* out) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  kube::CollectionList list;
  RETURN_IF_ERROR(kube::ListCollection(
      [&](const std::string& target) {
        return Call("GET", target, "", "", "list claims", deadline);
      },
      kClaimsPath, "", options_.list_page, &list));
  for (const json::Value* item : list.items) {
    absl::StatusOr<api::ClaimObject> c = api::ReadClaimObject(*item);
    if (c.ok()) {
      out->push_back(*std::move(c));
      continue;
    }
    // An object pdc cannot read but whose status names devices would leave
    // those devices free for other claims: if its status reads, the claim
    // is withheld (Recover) and its devices held; if not even the status
    // (pdc's own, written through the status subresource) reads, pdc cannot
    // tell which devices it holds and refuses to start.
    const json::Value* status = json::Find(*item, "status");
    const json::Value* devices =
        status != nullptr && status->IsObject() ? json::Find(*status, "devices") : nullptr;
    if (devices != nullptr && devices->IsArray() && !devices->Empty()) {
      absl::StatusOr<api::ClaimObject> held = api::ReadClaimObjectStatusOnly(*item);
      if (held.ok() && HoldsDevices(held->claim)) {
        spdlog::error("PersistentDeviceClaim {}: its spec cannot be read ({}); the claim is "
                      "withheld and its devices held",
                      held->meta.Key(), held->spec_problem);
        out->push_back(*std::move(held));
        continue;
      }
      return absl::DataLossError(
          absl::StrCat("a PersistentDeviceClaim whose status names devices cannot be read (",
                       c.status().message(),
                       "); pdc will not start without knowing which devices it holds"));
    }
    spdlog::error("ignoring a PersistentDeviceClaim that cannot be read: {}",
                  StdSv(c.status().message()));
  }
  return absl::OkStatus();
}

absl::Status KubeApiStore::ListHolds(absl::flat_hash_map<std::string, Holds>* out) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  kube::CollectionList list;
  RETURN_IF_ERROR(kube::ListCollection(
      [&](const std::string& target) {
        return Call("GET", target, "", "", "list device holds", deadline);
      },
      kube::Listed(ConfigMapsPath(options_.holds_namespace)), "", options_.list_page, &list));
  for (const json::Value* item : list.items) {
    const json::Value* meta = json::Find(*item, "metadata");
    const json::Value* name = meta != nullptr && meta->IsObject() ? json::Find(*meta, "name")
                                                                  : nullptr;
    if (name == nullptr || !name->IsString() ||
        !json::StringOf(*name).starts_with(kHoldsPrefix)) {
      continue;  // Not one of pdc's.
    }
    // Holds keep devices from other claims: one pdc cannot read is fatal.
    absl::StatusOr<api::NodeHoldsObject> h = api::ReadNodeHolds(*item);
    if (!h.ok()) return absl::DataLossError(h.status().message());
    if (h->meta.name != HoldsConfigMapName(h->node)) {
      return absl::DataLossError(absl::StrCat("ConfigMap ", h->meta.Key(), " holds node ",
                                              h->node, " but is not named ",
                                              HoldsConfigMapName(h->node)));
    }
    Holds holds{h->return_to_host, h->released};
    holds_[h->node] = HoldsObject{h->meta.uid, h->meta.resource_version, holds};
    (*out)[h->node] = std::move(holds);
  }
  return absl::OkStatus();
}

absl::StatusOr<RecoveryReport> KubeApiStore::Recover(const RecordVisitor& apply) {
  absl::MutexLock write_lock(&write_mu_);
  std::vector<api::ClaimObject> objects;
  RETURN_IF_ERROR(ListClaims(&objects));
  absl::flat_hash_map<std::string, Holds> holds;
  RETURN_IF_ERROR(ListHolds(&holds));

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
    spdlog::error("device {} on node {} is in the status of {} claims ({}, ...): pdc uses it "
                  "for none of them until an administrator deletes the wrong claims",
                  where.second.ToString(), where.first, claims.size(),
                  c.claims.front().ToString());
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
      w.reason = "SpecUnreadable";
      w.message = o.spec_problem;
    } else if (std::string why = ClaimContradiction(o.claim); !why.empty()) {
      w.reason = "SpecContradictsStatus";
      w.message = std::move(why);
    } else {
      continue;
    }
    w.message = absl::StrCat(w.message, ": pdc keeps the claim's devices and uses them for no "
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
    std::sort(h.released.begin(), h.released.end(),
              [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
  }
  // Deleted claims waiting for their devices to be erased: the devices
  // still on the holds' way back to the host driver.
  absl::flat_hash_map<ClaimKey, Reclaim> reclaims;
  for (const api::ClaimObject& o : objects) {
    if (!IsReclaimingObject(o)) continue;
    Reclaim& r = reclaims[o.claim.key];
    r.uid = o.meta.uid;
    r.node = o.claim.status.node;
    auto it = holds.find(r.node);
    if (it == holds.end()) continue;
    for (const BoundDevice& d : o.claim.status.devices) r.devices.push_back(d.address);
    r.devices = Returning(r.devices, it->second);
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
  {
    absl::MutexLock lock(&mu_);
    for (const api::ClaimObject& o : objects) {
      ObjectState st = StateOf(o.meta);
      if (o.has_status) st.phase = o.claim.status.phase;
      st.conditions = o.conditions;
      RememberDevices(o.claim, &st);
      objects_[o.claim.key] = st;
      if (conflicted.contains(o.claim.key) || reclaims.contains(o.claim.key)) continue;
      held_[o.claim.key] = o.claim.uid;
      snapshot.mutations.push_back(PutClaim{o.claim});
      ++claims;
    }
    conflicts_ = conflicts;
    invalid_ = std::move(invalid);
    reclaiming_ = std::move(reclaims);
    withheld_.clear();
    for (const auto& [key, yes] : conflicted) withheld_.insert(key);
  }
  if (!snapshot.mutations.empty()) RETURN_IF_ERROR(apply(snapshot));
  spdlog::info("recovered {} claims and the holds of {} nodes from the Kubernetes API{}",
               claims, nodes.size(),
               conflicts.empty() ? ""
                                 : absl::StrCat("; ", conflicts.size(), " devices in conflict"));
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
  // 1. What holds gain.
  for (const auto& [node, h] : nodes) {
    Holds now = Persisted(node);
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
    std::sort(grown.released.begin(), grown.released.end(),
              [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
    if (grown != now) RETURN_IF_ERROR(WriteHolds(node, grown));
  }
  // 2. Claims' statuses; 3. claims let go.
  for (const auto& [key, claim] : claims) {
    if (claim.has_value()) RETURN_IF_ERROR(WriteClaim(*claim));
  }
  for (const auto& [key, claim] : claims) {
    if (!claim.has_value()) RETURN_IF_ERROR(DropClaim(key, dropped[key], nodes));
  }
  // 4. What holds lose; 5. the finalizers of deleted claims whose devices
  // are back on their host driver now.
  for (const auto& [node, h] : nodes) {
    if (h != Persisted(node)) RETURN_IF_ERROR(WriteHolds(node, h));
  }
  std::vector<ClaimKey> settle;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, r] : reclaiming_) {
      if (nodes.contains(r.node)) settle.push_back(key);
    }
  }
  return SettleReclaims(settle);
}

std::vector<PciAddress> KubeApiStore::Returning(const std::vector<PciAddress>& devices,
                                                const Holds& holds) {
  std::vector<PciAddress> out;
  for (PciAddress a : devices) {
    if (std::find(holds.return_to_host.begin(), holds.return_to_host.end(), a) !=
        holds.return_to_host.end()) {
      out.push_back(a);
    }
  }
  return out;
}

absl::Status KubeApiStore::StartReclaim(const ClaimKey& key, const ObjectState& st,
                                        std::vector<PciAddress> devices) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  const std::string what = absl::StrCat("write the Reclaiming condition of claim ", key.ToString());
  const size_t count = devices.size();
  ObjectState cur = st;
  for (;;) {
    std::vector<api::ClaimCondition> conditions = api::ReclaimingConditions(
        cur.node, devices, cur.generation, cur.conditions, options_.clock->Now());
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        Call("PATCH", absl::StrCat(api::ClaimObjectPath(key), "/status"),
             api::WriteClaimConditionsPatch(cur.uid, cur.resource_version, conditions),
             kMergePatch, what, deadline));
    if (r.status == 404) {
      Forget(key, cur.uid);
      return absl::OkStatus();
    }
    if (r.status == 200) {
      RETURN_IF_ERROR(ObserveAnswer(r.body));
      absl::MutexLock lock(&mu_);
      if (auto it = objects_.find(key); it != objects_.end() && it->second.uid == cur.uid) {
        it->second.conditions = std::move(conditions);
      }
      reclaiming_[key] = Reclaim{cur.uid, cur.node, std::move(devices)};
      break;
    }
    if (r.status != 409) return kube::FromApiserver(r.status, r.body, what);
    absl::StatusOr<ObjectState> fresh = Reread(key, deadline);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
    if (fresh->uid != st.uid) return absl::OkStatus();  // Another object now.
    cur = *std::move(fresh);
  }
  spdlog::info("claim {} deleted: its finalizer stays until pdc-node on node {} has returned "
               "{} device(s) to their host driver (erased first)",
               key.ToString(), st.node, count);
  return absl::OkStatus();
}

absl::Status KubeApiStore::SettleReclaims(const std::vector<ClaimKey>& keys) {
  for (const ClaimKey& key : keys) {
    Reclaim r;
    {
      absl::MutexLock lock(&mu_);
      auto it = reclaiming_.find(key);
      if (it == reclaiming_.end()) continue;
      r = it->second;
    }
    if (!Returning(r.devices, Persisted(r.node)).empty()) continue;
    RETURN_IF_ERROR(SetFinalizer(key, false, r.uid));
    spdlog::info("claim {}: its device(s) on node {} are back on their host driver; the claim "
                 "is gone",
                 key.ToString(), r.node);
    absl::MutexLock lock(&mu_);
    if (auto it = reclaiming_.find(key); it != reclaiming_.end() && it->second.uid == r.uid) {
      reclaiming_.erase(it);
    }
  }
  return absl::OkStatus();
}

bool KubeApiStore::Reclaiming(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  return reclaiming_.contains(key);
}

absl::Status KubeApiStore::SettleReclaim(const ClaimKey& key) {
  absl::MutexLock write_lock(&write_mu_);
  return SettleReclaims({key});
}

KubeApiStore::Holds KubeApiStore::Persisted(const std::string& node) const {
  auto it = holds_.find(node);
  return it == holds_.end() ? Holds{} : it->second.holds;
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
    auto it = std::lower_bound(
        node->second.begin(), node->second.end(), status.devices[i].address,
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
      const std::string message = absl::StrCat(
          "device ", c.address.ToString(), " on node ", c.node,
          " is also in the status of claim(s) ", absl::StrJoin(others, ", "),
          ": pdc uses it for none of them until an administrator deletes the wrong claim(s) "
          "and restarts pdc-extender");
      RETURN_IF_ERROR(WriteClaim(it->second, message));
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
    const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
    const std::string what =
        absl::StrCat("write the Withheld condition of claim ", w.key.ToString());
    for (;;) {
      std::optional<ObjectState> st = Object(w.key);
      if (!st.has_value() || st->uid != w.uid) break;
      const std::vector<api::ClaimCondition> conditions = api::WithheldConditions(
          w.reason, w.message, st->generation, st->conditions, options_.clock->Now());
      ASSIGN_OR_RETURN(
          pdc::HttpResponse r,
          Call("PATCH", absl::StrCat(api::ClaimObjectPath(w.key), "/status"),
               api::WriteClaimConditionsPatch(st->uid, st->resource_version, conditions),
               kMergePatch, what, deadline));
      if (r.status == 200) {
        RETURN_IF_ERROR(ObserveAnswer(r.body));
        absl::MutexLock lock(&mu_);
        if (auto it = objects_.find(w.key); it != objects_.end() && it->second.uid == st->uid) {
          it->second.conditions = conditions;
        }
        break;
      }
      if (r.status == 404) break;
      if (r.status != 409) return kube::FromApiserver(r.status, r.body, what);
      absl::StatusOr<ObjectState> fresh = Reread(w.key, deadline);
      if (absl::IsNotFound(fresh.status())) break;
      if (!fresh.ok()) return fresh.status();
    }
  }
  return absl::OkStatus();
}

absl::Status KubeApiStore::WriteClaim(const Claim& claim, std::string_view conflict) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  const std::string what = absl::StrCat("write the status of claim ", claim.key.ToString());
  for (;;) {
    std::optional<ObjectState> st = Object(claim.key);
    if (!st.has_value()) {
      if (claim.spec.owner_vm.empty()) {
        // A claim people created whose object is gone: the claim
        // controller removes it from the allocator.
        spdlog::info("claim {}: its object is gone; status not written", claim.key.ToString());
        Unrecorded(claim.key, absl::StrCat("the object of claim ", claim.key.ToString(),
                                           " is gone; its status was not written"));
        return absl::OkStatus();
      }
      absl::Status created = CreateClaimObject(claim);
      if (absl::IsAborted(created)) {
        // Another object holds the name: this claim has no record, and the
        // bind that made it is refused (Recorded), the store stays healthy.
        spdlog::warn("{}", StdSv(created.message()));
        Unrecorded(claim.key, std::string(created.message()));
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(created);
      continue;
    }
    if (st->claim_uid != claim.uid) {
      // Another object under the same name (one being erased, withheld,
      // re-created): not this claim's record. Any bind relying on it is
      // refused (Recorded); the store stays healthy.
      spdlog::warn("claim {}: the object now has UID {}, not the claim's; status not written",
                   claim.key.ToString(), st->uid);
      Unrecorded(claim.key,
                 absl::StrCat("PersistentDeviceClaim ", claim.key.ToString(), " (UID ", st->uid,
                              ") is another object than the claim's; its status was not "
                              "written"));
      return absl::OkStatus();
    }
    std::vector<api::ClaimCondition> conditions = api::ConditionsOf(
        claim.status, conflict, st->generation, st->conditions, options_.clock->Now());
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        Call("PATCH", absl::StrCat(api::ClaimObjectPath(claim.key), "/status"),
             api::WriteClaimStatusPatch(st->uid, st->resource_version, claim.status,
                                        st->generation, FactsOf(claim.status), conditions),
             kMergePatch, what, deadline));
    if (r.status == 200) {
      RETURN_IF_ERROR(ObserveAnswer(r.body));
      {
        absl::MutexLock lock(&mu_);
        if (auto it = objects_.find(claim.key); it != objects_.end() && it->second.uid == st->uid) {
          it->second.phase = claim.status.phase;
          it->second.conditions = std::move(conditions);
          RememberDevices(claim, &it->second);
        }
        unrecorded_.erase(claim.key);
      }
      if (options_.on_status) options_.on_status(claim, st->uid, st->phase);
      return absl::OkStatus();
    }
    if (r.status == 404) {
      Forget(claim.key, st->uid);
      return absl::OkStatus();
    }
    if (r.status != 409) return kube::FromApiserver(r.status, r.body, what);
    // A stale resourceVersion (someone edited the object): read it again.
    absl::StatusOr<ObjectState> fresh = Reread(claim.key, deadline);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
  }
}

absl::Status KubeApiStore::CreateClaimObject(const Claim& claim) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  const std::string what = absl::StrCat("create claim ", claim.key.ToString());
  std::optional<api::OwnerReference> owner;
  if (options_.owner_of) {
    owner = options_.owner_of(claim.key.ns, claim.spec.owner_vm, claim.spec.owner_vm_uid);
  }
  if (!owner.has_value() && !claim.spec.owner_vm_uid.empty()) {
    owner = api::OwnerReference{"kubevirt.io/v1", "VirtualMachine", claim.spec.owner_vm,
                                claim.spec.owner_vm_uid, true};
  }
  {
    absl::MutexLock lock(&mu_);
    creating_[claim.key] = claim.uid;
  }
  absl::StatusOr<pdc::HttpResponse> created =
      Call("POST", api::ClaimCollectionPath(claim.key.ns), api::WriteNewClaimObject(claim, owner),
           kJson, what, deadline);
  absl::Cleanup done = [&] {
    absl::MutexLock lock(&mu_);
    creating_.erase(claim.key);
  };
  if (!created.ok()) return created.status();
  pdc::HttpResponse& r = *created;
  if (r.status == 409) {
    // Created by a try whose answer was lost, or by someone else.
    ASSIGN_OR_RETURN(pdc::HttpResponse got, Call("GET", api::ClaimObjectPath(claim.key), "", "",
                                            what, deadline));
    if (got.status != 200) return kube::FromApiserver(got.status, got.body, what);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::ParseObject(got.body, &doc));
    ASSIGN_OR_RETURN(api::ClaimObject existing, api::ReadClaimObject(doc));
    if (existing.claim.spec.owner_vm != claim.spec.owner_vm ||
        existing.claim.spec.owner_vm_uid != claim.spec.owner_vm_uid || existing.meta.deleting) {
      return absl::AbortedError(absl::StrCat(
          what, ": another PersistentDeviceClaim of that name exists (UID ", existing.meta.uid,
          ") and is not this VM's"));
    }
    ObjectState st = StateOf(existing.meta);
    st.claim_uid = claim.uid;
    Remember(claim.key, std::move(st));
    return absl::OkStatus();
  }
  if (r.status != 201 && r.status != 200) return kube::FromApiserver(r.status, r.body, what);
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(r.body, &doc));
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, api::kClaimKind));
  ObjectState st = StateOf(meta);
  st.claim_uid = claim.uid;
  Remember(claim.key, std::move(st));
  spdlog::info("created claim {} for VM {} (UID {})", claim.key.ToString(), claim.spec.owner_vm,
               claim.spec.owner_vm_uid);
  return absl::OkStatus();
}

absl::Status KubeApiStore::DropClaim(const ClaimKey& key, std::string_view claim_uid,
                                     const std::map<std::string, Holds>& batch_holds) {
  std::optional<ObjectState> st = Object(key);
  {
    absl::MutexLock lock(&mu_);
    unrecorded_.erase(key);
  }
  if (st.has_value() && !claim_uid.empty() && st->claim_uid != claim_uid) {
    // The object under the name records another claim (one being erased,
    // withheld, re-created): the claim let go never had a record there, and
    // that object is not its to delete or to release.
    spdlog::info("claim {} (uid {}) let go; the object of that name (UID {}) is another "
                 "claim's and is left alone",
                 key.ToString(), claim_uid, st->uid);
    return absl::OkStatus();
  }
  if (st.has_value() && st->generated && !st->deleting) {
    // A claim pdc generated for a VM, let go while its object stays (the
    // bind that created it was undone, its VM is gone): the object goes
    // too, rather than outlive the claim it recorded. Only that object
    // (UID precondition); one being deleted already needs no DELETE.
    const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
    const std::string what = absl::StrCat("delete claim ", key.ToString());
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        Call("DELETE", api::ClaimObjectPath(key),
             absl::StrCat(R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":)",
                          json::Quote(st->uid), "}}"),
             kJson, what, deadline));
    if (r.status == 404 || r.status == 409) {
      // Gone, or another object of that name now: not ours to touch.
      Forget(key, st->uid);
      return absl::OkStatus();
    }
    if (r.status != 200 && r.status != 202) return kube::FromApiserver(r.status, r.body, what);
    RETURN_IF_ERROR(ObserveAnswer(r.body));  // Now deleting: the finalizer below lets it go.
    st = Object(key);
  }
  if (st.has_value() && !st->devices.empty()) {
    // Devices going back to their host driver hold the claim's data until
    // pdc-node has erased them: the claim's object stays until then.
    auto it = batch_holds.find(st->node);
    std::vector<PciAddress> returning =
        Returning(st->devices, it != batch_holds.end() ? it->second : Persisted(st->node));
    if (!returning.empty()) return StartReclaim(key, *st, std::move(returning));
  }
  return SetFinalizer(key, false);
}

absl::Status KubeApiStore::SetFinalizer(const ClaimKey& key, bool present,
                                        std::string_view uid) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  const std::string what =
      absl::StrCat(present ? "add" : "remove", " the finalizer of claim ", key.ToString());
  for (;;) {
    std::optional<ObjectState> st = Object(key);
    if (!st.has_value() || (!uid.empty() && st->uid != uid)) return absl::OkStatus();
    if (HasFinalizer(st->finalizers) == present) return absl::OkStatus();
    // The API refuses new finalizers on an object being deleted.
    if (present && st->deleting) return absl::OkStatus();
    std::vector<std::string> finalizers = st->finalizers;
    if (present) {
      finalizers.emplace_back(api::kClaimFinalizer);
    } else {
      finalizers.erase(std::remove(finalizers.begin(), finalizers.end(), api::kClaimFinalizer),
                       finalizers.end());
    }
    ASSIGN_OR_RETURN(pdc::HttpResponse r,
                     Call("PATCH", api::ClaimObjectPath(key),
                          api::WriteFinalizersPatch(st->uid, st->resource_version, finalizers),
                          kMergePatch, what, deadline));
    if (r.status == 200) {
      rapidjson::Document doc;
      RETURN_IF_ERROR(json::ParseObject(r.body, &doc));
      // The last finalizer of a deleting object gone: the API deleted it
      // and answers with its last state.
      ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, api::kClaimKind));
      if (!present && meta.deleting && meta.finalizers.empty()) {
        Forget(key, meta.uid);
      } else {
        Observe(meta);
      }
      return absl::OkStatus();
    }
    if (r.status == 404) {
      Forget(key, st->uid);
      return absl::OkStatus();
    }
    if (r.status != 409) return kube::FromApiserver(r.status, r.body, what);
    absl::StatusOr<ObjectState> fresh = Reread(key, deadline);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
    if (fresh->uid != st->uid) return absl::OkStatus();  // Another object now.
  }
}

absl::StatusOr<KubeApiStore::ObjectState> KubeApiStore::Reread(const ClaimKey& key,
                                                               absl::Time deadline) {
  const std::string what = absl::StrCat("read claim ", key.ToString());
  ASSIGN_OR_RETURN(pdc::HttpResponse r,
                   Call("GET", api::ClaimObjectPath(key), "", "", what, deadline));
  if (r.status == 404) {
    absl::MutexLock lock(&mu_);
    objects_.erase(key);
    return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " is gone"));
  }
  if (r.status != 200) return kube::FromApiserver(r.status, r.body, what);
  RETURN_IF_ERROR(ObserveAnswer(r.body));
  std::optional<ObjectState> st = Object(key);
  if (!st.has_value()) return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " is gone"));
  return *st;
}

absl::Status KubeApiStore::WriteHolds(const std::string& node, const Holds& holds) {
  const absl::Time deadline = options_.clock->Now() + options_.write_deadline;
  const std::string& ns = options_.holds_namespace;
  const std::string name = HoldsConfigMapName(node);
  const std::string what = absl::StrCat("write the device holds of node ", node);
  for (;;) {
    auto it = holds_.find(node);
    absl::StatusOr<pdc::HttpResponse> r;
    if (holds.empty()) {
      if (it == holds_.end()) return absl::OkStatus();
      r = Call("DELETE", ConfigMapPath(ns, name),
               absl::StrCat(R"({"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":)",
                            json::Quote(it->second.uid), R"(,"resourceVersion":)",
                            json::Quote(it->second.resource_version), "}}"),
               kJson, what, deadline);
      if (!r.ok()) return r.status();
      if (r->status == 200 || r->status == 202 || r->status == 404) {
        holds_.erase(it);
        return absl::OkStatus();
      }
      if (r->status != 409) return kube::FromApiserver(r->status, r->body, what);
    } else if (it == holds_.end()) {
      r = Call("POST", ConfigMapsPath(ns),
               api::WriteNodeHolds(name, ns, "", "", node,
                                   holds.return_to_host, holds.released),
               kJson, what, deadline);
    } else {
      r = Call("PATCH", ConfigMapPath(ns, name),
               api::WriteNodeHolds(name, ns, it->second.uid,
                                   it->second.resource_version, node, holds.return_to_host,
                                   holds.released),
               kMergePatch, what, deadline);
    }
    if (!r.ok()) return r.status();
    if (r->status == 200 || r->status == 201) {
      rapidjson::Document doc;
      RETURN_IF_ERROR(json::ParseObject(r->body, &doc));
      ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, "ConfigMap"));
      holds_[node] = HoldsObject{meta.uid, meta.resource_version, holds};
      return absl::OkStatus();
    }
    if (r->status == 404) {
      holds_.erase(node);  // Gone: create it again.
      continue;
    }
    if (r->status != 409) return kube::FromApiserver(r->status, r->body, what);
    // Exists already, or changed under us: take what is there and go on.
    ASSIGN_OR_RETURN(pdc::HttpResponse got, Call("GET", ConfigMapPath(ns, name), "", "", what, deadline));
    if (got.status == 404) {
      holds_.erase(node);
      continue;
    }
    if (got.status != 200) return kube::FromApiserver(got.status, got.body, what);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::ParseObject(got.body, &doc));
    ASSIGN_OR_RETURN(api::NodeHoldsObject cur, api::ReadNodeHolds(doc));
    holds_[node] = HoldsObject{cur.meta.uid, cur.meta.resource_version,
                               Holds{cur.return_to_host, cur.released}};
  }
}

// --- What the watch says -----------------------------------------------------

absl::Status KubeApiStore::ObserveAnswer(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, api::kClaimKind));
  Observe(meta);
  return absl::OkStatus();
}

void KubeApiStore::Observe(const api::ObjectMeta& meta) {
  const ClaimKey key{meta.ns, meta.name};
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it != objects_.end() &&
      RvNumber(meta.resource_version) < RvNumber(it->second.resource_version)) {
    return;  // Older than what a write of ours answered.
  }
  ObjectState st = StateOf(meta);
  if (it != objects_.end() && it->second.uid == meta.uid) {
    st.claim_uid = it->second.claim_uid;
    st.phase = it->second.phase;
    st.conditions = it->second.conditions;
    st.node = it->second.node;
    st.devices = it->second.devices;
    st.reserved_pod_uid = it->second.reserved_pod_uid;
  } else if (auto c = creating_.find(key); c != creating_.end()) {
    st.claim_uid = c->second;
  }
  objects_[key] = std::move(st);
}

void KubeApiStore::Remember(const ClaimKey& key, ObjectState state) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it != objects_.end() && it->second.uid == state.uid) {
    if (!state.phase.has_value()) state.phase = it->second.phase;
    if (state.conditions.empty()) state.conditions = it->second.conditions;
    if (state.devices.empty()) {
      state.node = it->second.node;
      state.devices = it->second.devices;
    }
    if (state.reserved_pod_uid.empty()) state.reserved_pod_uid = it->second.reserved_pod_uid;
    if (RvNumber(state.resource_version) < RvNumber(it->second.resource_version)) {
      it->second.claim_uid = state.claim_uid;
      return;
    }
  }
  objects_[key] = std::move(state);
}

void KubeApiStore::Forget(const ClaimKey& key, std::string_view uid) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end() || it->second.uid != uid) return;
  objects_.erase(it);
  withheld_.erase(key);
  if (auto r = reclaiming_.find(key); r != reclaiming_.end() && r->second.uid == uid) {
    reclaiming_.erase(r);  // Its finalizer was taken off by hand.
  }
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
    spdlog::warn("device {} on node {} is no longer in two claims ({} was deleted){}; it stays "
                 "unused until pdc-extender restarts and reads the claims again",
                 c->address.ToString(), c->node, key.ToString(),
                 c->claims.empty() ? "" : absl::StrCat(": claim ", c->claims[0].ToString(),
                                                       " is taken up then"));
    c = conflicts_.erase(c);
  }
}

std::optional<KubeApiStore::ObjectState> KubeApiStore::Object(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

void KubeApiStore::Unrecorded(const ClaimKey& key, std::string why) {
  absl::MutexLock lock(&mu_);
  unrecorded_[key] = std::move(why);
}

absl::Status KubeApiStore::Recorded(const ClaimKey& key, std::string_view claim_uid,
                                    std::string_view node, std::string_view pod_uid) const {
  absl::MutexLock lock(&mu_);
  if (auto u = unrecorded_.find(key); u != unrecorded_.end()) {
    return absl::FailedPreconditionError(u->second);
  }
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no PersistentDeviceClaim ", key.ToString(), " is in the API"));
  }
  const ObjectState& st = it->second;
  if (st.claim_uid != claim_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("PersistentDeviceClaim ", key.ToString(), " in the API (UID ", st.uid,
                     ") is another object than the claim's"));
  }
  if (st.phase != ClaimPhase::kBound || st.node != node || st.reserved_pod_uid != pod_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("PersistentDeviceClaim ", key.ToString(), " (UID ", st.uid,
                     ") is not recorded as Bound on node ", Sv(node), " for pod UID ",
                     Sv(pod_uid), " in the API"));
  }
  return absl::OkStatus();
}

std::string KubeApiStore::WhyNameTaken(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return "";
  const ObjectState& st = it->second;
  const std::string object =
      absl::StrCat("PersistentDeviceClaim ", key.ToString(), " (UID ", st.uid, ")");
  if (auto r = reclaiming_.find(key); r != reclaiming_.end() && r->second.uid == st.uid) {
    std::vector<std::string> devices;
    for (PciAddress a : r->second.devices) devices.push_back(a.ToString());
    return absl::StrCat(object, " is being deleted and waits until pdc-node on node ",
                        r->second.node, " has erased device(s) ", absl::StrJoin(devices, ","),
                        " and returned them to their host driver (reclaimPolicy Delete); the "
                        "VM gets a new claim of that name once that object is gone");
  }
  if (withheld_.contains(key)) {
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
                        others.empty() ? ""
                                       : absl::StrCat(" and waits for finalizer(s) ",
                                                      absl::StrJoin(others, ","),
                                                      " that pdc does not own"),
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

std::optional<KubeApiStore::WithheldReclaim> KubeApiStore::WithheldReclaimOf(
    const ClaimKey& key, std::string_view uid) {
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
