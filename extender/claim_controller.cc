#include "extender/claim_controller.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "extender/claim_events.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace {

bool HasFinalizer(const api::ObjectMeta& meta) {
  return std::find(meta.finalizers.begin(), meta.finalizers.end(), api::kClaimFinalizer) !=
         meta.finalizers.end();
}

// How long a read that decides whether a claim is gone may take.
constexpr absl::Duration kReadDeadline = absl::Seconds(10);

}  // namespace

ClaimController::ClaimController(Allocator* allocator, KubeApiStore* store, kube::KubeClient* kube,
                                 Options options)
    : allocator_(allocator),
      store_(store),
      kube_(kube),
      options_(options),
      queue_(options_.clock, kube::WorkQueueOptions{.max_delay = options_.retry}),
      cache_(
          std::string(api::kClaimKind),
          [this](const api::json::Value& object, const api::ObjectMeta&) { return Decode(object); },
          &queue_),
      controller_(&queue_, this) {}

ClaimController::~ClaimController() { Stop(); }

void ClaimController::Start() {
  if (started_) return;
  started_ = true;
  queue_.AddAfter(kRefusedWritesKey, options_.retry);
  controller_.Run(1);
}

void ClaimController::Stop() { controller_.Stop(); }

void ClaimController::Kick() {
  std::vector<ClaimKey> keys;
  {
    absl::MutexLock lock(&mu_);
    keys.assign(waiting_.begin(), waiting_.end());
  }
  for (const ClaimKey& key : keys) queue_.Add(key.ToString());
}

size_t ClaimController::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

size_t ClaimController::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_.size();
}

bool ClaimController::SameClaim(const Claim& claim, const api::ClaimObject& object) const {
  if (claim.uid == object.meta.uid) return true;
  // A template claim this process created: the allocator named it first.
  std::optional<KubeApiStore::ObjectState> st = store_->Object(claim.key);
  if (st.has_value() && st->uid == object.meta.uid && st->claim_uid == claim.uid) return true;
  // ... or its object's answer was lost and the watch was first.
  return !claim.spec.owner_vm_uid.empty() &&
         claim.spec.owner_vm == object.claim.spec.owner_vm &&
         claim.spec.owner_vm_uid == object.claim.spec.owner_vm_uid;
}

absl::Status ClaimController::LetGo(const Claim& claim) {
  absl::Status s = allocator_->DeleteClaim(claim.key, /*force=*/false);
  if (!absl::IsFailedPrecondition(s) || !claim.status.reserved_for.has_value()) return s;
  const Reservation& r = *claim.status.reserved_for;
  std::string why;
  const PodFate fate =
      AskPodFate(options_.pods, kube_, claim.key.ns, r.pod_name, r.pod_uid, kReadDeadline, &why);
  if (fate == PodFate::kAlive) {
    return absl::FailedPreconditionError(absl::StrCat("pod ", r.pod_name, " of VM ", r.vm,
                                                      " uses it"));
  }
  if (fate == PodFate::kUnknown) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot tell whether pod ", r.pod_name, " of VM ", r.vm, " runs: ", why));
  }
  spdlog::info("claim {} is being deleted and {} ({}): its reservation ends",
               claim.key.ToString(), r.pod_name, why);
  if (absl::Status rs = allocator_->Release(claim.key, r.pod_uid);
      !rs.ok() && !absl::IsNotFound(rs)) {
    return rs;
  }
  return allocator_->DeleteClaim(claim.key, /*force=*/false);
}

absl::Status ClaimController::ForceLetGo(const Claim& claim) {
  if (claim.status.reserved_for.has_value()) {
    // A running VM's claim is never taken from it: its device would go by
    // the reclaim policy (erased under Delete) under the VM.
    const Reservation& r = *claim.status.reserved_for;
    std::string why;
    const PodFate fate = AskPodFate(options_.pods, kube_, claim.key.ns, r.pod_name, r.pod_uid,
                                    kReadDeadline, &why);
    if (fate == PodFate::kAlive) {
      return absl::FailedPreconditionError(
          absl::StrCat("pod ", r.pod_name, " of VM ", r.vm, " uses it"));
    }
    if (fate == PodFate::kUnknown) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot tell whether pod ", r.pod_name, " of VM ", r.vm, " runs: ", why));
    }
  }
  absl::Status s = allocator_->DeleteClaim(claim.key, /*force=*/true);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

void ClaimController::Track(const ClaimKey& key, bool done) {
  if (done) {
    waiting_.erase(key);
  } else {
    waiting_.insert(key);
  }
}

bool ClaimController::ReclaimWithheld(const ClaimKey& key, std::string_view uid) {
  std::optional<KubeApiStore::WithheldReclaim> w = store_->WithheldReclaimOf(key, uid);
  if (!w.has_value() || w->claim.status.devices.empty()) return true;
  const Claim& c = w->claim;
  absl::Status s = allocator_->ReclaimWithheld(key, uid, c.status.node, w->own, w->shared,
                                               c.spec.reclaim_policy);
  if (!s.ok() && !absl::IsNotFound(s)) {
    spdlog::warn("claim {} (withheld for a device conflict) is being deleted; applying its "
                 "reclaim policy failed: {}",
                 key.ToString(), StdSv(s.message()));
    return false;
  }
  spdlog::info("claim {} (withheld for a device conflict) deleted: reclaim policy {} for its "
               "{} own device(s); {} device(s) it shared held Released for an administrator",
               key.ToString(), ToString(c.spec.reclaim_policy), w->own.size(), w->shared.size());
  store_->WithheldReclaimed(key);
  RecordReleased(options_.events, c, uid);
  return true;
}

bool ClaimController::Settle(const ClaimKey& key, std::string_view uid) {
  const absl::Status s = store_->Reclaiming(key) ? store_->SettleReclaim(key)
                                                 : store_->SetFinalizer(key, false, uid);
  if (!s.ok()) {
    spdlog::warn("claim {}: cannot remove its finalizer: {}", key.ToString(), StdSv(s.message()));
  }
  return s.ok();
}

bool ClaimController::ReconcileClaim(const ClaimKey& key,
                                     const std::optional<api::ClaimObject>& object) {
  absl::StatusOr<Claim> have = allocator_->GetClaim(key);
  if (!object.has_value()) return !have.ok() || ReconcileGone(*have);
  const api::ClaimObject& o = *object;
  if (have.ok() && !SameClaim(*have, o)) {
    // The name was deleted and used again: the old claim is gone.
    if (!ReconcileGone(*have, &o)) return false;
    have = absl::NotFoundError("deleted");
  }
  if (have.ok() && !TakeReclaimPolicy(o, *have)) return false;
  if (o.meta.deleting) return ReconcileDeleting(o, have.ok() ? &*have : nullptr);
  return ReconcileLive(o, have.ok());
}

bool ClaimController::ReconcileGone(const Claim& claim, const api::ClaimObject* successor) {
  const ClaimKey& key = claim.key;
  if (successor == nullptr) {
    // Gone from the watch's view: make sure before letting the claim go
    // (a template claim a bind just created may not have reached the
    // watch yet).
    absl::StatusOr<KubeApiStore::ObjectState> st =
        store_->Reread(key, options_.clock->Now() + kReadDeadline);
    if (st.ok()) return true;  // It exists; its events will come.
    if (!absl::IsNotFound(st.status())) {
      spdlog::warn("claim {}: cannot tell whether its object is gone: {}", key.ToString(),
                   StdSv(st.status().message()));
      return false;
    }
  }
  const absl::Status s = ForceLetGo(claim);
  const std::string what =
      successor == nullptr
          ? "its object was deleted without pdc's finalizer"
          : absl::StrCat("the object was re-created (UID ", successor->meta.uid,
                         ", the claim had ", claim.uid, ")");
  if (s.ok()) {
    spdlog::warn("claim {}: {}; {} devices go by {} reclaim policy", key.ToString(), what,
                 successor == nullptr ? "its" : "the old claim's",
                 successor == nullptr ? "the" : "its");
    return true;
  }
  if (!waiting_.contains(key)) {
    spdlog::warn("claim {}: {}; {} is kept while {}{}", key.ToString(), what,
                 successor == nullptr ? "the claim" : "the old claim", StdSv(s.message()),
                 successor == nullptr ? "" : ", and the new object waits");
  }
  return false;
}

bool ClaimController::TakeReclaimPolicy(const api::ClaimObject& object, Claim& claim) {
  const ReclaimPolicy policy = object.claim.spec.reclaim_policy;
  if (claim.spec.reclaim_policy == policy) return true;
  // The one spec field a user may change (the CRD refuses edits of the
  // others): the devices go by the value the object has when deleted.
  absl::Status s = allocator_->SetReclaimPolicy(claim.key, policy);
  if (absl::IsNotFound(s)) return true;
  if (!s.ok()) {
    spdlog::warn("claim {}: cannot take its reclaim policy {}: {}", claim.key.ToString(),
                 ToString(policy), StdSv(s.message()));
    return false;
  }
  spdlog::info("claim {}: reclaim policy is now {}", claim.key.ToString(), ToString(policy));
  claim.spec.reclaim_policy = policy;
  return true;
}

bool ClaimController::ReconcileDeleting(const api::ClaimObject& o, const Claim* have) {
  const ClaimKey& key = o.claim.key;
  if (!HasFinalizer(o.meta)) return true;  // Not pdc's to hold.
  // A claim whose devices are being erased keeps its finalizer until
  // they are back on their host driver (the store takes it off then).
  if (have == nullptr) {
    if (store_->Withheld(key) && !store_->Reclaiming(key) && !ReclaimWithheld(key, o.meta.uid)) {
      return false;
    }
    return Settle(key, o.meta.uid);
  }
  absl::Status s = LetGo(*have);
  if (s.ok() || absl::IsNotFound(s)) {
    spdlog::info("claim {} deleted", key.ToString());
    RecordReleased(options_.events, *have, o.meta.uid);
    return Settle(key, o.meta.uid);
  }
  if (!absl::IsFailedPrecondition(s)) {
    spdlog::warn("claim {}: delete failed: {}", key.ToString(), StdSv(s.message()));
  } else if (!waiting_.contains(key)) {
    spdlog::info("claim {} is being deleted; kept while {}", key.ToString(), StdSv(s.message()));
  }
  return false;
}

bool ClaimController::ReconcileLive(const api::ClaimObject& o, bool in_allocator) {
  const ClaimKey& key = o.claim.key;
  if (store_->Withheld(key)) return true;  // In a conflict: left alone until the next start.
  if (!HasFinalizer(o.meta)) {
    absl::Status s = store_->SetFinalizer(key, true);
    if (!s.ok()) {
      spdlog::warn("claim {}: {}", key.ToString(), StdSv(s.message()));
      return false;
    }
  }
  if (in_allocator) return true;
  absl::StatusOr<Claim> created = allocator_->CreateClaim(key, o.claim.spec, o.meta.uid);
  if (created.ok()) {
    refused_.erase(key);
    spdlog::info("claim {} ({}) is Pending", key.ToString(), o.meta.uid);
    return true;
  }
  const absl::Status& s = created.status();
  if (absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s)) {
    // The spec will not do (say, a resource name that is no device class);
    // nothing changes until the object does.
    const std::string why(StdSv(s.message()));
    auto [it, added] = refused_.try_emplace(key, why);
    if (added || it->second != why) {
      it->second = why;
      spdlog::warn("claim {} is not accepted: {}", key.ToString(), why);
    }
    return true;
  }
  spdlog::warn("claim {}: cannot be added: {}", key.ToString(), StdSv(s.message()));
  return false;
}

absl::Status ClaimController::Reconcile(const std::string& key) {
  if (key == kRefusedWritesKey) {
    // Claim writes the apiserver refused (their claims' Events say why).
    if (absl::Status s = store_->RetryRefused(); !s.ok()) {
      spdlog::warn("retrying refused claim writes: {}", StdSv(s.message()));
    }
    queue_.AddAfter(kRefusedWritesKey, options_.retry);
    return absl::OkStatus();
  }
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return absl::OkStatus();  // Claims are namespaced.
  const ClaimKey claim{key.substr(0, slash), key.substr(slash + 1)};
  std::optional<kube::TypedCache<api::ClaimObject>::Entry> entry = cache_.Get(key);
  absl::MutexLock lock(&mu_);
  const bool done =
      ReconcileClaim(claim, entry.has_value() ? std::optional(std::move(entry->value))
                                              : std::nullopt);
  Track(claim, done);
  if (unsynced_.erase(key) > 0 && unsynced_.empty()) synced_.Notify();
  if (done) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("claim ", key, " is to be tried again"));
}

void ClaimController::ReportRecovery() {
  for (const ClaimConflict& c : store_->conflicts()) {
    std::vector<std::string> uids;
    for (const ClaimKey& k : c.claims) {
      auto entry = cache_.Get(k.ToString());
      uids.push_back(entry.has_value() ? entry->meta.uid : "");
    }
    RecordConflict(options_.events, c, uids);
  }
  if (absl::Status s = store_->ReportConflicts(); !s.ok()) {
    spdlog::warn("writing the DeviceConflict condition of the claims in conflict: {}",
                 StdSv(s.message()));
  }
  for (const KubeApiStore::WithheldObject& w : store_->invalid()) {
    RecordWithheld(options_.events, w);
  }
  if (absl::Status s = store_->ReportWithheld(); !s.ok()) {
    spdlog::warn("writing the Withheld condition of the claims withheld: {}", StdSv(s.message()));
  }
}

absl::StatusOr<api::ClaimObject> ClaimController::Decode(const api::json::Value& object) {
  absl::StatusOr<api::ClaimObject> o = api::ReadClaimObject(object);
  if (!o.ok()) {
    // A claim withheld for a spec that cannot be read is still followed (by
    // its metadata) so that its deletion applies the reclaim policy.
    absl::StatusOr<api::ClaimObject> held = api::ReadClaimObjectStatusOnly(object);
    if (held.ok() && store_->Withheld(held->claim.key)) {
      o = std::move(held);
    } else {
      spdlog::error("ignoring a PersistentDeviceClaim: {}", StdSv(o.status().message()));
      return o;
    }
  }
  store_->Observe(o->meta);
  return o;
}

void ClaimController::Sink::Replace(const std::vector<const api::json::Value*>& items) {
  ClaimController& c = *controller_;
  absl::flat_hash_set<std::string> listed;
  for (const api::json::Value* item : items) {
    if (auto meta = api::ReadObjectMeta(*item, api::kClaimKind); meta.ok()) {
      listed.insert(meta->Key());
    }
  }
  // Claims whose objects were deleted while nobody watched.
  std::vector<std::string> unlisted;
  for (const Claim& claim : c.allocator_->ListClaims("")) {
    std::string key = claim.key.ToString();
    if (!listed.contains(key)) unlisted.push_back(std::move(key));
  }
  if (!replaced_) {
    absl::MutexLock lock(&c.mu_);
    c.unsynced_ = listed;
    c.unsynced_.insert(unlisted.begin(), unlisted.end());
    if (c.unsynced_.empty()) c.synced_.Notify();
  }
  c.cache_.Replace(items);
  for (const std::string& key : unlisted) c.queue_.Add(key);
  if (!replaced_) {
    replaced_ = true;
    c.ReportRecovery();
  }
}

void ClaimController::KeepObjectDeleted(const ClaimKey& key, std::string_view uid) {
  std::optional<KubeApiStore::ObjectState> st = store_->Object(key);
  if (!st.has_value() || st->uid != uid || st->claim_uid.empty()) return;
  absl::StatusOr<Claim> kept = allocator_->GetClaim(key);
  if (!kept.ok() || kept->uid != st->claim_uid) return;
  // Before the store forgets the object: a status write in between would
  // create it again.
  store_->ObjectDeleted(st->claim_uid);
  // Let go meanwhile (its Dropped came first): nothing to keep.
  kept = allocator_->GetClaim(key);
  if (!kept.ok() || kept->uid != st->claim_uid) store_->Dropped(st->claim_uid);
}

void ClaimController::Sink::Upsert(const api::json::Value& object) {
  controller_->cache_.Upsert(object);
}

void ClaimController::Sink::Remove(const api::json::Value& object) {
  ClaimController& c = *controller_;
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(object, api::kClaimKind);
  if (!meta.ok()) {
    spdlog::error("ignoring a deleted PersistentDeviceClaim: {}", StdSv(meta.status().message()));
    return;
  }
  const ClaimKey key{meta->ns, meta->name};
  {
    absl::MutexLock lock(&c.mu_);
    // A withheld claim whose finalizer was taken off by hand: its reclaim
    // policy applies all the same (once).
    if (c.store_->Withheld(key)) c.ReclaimWithheld(key, meta->uid);
    c.KeepObjectDeleted(key, meta->uid);
    c.store_->Forget(key, meta->uid);
  }
  auto cached = c.cache_.Get(meta->Key());
  if (cached.has_value() && cached->meta.uid != meta->uid) return;  // A newer object of that name.
  c.cache_.Remove(object);
}

}  // namespace pdc::extender
