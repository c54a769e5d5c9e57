#include "extender/pod_directory.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/kube_objects.h"
#include "api/scheduler_wire.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;

namespace {

std::string NameKey(std::string_view ns, std::string_view name) {
  return absl::StrCat(Sv(ns), "/", Sv(name));
}

// What the directory keeps of a pod object; nullopt (logged) when pdc
// cannot read it.
struct Read {
  api::ObjectMeta meta;
  api::PodPlacement placement;
};
std::optional<Read> ReadPod(const json::Value& object) {
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(object, "Pod");
  absl::StatusOr<api::PodPlacement> placement =
      meta.ok() ? api::ReadPodPlacement(object) : absl::StatusOr<api::PodPlacement>();
  const absl::Status s = meta.ok() ? placement.status() : meta.status();
  if (!s.ok()) {
    spdlog::warn("ignoring a pod pdc cannot read: {}", StdSv(s.message()));
    return std::nullopt;
  }
  return Read{*std::move(meta), *std::move(placement)};
}

bool Over(const api::PodPlacement& p, PodEnd end) {
  return end == PodEnd::kDone ? p.Done() : p.Ended();
}

}  // namespace

std::string PodsOfScheduler(std::string_view scheduler) {
  // A scheduler name is a DNS-1123 subdomain: nothing in it needs escaping.
  return absl::StrCat("fieldSelector=spec.schedulerName%3D", Sv(scheduler));
}

void PodDirectory::Replace(const std::vector<const json::Value*>& items) {
  absl::flat_hash_map<std::string, Pod> next;
  absl::flat_hash_map<std::string, std::string> names;
  for (const json::Value* item : items) {
    std::optional<Read> r = ReadPod(*item);
    if (!r.has_value()) continue;
    names.insert_or_assign(NameKey(r->meta.ns, r->meta.name), r->meta.uid);
    next.insert_or_assign(r->meta.uid, Pod{r->meta.ns, r->meta.name, r->placement.node_name,
                                           Over(r->placement, end_)});
  }
  std::vector<PodRef> gone;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [uid, old] : pods_) {
      if (old.ended) continue;  // Reported when it ended.
      auto it = next.find(uid);
      if (it == next.end() || it->second.ended) gone.push_back(PodRef{old.ns, old.name, uid});
    }
    pods_ = std::move(next);
    names_ = std::move(names);
  }
  listed_.store(true);
  Report(gone);
}

void PodDirectory::Upsert(const json::Value& object) {
  std::optional<Read> r = ReadPod(object);
  if (!r.has_value()) return;
  std::vector<PodRef> gone;
  {
    absl::MutexLock lock(&mu_);
    auto [name, fresh_name] = names_.try_emplace(NameKey(r->meta.ns, r->meta.name), r->meta.uid);
    if (!fresh_name && name->second != r->meta.uid) {
      // The name's earlier pod was deleted without the watch showing it.
      if (auto old = pods_.find(name->second); old != pods_.end()) {
        if (!old->second.ended) {
          gone.push_back(PodRef{old->second.ns, old->second.name, old->first});
        }
        pods_.erase(old);
      }
      name->second = r->meta.uid;
    }
    auto [it, inserted] = pods_.try_emplace(r->meta.uid);
    const bool over = Over(r->placement, end_);
    const bool ended_now = over && (inserted || !it->second.ended);
    it->second = Pod{r->meta.ns, r->meta.name, r->placement.node_name, over};
    if (ended_now) gone.push_back(PodRef{r->meta.ns, r->meta.name, r->meta.uid});
  }
  Report(gone);
}

void PodDirectory::Remove(const json::Value& object) {
  absl::StatusOr<api::ObjectMeta> meta = api::ReadObjectMeta(object, "Pod");
  if (!meta.ok()) return;  // Not held: Upsert refused it too.
  std::vector<PodRef> gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find(meta->uid);
    if (it == pods_.end()) return;
    const bool reported = it->second.ended;  // When it ended.
    pods_.erase(it);
    auto name = names_.find(NameKey(meta->ns, meta->name));
    if (name != names_.end() && name->second == meta->uid) names_.erase(name);
    if (!reported) gone.push_back(PodRef{meta->ns, meta->name, meta->uid});
  }
  Report(gone);
}

void PodDirectory::Report(const std::vector<PodRef>& gone) const {
  if (on_gone_ == nullptr) return;
  for (const PodRef& p : gone) on_gone_(p);
}

PodFate PodDirectory::Fate(std::string_view ns, std::string_view name, std::string_view uid,
                           std::string* why) const {
  if (!listed_.load()) {
    *why = "the pod watch has not listed yet";
    return PodFate::kUnknown;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = pods_.find(Sv(uid)); it != pods_.end()) {
    if (it->second.ended) {
      *why = "the pod watch shows it ended";
      return PodFate::kGone;
    }
    *why = "the pod watch shows it";
    return PodFate::kAlive;
  }
  if (auto it = names_.find(NameKey(ns, name)); it != names_.end() && it->second != uid) {
    *why = absl::StrCat("the pod watch shows the pod replaced (now UID ", it->second, ")");
    return PodFate::kGone;
  }
  *why = "the pod watch does not have it";
  return PodFate::kUnknown;
}

size_t PodDirectory::size() const {
  absl::MutexLock lock(&mu_);
  return pods_.size();
}

PodFate AskPodFate(const PodDirectory* pods, kube::KubeClient* kube, std::string_view ns,
                   std::string_view pod_name, std::string_view pod_uid, absl::Duration timeout,
                   std::string* why, PodEnd end) {
  if (pods != nullptr) {
    const PodFate seen = pods->Fate(ns, pod_name, pod_uid, why);
    if (seen != PodFate::kUnknown) return seen;
  }
  absl::StatusOr<std::string> pod = kube->GetPod(ns, pod_name, timeout);
  if (!pod.ok()) {
    if (pod.status().code() == absl::StatusCode::kNotFound) {
      *why = "the pod was deleted";
      return PodFate::kGone;
    }
    *why = std::string(pod.status().message());
    return PodFate::kUnknown;
  }
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(*pod, &doc); !s.ok()) {
    *why = "kube-apiserver answered with a pod that is not JSON";
    return PodFate::kUnknown;
  }
  absl::StatusOr<api::PodPlacement> placement = api::ReadPodPlacement(doc);
  if (!placement.ok()) {
    *why = absl::StrCat("kube-apiserver answered with a pod pdc cannot read: ",
                        placement.status().message());
    return PodFate::kUnknown;
  }
  if (placement->uid != pod_uid) {
    *why = absl::StrCat("the pod was replaced (now UID ", placement->uid, ")");
    return PodFate::kGone;
  }
  if (Over(*placement, end)) {
    *why = placement->Ended() ? absl::StrCat("the pod is ", placement->phase)
                              : "the pod is being deleted and was never scheduled";
    return PodFate::kGone;
  }
  *why = "the pod exists";
  return PodFate::kAlive;
}

}  // namespace pdc::extender
