#include "extender/claim_objects.h"

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;

namespace {

// resourceVersions are etcd revisions (kube-apiserver's etcd3 storage):
// numbers that only grow. 0 when one is not a number.
uint64_t RvNumber(std::string_view rv) {
  uint64_t n = 0;
  return absl::SimpleAtoi(Sv(rv), &n) ? n : 0;
}

ClaimObjectState StateOf(const api::ObjectMeta& meta) {
  const api::OwnerReference* owner = meta.Controller();
  const bool generated =
      owner != nullptr && owner->api_version.starts_with("kubevirt.io/") &&
      (owner->kind == "VirtualMachine" || owner->kind == "VirtualMachineInstance");
  return {meta.uid,        meta.resource_version,
          meta.generation, meta.finalizers,
          meta.deleting,   meta.uid,
          std::nullopt,    {},
          generated};
}

bool HasFinalizer(const std::vector<std::string>& finalizers) {
  return std::find(finalizers.begin(), finalizers.end(), api::kClaimFinalizer) != finalizers.end();
}

// Keeps in `st` the node and devices `claim`'s status names.
void RememberDevices(const Claim& claim, ClaimObjectState* st) {
  st->node.clear();
  st->devices.clear();
  st->reserved_pod_uid =
      claim.status.reserved_for.has_value() ? claim.status.reserved_for->pod_uid : "";
  if (!HoldsDevices(claim)) return;
  st->node = claim.status.node;
  for (const BoundDevice& d : claim.status.devices) st->devices.push_back(d.address);
}

// Of a claim object whose status does not read: its metadata, status.node
// and status.devices[].address (and serial where it reads), as a Bound
// claim without a spec (reclaimPolicy Retain), has_status false.
absl::StatusOr<api::ClaimObject> DevicesOfUnreadable(const json::Value& item,
                                                     const json::Value& status,
                                                     const json::Value& devices) {
  api::ClaimObject out;
  ASSIGN_OR_RETURN(out.meta, api::ReadObjectMeta(item, api::kClaimKind));
  if (out.meta.ns.empty()) return absl::InvalidArgumentError("metadata.namespace is empty");
  const json::Value* node = json::Find(status, "node");
  if (node == nullptr || !node->IsString() || json::StringOf(*node).empty()) {
    return absl::InvalidArgumentError("status.node does not read");
  }
  out.claim.key = ClaimKey{out.meta.ns, out.meta.name};
  out.claim.uid = out.meta.uid;
  out.claim.spec.reclaim_policy = ReclaimPolicy::kRetain;
  out.claim.status.phase = ClaimPhase::kBound;
  out.claim.status.node = std::string(json::StringOf(*node));
  for (const json::Value& d : devices.GetArray()) {
    const json::Value* address = d.IsObject() ? json::Find(d, "address") : nullptr;
    if (address == nullptr || !address->IsString()) {
      return absl::InvalidArgumentError("a status.devices entry has no address");
    }
    ASSIGN_OR_RETURN(PciAddress a, PciAddress::Parse(json::StringOf(*address)));
    BoundDevice b{a, ""};
    const json::Value* serial = json::Find(d, "serial");
    if (serial != nullptr && serial->IsString() && json::StringOf(*serial).size() <= 64) {
      b.serial = std::string(json::StringOf(*serial));
    }
    out.claim.status.devices.push_back(std::move(b));
  }
  return out;
}

}  // namespace

bool HoldsDevices(const Claim& c) {
  return c.status.phase != ClaimPhase::kPending && !c.status.node.empty();
}

bool IsObjectRefusal(const absl::Status& s) {
  return absl::IsPermissionDenied(s) || absl::IsInvalidArgument(s);
}

// --- Reading -----------------------------------------------------------------

absl::Status ClaimObjects::List(std::vector<api::ClaimObject>* out) const {
  const absl::Time deadline = calls_->WriteDeadline();
  kube::CollectionList list;
  RETURN_IF_ERROR(kube::ListCollection(
      [&](const std::string& target) {
        return calls_->Call("GET", target, "", "", "list claims", deadline);
      },
      kClaimsPath, "", calls_->options().list_page, &list));
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
        spdlog::error(
            "PersistentDeviceClaim {}: its spec cannot be read ({}); the claim "
            "is "
            "withheld and its devices held",
            held->meta.Key(), held->spec_problem);
        out->push_back(*std::move(held));
        continue;
      }
      // Not even the status reads: if its node and its devices' addresses
      // do, the claim is withheld all the same (those devices held);
      // only when pdc cannot tell which devices it names does it refuse to
      // start.
      absl::StatusOr<api::ClaimObject> named = DevicesOfUnreadable(*item, *status, *devices);
      if (named.ok()) {
        named->spec_problem = absl::StrCat("its status cannot be read (", c.status().message(),
                                           "); its node and devices do");
        spdlog::error("PersistentDeviceClaim {}: {}; the claim is withheld and its devices held",
                      named->meta.Key(), named->spec_problem);
        out->push_back(*std::move(named));
        continue;
      }
      return absl::DataLossError(absl::StrCat(
          "a PersistentDeviceClaim whose status names devices cannot be read (",
          c.status().message(), "), not even its node and devices' addresses (",
          named.status().message(), "); pdc will not start without knowing which devices it holds"));
    }
    spdlog::error("ignoring a PersistentDeviceClaim that cannot be read: {}",
                  StdSv(c.status().message()));
  }
  return absl::OkStatus();
}

void ClaimObjects::Restore(const api::ClaimObject& o) {
  ClaimObjectState st = StateOf(o.meta);
  if (o.has_status) st.phase = o.claim.status.phase;
  st.conditions = o.conditions;
  RememberDevices(o.claim, &st);
  absl::MutexLock lock(&mu_);
  objects_[o.claim.key] = std::move(st);
}

absl::StatusOr<ClaimObjectState> ClaimObjects::Reread(const ClaimKey& key, absl::Time deadline) {
  const std::string what = absl::StrCat("read claim ", key.ToString());
  ASSIGN_OR_RETURN(pdc::HttpResponse r,
                   calls_->Call("GET", api::ClaimObjectPath(key), "", "", what, deadline));
  if (r.status == 404) {
    absl::MutexLock lock(&mu_);
    objects_.erase(key);
    return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " is gone"));
  }
  if (r.status != 200) return kube::FromApiserver(r.status, r.body, what);
  RETURN_IF_ERROR(ObserveAnswer(r.body));
  std::optional<ClaimObjectState> st = Object(key);
  if (!st.has_value())
    return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " is gone"));
  return *st;
}

// --- Writing -----------------------------------------------------------------

absl::Status ClaimObjects::WriteStatus(const Claim& claim,
                                       const std::vector<api::DeviceFacts>& facts,
                                       std::string_view conflict) {
  const absl::Time deadline = calls_->WriteDeadline();
  const std::string what = absl::StrCat("write the status of claim ", claim.key.ToString());
  for (;;) {
    std::optional<ClaimObjectState> st = Object(claim.key);
    if (!st.has_value()) {
      bool deleted = false;
      {
        absl::MutexLock lock(&mu_);
        deleted = deleted_.contains(claim.uid);
      }
      if (deleted) {
        // Its object was deleted (its finalizer taken off by hand) while a
        // pod of its VM ran: the claim is on its way out, not to be
        // recorded again.
        spdlog::info("claim {}: its object was deleted; status not written",
                     claim.key.ToString());
        Unrecorded(claim.key, absl::StrCat("the object of claim ", claim.key.ToString(),
                                           " was deleted; its status was not written"));
        return absl::OkStatus();
      }
      if (claim.spec.owner_vm.empty()) {
        // A claim people created whose object is gone: the claim
        // controller removes it from the allocator.
        spdlog::info("claim {}: its object is gone; status not written", claim.key.ToString());
        Unrecorded(claim.key, absl::StrCat("the object of claim ", claim.key.ToString(),
                                           " is gone; its status was not written"));
        return absl::OkStatus();
      }
      absl::Status created = Create(claim);
      if (absl::IsAborted(created)) {
        // Another object holds the name: this claim has no record, and the
        // bind that made it is refused (Recorded), the store stays healthy.
        spdlog::warn("{}", StdSv(created.message()));
        Unrecorded(claim.key, std::string(created.message()));
        return absl::OkStatus();
      }
      if (IsObjectRefusal(created)) Unrecorded(claim.key, std::string(created.message()));
      RETURN_IF_ERROR(created);
      continue;
    }
    if (st->claim_uid != claim.uid) {
      // Another object under the same name (one being erased, withheld,
      // re-created): not this claim's record. Any bind relying on it is
      // refused (Recorded); the store stays healthy.
      spdlog::warn(
          "claim {}: the object now has UID {}, not the claim's; status not "
          "written",
          claim.key.ToString(), st->uid);
      Unrecorded(claim.key,
                 absl::StrCat("PersistentDeviceClaim ", claim.key.ToString(), " (UID ", st->uid,
                              ") is another object than the claim's; its status was not "
                              "written"));
      return absl::OkStatus();
    }
    std::vector<api::ClaimCondition> conditions = api::ConditionsOf(
        claim.status, conflict, st->generation, st->conditions, calls_->clock()->Now());
    ASSIGN_OR_RETURN(pdc::HttpResponse r,
                     calls_->Call("PATCH", absl::StrCat(api::ClaimObjectPath(claim.key), "/status"),
                                  api::WriteClaimStatusPatch(st->uid, st->resource_version,
                                                             claim.status, st->generation, facts,
                                                             conditions, claim.spec.owner_vm_uid),
                                  kStoreMergePatch, what, deadline));
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
    if (r.status != 409) {
      absl::Status refused = kube::FromApiserver(r.status, r.body, what);
      if (IsObjectRefusal(refused)) Unrecorded(claim.key, std::string(refused.message()));
      return refused;
    }
    // A stale resourceVersion (someone edited the object): read it again.
    absl::StatusOr<ClaimObjectState> fresh = Reread(claim.key, deadline);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
  }
}

absl::StatusOr<bool> ClaimObjects::WriteConditions(const ClaimKey& key, std::string_view uid,
                                                   const MakeConditions& make,
                                                   std::string_view what) {
  const absl::Time deadline = calls_->WriteDeadline();
  for (;;) {
    std::optional<ClaimObjectState> st = Object(key);
    if (!st.has_value() || st->uid != uid) return false;
    std::vector<api::ClaimCondition> conditions = make(*st);
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        calls_->Call("PATCH", absl::StrCat(api::ClaimObjectPath(key), "/status"),
                     api::WriteClaimConditionsPatch(st->uid, st->resource_version, conditions),
                     kStoreMergePatch, what, deadline));
    if (r.status == 200) {
      RETURN_IF_ERROR(ObserveAnswer(r.body));
      absl::MutexLock lock(&mu_);
      if (auto it = objects_.find(key); it != objects_.end() && it->second.uid == st->uid) {
        it->second.conditions = std::move(conditions);
      }
      return true;
    }
    if (r.status == 404) {
      Forget(key, st->uid);
      return false;
    }
    if (r.status != 409) return kube::FromApiserver(r.status, r.body, what);
    absl::StatusOr<ClaimObjectState> fresh = Reread(key, deadline);
    if (absl::IsNotFound(fresh.status())) return false;
    if (!fresh.ok()) return fresh.status();
  }
}

absl::Status ClaimObjects::Create(const Claim& claim) {
  const absl::Time deadline = calls_->WriteDeadline();
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
      calls_->Call("POST", api::ClaimCollectionPath(claim.key.ns),
                   api::WriteNewClaimObject(claim, owner), kStoreJson, what, deadline);
  absl::Cleanup done = [&] {
    absl::MutexLock lock(&mu_);
    creating_.erase(claim.key);
  };
  if (!created.ok()) return created.status();
  pdc::HttpResponse& r = *created;
  if (r.status == 409) {
    // Created by a try whose answer was lost, or by someone else.
    ASSIGN_OR_RETURN(pdc::HttpResponse got,
                     calls_->Call("GET", api::ClaimObjectPath(claim.key), "", "", what, deadline));
    if (got.status != 200) return kube::FromApiserver(got.status, got.body, what);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::ParseObject(got.body, &doc));
    ASSIGN_OR_RETURN(api::ClaimObject existing, api::ReadClaimObject(doc));
    if (existing.claim.spec.owner_vm != claim.spec.owner_vm ||
        existing.claim.spec.owner_vm_uid != claim.spec.owner_vm_uid || existing.meta.deleting) {
      return absl::AbortedError(
          absl::StrCat(what, ": another PersistentDeviceClaim of that name exists (UID ",
                       existing.meta.uid, ") and is not this VM's"));
    }
    ClaimObjectState st = StateOf(existing.meta);
    st.claim_uid = claim.uid;
    Remember(claim.key, std::move(st));
    return absl::OkStatus();
  }
  if (r.status != 201 && r.status != 200) return kube::FromApiserver(r.status, r.body, what);
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(r.body, &doc));
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, api::kClaimKind));
  ClaimObjectState st = StateOf(meta);
  st.claim_uid = claim.uid;
  Remember(claim.key, std::move(st));
  spdlog::info("created claim {} for VM {} (UID {})", claim.key.ToString(), claim.spec.owner_vm,
               claim.spec.owner_vm_uid);
  return absl::OkStatus();
}

absl::StatusOr<bool> ClaimObjects::Delete(const ClaimKey& key, std::string_view uid) {
  const absl::Time deadline = calls_->WriteDeadline();
  const std::string what = absl::StrCat("delete claim ", key.ToString());
  ASSIGN_OR_RETURN(pdc::HttpResponse r,
                   calls_->Call("DELETE", api::ClaimObjectPath(key), DeleteWithPreconditions(uid),
                                kStoreJson, what, deadline));
  if (r.status == 404 || r.status == 409) {
    // Gone, or another object of that name now: not ours to touch.
    Forget(key, uid);
    return false;
  }
  if (r.status != 200 && r.status != 202) return kube::FromApiserver(r.status, r.body, what);
  RETURN_IF_ERROR(ObserveAnswer(r.body));
  return true;
}

absl::Status ClaimObjects::SetFinalizer(const ClaimKey& key, bool present, std::string_view uid) {
  const absl::Time deadline = calls_->WriteDeadline();
  const std::string what =
      absl::StrCat(present ? "add" : "remove", " the finalizer of claim ", key.ToString());
  for (;;) {
    std::optional<ClaimObjectState> st = Object(key);
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
    ASSIGN_OR_RETURN(
        pdc::HttpResponse r,
        calls_->Call("PATCH", api::ClaimObjectPath(key),
                     api::WriteFinalizersPatch(st->uid, st->resource_version, finalizers),
                     kStoreMergePatch, what, deadline));
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
    absl::StatusOr<ClaimObjectState> fresh = Reread(key, deadline);
    if (absl::IsNotFound(fresh.status())) return absl::OkStatus();
    if (!fresh.ok()) return fresh.status();
    if (fresh->uid != st->uid) return absl::OkStatus();  // Another object now.
  }
}

// --- What the watch says -----------------------------------------------------

absl::Status ClaimObjects::ObserveAnswer(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(doc, api::kClaimKind));
  Observe(meta);
  return absl::OkStatus();
}

void ClaimObjects::Observe(const api::ObjectMeta& meta) {
  const ClaimKey key{meta.ns, meta.name};
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it != objects_.end() &&
      RvNumber(meta.resource_version) < RvNumber(it->second.resource_version)) {
    return;  // Older than what a write of ours answered.
  }
  ClaimObjectState st = StateOf(meta);
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

void ClaimObjects::Remember(const ClaimKey& key, ClaimObjectState state) {
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

void ClaimObjects::Forget(const ClaimKey& key, std::string_view uid) {
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(key);
    if (it == objects_.end() || it->second.uid != uid) return;
    objects_.erase(it);
  }
  if (options_.on_forget) options_.on_forget(key, uid);
}

void ClaimObjects::ObjectDeleted(std::string_view claim_uid) {
  absl::MutexLock lock(&mu_);
  deleted_.insert(std::string(claim_uid));
}

void ClaimObjects::Dropped(std::string_view claim_uid) {
  absl::MutexLock lock(&mu_);
  deleted_.erase(std::string(claim_uid));
}

std::optional<ClaimObjectState> ClaimObjects::Object(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

// --- What a bind relies on ---------------------------------------------------

void ClaimObjects::Unrecorded(const ClaimKey& key, std::string why) {
  absl::MutexLock lock(&mu_);
  unrecorded_[key] = std::move(why);
}

void ClaimObjects::ClearUnrecorded(const ClaimKey& key) {
  absl::MutexLock lock(&mu_);
  unrecorded_.erase(key);
}

absl::Status ClaimObjects::Recorded(const ClaimKey& key, std::string_view claim_uid,
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
  const ClaimObjectState& st = it->second;
  if (st.claim_uid != claim_uid) {
    return absl::FailedPreconditionError(absl::StrCat("PersistentDeviceClaim ", key.ToString(),
                                                      " in the API (UID ", st.uid,
                                                      ") is another object than the claim's"));
  }
  if (st.phase != ClaimPhase::kBound || st.node != node || st.reserved_pod_uid != pod_uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("PersistentDeviceClaim ", key.ToString(), " (UID ", st.uid,
                     ") is not recorded as Bound on node ", Sv(node), " for pod UID ", Sv(pod_uid),
                     " in the API"));
  }
  return absl::OkStatus();
}

}  // namespace pdc::extender
