#include "tests/testing/resourceclaim_controller_double.h"

#include <algorithm>
#include <utility>

#include "tests/testing/sv_strings.h"

namespace pdc::testing {
namespace {

using kube::Document;
using kube::Value;

bool HasFinalizer(const Value& obj) {
  const std::vector<std::string> f =
      kube::GetStrings(obj, {"metadata", "finalizers"});
  return std::find(f.begin(), f.end(), kClaimFinalizer) != f.end();
}

void DropFinalizer(Document& obj) {
  Value* f = kube::FindMutable(obj, {"metadata", "finalizers"});
  if (f == nullptr || !f->IsArray()) return;
  for (auto it = f->Begin(); it != f->End();) {
    if (it->IsString() && std::string_view(it->GetString()) == kClaimFinalizer) {
      it = f->Erase(it);
    } else {
      ++it;
    }
  }
}

// The pod that owns the claim as its controller (a claim made from a
// template), as {name, uid}; empty when none.
std::pair<std::string, std::string> OwningPod(const Value& claim) {
  const Value* refs = kube::Find(claim, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->IsArray()) return {};
  for (const Value& r : refs->GetArray()) {
    const Value* c = kube::Find(r, {"controller"});
    if (kube::GetString(r, {"apiVersion"}) == "v1" &&
        kube::GetString(r, {"kind"}) == "Pod" && c != nullptr && c->IsBool() &&
        c->GetBool()) {
      return {kube::GetString(r, {"name"}), kube::GetString(r, {"uid"})};
    }
  }
  return {};
}

}  // namespace

std::string_view ToString(ClaimControllerVersion v) {
  return v == ClaimControllerVersion::kVersion134 ? "1.34/1.35" : "1.36";
}

bool IsPodDone(const Value& pod) {
  const std::string phase = kube::GetString(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed") return true;
  return kube::Find(pod, {"metadata", "deletionTimestamp"}) != nullptr &&
         kube::GetString(pod, {"spec", "nodeName"}).empty();
}

absl::StatusOr<std::unique_ptr<ResourceClaimControllerDouble>>
ResourceClaimControllerDouble::Start(const std::string& api_url,
                                     ClaimControllerVersion version) {
  absl::StatusOr<std::unique_ptr<kube::KubeJsonClient>> api =
      kube::KubeJsonClient::Connect(api_url);
  if (!api.ok()) return api.status();
  return std::unique_ptr<ResourceClaimControllerDouble>(
      new ResourceClaimControllerDouble(*std::move(api), version));
}

absl::StatusOr<std::vector<ResourceClaimControllerDouble::Outcome>>
ResourceClaimControllerDouble::SyncAll(std::string_view ns) {
  absl::StatusOr<Document> list = api_->Get(kube::ClaimsPath(ns));
  if (!list.ok()) return list.status();
  std::vector<std::string> names;
  if (const Value* items = kube::Find(*list, {"items"});
      items != nullptr && items->IsArray()) {
    for (const Value& i : items->GetArray())
      names.push_back(kube::GetString(i, {"metadata", "name"}));
  }
  std::sort(names.begin(), names.end());
  std::vector<Outcome> out;
  for (const std::string& n : names) out.push_back(SyncClaim(ns, n));
  return out;
}

absl::StatusOr<bool> ResourceClaimControllerDouble::KeepPod(
    std::string_view ns, const Value& ref) {
  absl::StatusOr<Document> pod =
      api_->Get(kube::PodPath(ns, kube::GetString(ref, {"name"})));
  if (!pod.ok()) {
    if (absl::IsNotFound(pod.status())) return false;  // Deleted.
    return pod.status();
  }
  if (kube::GetString(*pod, {"metadata", "uid"}) !=
      kube::GetString(ref, {"uid"})) {
    return false;  // Replaced.
  }
  return !IsPodDone(*pod);
}

ResourceClaimControllerDouble::Outcome ResourceClaimControllerDouble::SyncClaim(
    std::string_view ns, std::string_view name) {
  Outcome out;
  out.claim = std::string(name);
  absl::StatusOr<Document> claim = api_->Get(kube::ClaimPath(ns, name));
  if (!claim.ok()) {
    if (!absl::IsNotFound(claim.status())) out.status = claim.status();
    return out;
  }
  Document valid(rapidjson::kArrayType);
  const Value* reserved = kube::Find(*claim, {"status", "reservedFor"});
  size_t before = 0;
  if (reserved != nullptr && reserved->IsArray()) {
    before = reserved->Size();
    for (const Value& ref : reserved->GetArray()) {
      if (kube::GetString(ref, {"apiGroup"}).empty() &&
          kube::GetString(ref, {"resource"}) == "pods") {
        absl::StatusOr<bool> keep = KeepPod(ns, ref);
        if (!keep.ok()) {
          out.status = keep.status();
          return out;
        }
        if (*keep) valid.PushBack(Value(ref, valid.GetAllocator()), valid.GetAllocator());
        continue;
      }
      if (version_ == ClaimControllerVersion::kVersion134) {
        // "TODO: support generic object lookup".
        out.status = absl::UnimplementedError(
            Cat("unsupported ReservedFor entry: ", kube::ToJson(ref)));
        return out;
      }
      valid.PushBack(Value(ref, valid.GetAllocator()), valid.GetAllocator());
    }
  }
  const bool prune = valid.Size() < before;
  out.pruned = static_cast<int>(before - valid.Size());
  out.status = Write(*claim, &valid, prune, out);
  if (!out.status.ok() || valid.Size() > 0) return out;
  // Unreserved: a claim its pod made from a template goes with the pod.
  auto [pod_name, pod_uid] = OwningPod(*claim);
  if (pod_name.empty()) return out;
  absl::StatusOr<Document> pod = api_->Get(kube::PodPath(ns, pod_name));
  const bool gone = !pod.ok() && absl::IsNotFound(pod.status());
  if (!pod.ok() && !gone) {
    out.status = pod.status();
    return out;
  }
  if (gone || kube::GetString(*pod, {"metadata", "uid"}) != pod_uid ||
      IsPodDone(*pod)) {
    absl::StatusOr<Document> d = api_->Delete(kube::ClaimPath(ns, name));
    if (!d.ok() && !absl::IsNotFound(d.status())) out.status = d.status();
  }
  return out;
}

absl::Status ResourceClaimControllerDouble::Write(Document& claim, Value* valid,
                                                  bool prune, Outcome& out) {
  auto& a = claim.GetAllocator();
  const std::string ns = kube::GetString(claim, {"metadata", "namespace"});
  const std::string name = kube::GetString(claim, {"metadata", "name"});
  const bool deleting =
      kube::Find(claim, {"metadata", "deletionTimestamp"}) != nullptr;
  const bool allocated =
      kube::Find(claim, {"status", "allocation"}) != nullptr &&
      !kube::Find(claim, {"status", "allocation"})->IsNull();
  if (prune) {
    // Not a patch: the update must fail when anything changed meanwhile.
    kube::Set(claim, {"status", "reservedFor"}, Value(*valid, a), a);
    // Deallocate on the transition *this* pruning makes to "not used".
    if (valid->Empty() && HasFinalizer(claim)) {
      kube::Remove(claim, {"status", "allocation"});
      out.deallocated = allocated;
    }
    absl::StatusOr<Document> w =
        api_->Put(Cat(kube::ClaimPath(ns, name), "/status"), claim);
    if (!w.ok()) return w.status();
    if (HasFinalizer(*w) && kube::Find(*w, {"status", "allocation"}) == nullptr) {
      DropFinalizer(*w);
      absl::StatusOr<Document> u = api_->Put(kube::ClaimPath(ns, name), *w);
      if (!u.ok()) return u.status();
    }
    return absl::OkStatus();
  }
  if (HasFinalizer(claim) && deleting && valid->Empty()) {
    if (allocated) {
      kube::Remove(claim, {"status", "allocation"});
      absl::StatusOr<Document> w =
          api_->Put(Cat(kube::ClaimPath(ns, name), "/status"), claim);
      if (!w.ok()) return w.status();
      claim.CopyFrom(*w, a);
      out.deallocated = true;
    }
    DropFinalizer(claim);
    absl::StatusOr<Document> u = api_->Put(kube::ClaimPath(ns, name), claim);
    if (!u.ok() && !absl::IsNotFound(u.status())) return u.status();
  }
  return absl::OkStatus();
}

}  // namespace pdc::testing
