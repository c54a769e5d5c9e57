#include "extender/dra/claim_keeper.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "spdlog/spdlog.h"

namespace pdc::extender::dra {
namespace {

// Failed tries in a row after which a claim that cannot be judged gets a
// KeepFailed Event.
constexpr int kWarnAfterRetries = 5;

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::string ToJson(const rapidjson::Value& v) {
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  v.Accept(w);
  return std::string(b.GetString(), b.GetSize());
}

std::string Describe(const Consumer& c) {
  return absl::StrCat(c.resource, "/", c.name, " (uid ", c.uid, ")");
}

}  // namespace

ClaimKeeper::ClaimKeeper(kube::KubeApi* api, ConsumerDirectory* consumers, Options options)
    : api_(api),
      consumers_(consumers),
      options_(std::move(options)),
      queue_(options_.clock),
      cache_("ResourceClaim",
             [](const api::json::Value& object, const api::ObjectMeta&) {
               return ReadDraClaim(object);
             },
             &queue_),
      controller_(&queue_, this) {
  if (options_.registry != nullptr) RegisterMetrics(options_.registry);
}

ClaimKeeper::~ClaimKeeper() { Stop(); }

void ClaimKeeper::RegisterMetrics(MetricsRegistry* r) {
  r->AddCallbackGauge("pdc_dra_keeper_synced",
                      "1 once the DRA claim keeper's watches listed and it reconciles; 0 while "
                      "it waits (a ResourceClaim or pod list the apiserver refuses).",
                      [this] { return started_.load() ? 1.0 : 0.0; });
  r->AddCallbackGauge("pdc_dra_keeper_claims_kept",
                      "ResourceClaims whose status.reservedFor holds a VirtualMachine entry.",
                      [this] { return static_cast<double>(kept()); });
  r->AddCallbackFamily(
      "pdc_dra_keeper_entries_added_total",
      "VirtualMachine entries the DRA claim keeper added to ResourceClaims' reservedFor.",
      MetricType::kCounter, {}, [this] {
        return std::vector<LabeledValue>{{{}, static_cast<double>(added_.load())}};
      });
  r->AddCallbackFamily(
      "pdc_dra_keeper_entries_pruned_total",
      "Entries the DRA claim keeper removed from reservedFor, by consumer: pod (deleted, "
      "replaced or ended) or vm (the VirtualMachine is gone).",
      MetricType::kCounter, {"consumer"}, [this] {
        return std::vector<LabeledValue>{{{"pod"}, static_cast<double>(pruned_pods_.load())},
                                         {{"vm"}, static_cast<double>(pruned_vms_.load())}};
      });
  r->AddCallbackFamily(
      "pdc_dra_keeper_write_conflicts_total",
      "Status updates of the DRA claim keeper answered 409 Conflict (another writer came "
      "first; the claim is read again and retried).",
      MetricType::kCounter, {}, [this] {
        return std::vector<LabeledValue>{{{}, static_cast<double>(conflicts_.load())}};
      });
  r->AddCallbackFamily(
      "pdc_dra_keeper_refusals_total",
      "Looks at a claim in which the DRA claim keeper could not add a VM (another VM keeps "
      "it, the claim is being deleted, or reservedFor is full); counted again at each resync.",
      MetricType::kCounter, {}, [this] {
        return std::vector<LabeledValue>{{{}, static_cast<double>(refused_.load())}};
      });
}

void ClaimKeeper::Start() {
  if (started_.exchange(true)) return;
  controller_.Run(options_.workers);
}

void ClaimKeeper::Stop() { controller_.Stop(); }

void ClaimKeeper::IndexSink::Replace(const std::vector<const api::json::Value*>& items) {
  keeper_->cache_.Replace(items);
  absl::flat_hash_set<std::string> keys;
  for (const auto& e : keeper_->cache_.List()) keys.insert(e.meta.Key());
  {
    absl::MutexLock lock(&keeper_->index_mu_);
    for (const auto& [key, uids] : keeper_->consumers_of_) keys.insert(key);
  }
  for (const std::string& key : keys) keeper_->IndexClaim(key);
}

void ClaimKeeper::IndexSink::Upsert(const api::json::Value& object) {
  keeper_->cache_.Upsert(object);
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(object, "ResourceClaim");
  if (meta.ok()) keeper_->IndexClaim(meta->Key());
}

void ClaimKeeper::IndexSink::Remove(const api::json::Value& object) {
  keeper_->cache_.Remove(object);
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(object, "ResourceClaim");
  if (meta.ok()) keeper_->IndexClaim(meta->Key());
}

void ClaimKeeper::IndexClaim(const std::string& key) {
  const std::optional<kube::TypedCache<DraClaim>::Entry> e = cache_.Get(key);
  std::vector<std::string> uids;
  bool kept = false;
  if (e.has_value()) {
    for (const Consumer& c : e->value.reserved_for) {
      uids.push_back(c.uid);
      kept = kept || IsVm(c);
    }
  }
  absl::MutexLock lock(&index_mu_);
  if (auto old = consumers_of_.find(key); old != consumers_of_.end()) {
    for (const std::string& uid : old->second) {
      auto it = by_consumer_.find(uid);
      if (it == by_consumer_.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) by_consumer_.erase(it);
    }
    consumers_of_.erase(old);
  }
  if (kept) {
    kept_keys_.insert(key);
  } else {
    kept_keys_.erase(key);
  }
  if (uids.empty()) return;
  for (const std::string& uid : uids) by_consumer_[uid].insert(key);
  consumers_of_.emplace(key, std::move(uids));
}

std::vector<std::string> ClaimKeeper::ClaimsOfConsumer(std::string_view ns,
                                                       std::string_view uid) const {
  std::vector<std::string> out;
  const std::string prefix = absl::StrCat(Sv(ns), "/");
  absl::MutexLock lock(&index_mu_);
  auto it = by_consumer_.find(std::string(uid));
  if (it == by_consumer_.end()) return out;
  for (const std::string& key : it->second) {
    if (key.starts_with(prefix)) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ClaimKeeper::ConsumerGone(std::string_view ns, std::string_view uid) {
  for (const std::string& key : ClaimsOfConsumer(ns, uid)) queue_.Add(key);
}

void ClaimKeeper::Look(std::string_view ns, std::string_view name) {
  queue_.Add(absl::StrCat(Sv(ns), "/", Sv(name)));
}

ClaimKeeper::Counts ClaimKeeper::counts() const {
  return Counts{added_.load(), pruned_pods_.load(), pruned_vms_.load(), conflicts_.load(),
                refused_.load()};
}

size_t ClaimKeeper::kept() const {
  absl::MutexLock lock(&index_mu_);
  return kept_keys_.size();
}

std::vector<ClaimKeeper::ClaimView> ClaimKeeper::Claims() const {
  std::vector<ClaimView> out;
  for (auto& e : cache_.List()) {
    ClaimView v;
    v.ns = e.meta.ns;
    v.name = e.meta.name;
    v.uid = e.meta.uid;
    v.claim = std::move(e.value);
    for (const Consumer& c : v.claim.reserved_for) {
      if (!IsVm(c)) continue;
      v.vm = VmIdentity{c.name, c.uid};
      v.persisted = true;
      break;
    }
    if (!v.vm.has_value() && !v.claim.pod_owned) {
      std::vector<VmIdentity> naming = consumers_->VmsNamingClaim(v.ns, v.name);
      std::sort(naming.begin(), naming.end(),
                [](const VmIdentity& a, const VmIdentity& b) { return a.name < b.name; });
      if (!naming.empty()) v.vm = naming.front();
    }
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const ClaimView& a, const ClaimView& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  return out;
}

absl::Status ClaimKeeper::Reconcile(const std::string& key) {
  if (!consumers_->Synced()) {
    // Start() comes after the watches listed: only a test gets here.
    return absl::UnavailableError("the watches have not listed yet");
  }
  const auto [ns, name] = SplitKey(key);
  // The watch's copy says whether anything is to be done (a later change
  // queues the claim again); only a write reads the claim from the API.
  const std::optional<kube::TypedCache<DraClaim>::Entry> cached = cache_.Get(key);
  if (!cached.has_value() || !cached->value.allocated) return absl::OkStatus();
  const PlanInputs in = Gather(ns, name, cached->value, cached->meta.deleting);
  const Plan seen = PlanReservedFor(cached->value, in);
  if (!seen.changed()) {
    const kube::ObjectRef ref{"resource.k8s.io/v1", "ResourceClaim", ns, name, cached->meta.uid};
    Tell(ref, seen, in);
    if (seen.kept) queue_.AddAfter(key, options_.resync);
    return Unjudged(ref, cached->value, in);
  }
  absl::Status s = Keep(ns, name);
  if (absl::IsAborted(s)) ++conflicts_;
  return s;
}

PlanInputs ClaimKeeper::Gather(const std::string& ns, const std::string& name,
                               const DraClaim& claim, bool deleting) {
  PlanInputs in;
  in.deleting = deleting;
  std::vector<std::string> vm_uids;
  for (const Consumer& c : claim.reserved_for) {
    if (IsVm(c)) vm_uids.push_back(c.uid);
    if (!IsPod(c)) continue;
    PodLook look = consumers_->LookAtPod(ns, c.name, c.uid);
    if (look.vm.has_value()) vm_uids.push_back(look.vm->uid);
    in.pods.emplace(c.uid, std::move(look));
  }
  if (!claim.pod_owned) {
    in.naming_vms = consumers_->VmsNamingClaim(ns, name);
    for (const VmIdentity& vm : in.naming_vms) vm_uids.push_back(vm.uid);
  }
  for (const std::string& uid : vm_uids) {
    if (std::optional<bool> names = consumers_->VmNamesClaim(ns, uid, name)) {
      in.vm_names_claim.emplace(uid, *names);
    }
  }
  in.live_vms = consumers_->LiveVms(vm_uids);
  return in;
}

absl::Status ClaimKeeper::Keep(const std::string& ns, const std::string& name) {
  const std::string what = absl::StrCat("read ResourceClaim ", ns, "/", name);
  absl::StatusOr<HttpResponse> got =
      api_->Call("GET", ResourceClaimPath(ns, name), "", "", what, options_.call_timeout);
  if (!got.ok()) return got.status();
  if (got->status == 404) return absl::OkStatus();  // Gone: nothing to keep.
  if (got->status != 200) return kube::FromApiserver(got->status, got->body, what);
  rapidjson::Document doc;
  if (absl::Status s = api::json::ParseObject(got->body, &doc); !s.ok()) return s;
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(doc, "ResourceClaim");
  absl::StatusOr<DraClaim> claim = meta.ok() ? ReadDraClaim(doc) : meta.status();
  if (!claim.ok()) {
    // Not retried: the next change of the object queues it again.
    spdlog::warn("DRA claim keeper: ResourceClaim {}/{} cannot be read: {}", ns, name,
                 claim.status().ToString());
    return absl::OkStatus();
  }
  const PlanInputs in = Gather(ns, name, *claim, meta->deleting);
  const Plan plan = PlanReservedFor(*claim, in);
  const kube::ObjectRef ref{"resource.k8s.io/v1", "ResourceClaim", ns, name, meta->uid};
  if (plan.changed()) {
    WriteReservedFor(doc, plan.reserved_for);
    const std::string write = absl::StrCat("update the status of ResourceClaim ", ns, "/", name);
    absl::StatusOr<HttpResponse> put =
        api_->Call("PUT", ResourceClaimStatusPath(ns, name), ToJson(doc),
                   "application/json", write, options_.call_timeout);
    absl::Status s = !put.ok() ? put.status()
                     : put->status == 200
                         ? absl::OkStatus()
                         : kube::FromApiserver(put->status, put->body, write);
    if (!s.ok()) {
      if (!absl::IsAborted(s) && options_.events != nullptr) {
        options_.events->Record(ref, kube::EventType::kWarning, "KeepFailed",
                                absl::StrCat("could not update status.reservedFor: ", s.message()));
      }
      return s;
    }
  }
  Tell(ref, plan, in);
  if (plan.kept) queue_.AddAfter(absl::StrCat(ns, "/", name), options_.resync);
  return Unjudged(ref, *claim, in);
}

absl::Status ClaimKeeper::Unjudged(const kube::ObjectRef& ref, const DraClaim& claim,
                                   const PlanInputs& in) {
  std::vector<std::string> unknown;
  for (const Consumer& c : claim.reserved_for) {
    auto it = IsPod(c) ? in.pods.find(c.uid) : in.pods.end();
    if (it != in.pods.end() && it->second.state == PodLook::State::kUnknown) {
      unknown.push_back(absl::StrCat("pod ", c.name, ": ", it->second.why));
    }
  }
  if (unknown.empty()) return absl::OkStatus();
  const std::string why = absl::StrCat("cannot tell whether the VM of ", absl::StrJoin(unknown, "; "),
                                       " is to be kept; retried with backoff");
  // Warned once per run of failures, when it has lasted kWarnAfterRetries
  // tries: a failed read or a VMI not in the watch yet usually resolves
  // itself at the next try, and an Event per try would flood the claim.
  if (queue_.Requeues(absl::StrCat(ref.ns, "/", ref.name)) == kWarnAfterRetries) {
    spdlog::warn("DRA claim keeper: ResourceClaim {}/{}: {}", ref.ns, ref.name, why);
    if (options_.events != nullptr) {
      options_.events->Record(ref, kube::EventType::kWarning, "KeepFailed", why);
    }
  }
  return absl::UnavailableError(absl::StrCat("ResourceClaim ", ref.ns, "/", ref.name, ": ", why));
}

void ClaimKeeper::TellVm(const kube::ObjectRef& claim, const VmIdentity& vm, kube::EventType type,
                         std::string_view reason, std::string_view message) {
  if (options_.events == nullptr) return;
  const kube::ObjectRef ref{"kubevirt.io/v1", "VirtualMachine", claim.ns, vm.name, vm.uid};
  options_.events->Record(ref, type, reason,
                          absl::StrCat("ResourceClaim ", claim.name, ": ", Sv(message)));
}

void ClaimKeeper::Tell(const kube::ObjectRef& claim, const Plan& plan, const PlanInputs& in) {
  for (const Consumer& c : plan.added) {
    ++added_;
    spdlog::info("DRA claim keeper: ResourceClaim {}/{} kept for {}", claim.ns, claim.name,
                 Describe(c));
    if (options_.events != nullptr) {
      options_.events->Record(
          claim, kube::EventType::kNormal, "VmReserved",
          absl::StrCat("added VirtualMachine ", c.name, " (uid ", c.uid,
                       ") to status.reservedFor: the allocation outlives the VM's pods"));
    }
    TellVm(claim, {c.name, c.uid}, kube::EventType::kNormal, "VmReserved",
           "this VirtualMachine was added to its status.reservedFor: the claim keeps its "
           "device across stop and start");
  }
  for (const Consumer& c : plan.removed) {
    if (IsVm(c)) {
      ++pruned_vms_;
      spdlog::info("DRA claim keeper: ResourceClaim {}/{}: {} removed (gone, no longer named, "
                   "or the claim is a pod's)",
                   claim.ns, claim.name, Describe(c));
      if (options_.events != nullptr) {
        options_.events->Record(
            claim, kube::EventType::kNormal, "VmUnreserved",
            absl::StrCat("removed VirtualMachine ", c.name, " (uid ", c.uid,
                         ") from status.reservedFor: the VirtualMachine is gone, no longer "
                         "names the claim, or the claim is its pod's (made from a template)"));
      }
      // A VM that is gone has nobody to read its Events.
      if (in.live_vms.count(c.uid)) {
        TellVm(claim, {c.name, c.uid}, kube::EventType::kNormal, "VmUnreserved",
               "this VirtualMachine was removed from its status.reservedFor: it no longer "
               "names the claim, or the claim is its pod's (made from a template); the device "
               "is no longer kept for it");
      }
    } else {
      ++pruned_pods_;
    }
  }
  refused_ += plan.refused.size();
  if (!plan.refused.empty() && options_.events != nullptr) {
    options_.events->Record(claim, kube::EventType::kWarning, "KeepFailed",
                            absl::StrCat("cannot keep the allocation for ",
                                         absl::StrJoin(plan.refused, "; ")));
  }
  for (const auto& [vm, why] : plan.refused_vms) {
    TellVm(claim, vm, kube::EventType::kWarning, "KeepFailed",
           absl::StrCat("cannot keep the allocation for this VirtualMachine: ", why));
  }
}

}  // namespace pdc::extender::dra
