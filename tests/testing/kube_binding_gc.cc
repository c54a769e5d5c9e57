// pods/binding and the writes of the garbage collector, for KubeStore
// (kube_resources.h).
#include <algorithm>
#include <optional>

#include "tests/testing/kube_resources.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {

// pkg/registry/core/pod/storage/storage.go BindingREST.Create and
// setPodHostAndAnnotations: the pod must exist, not be deleting, and have
// no node; a binding's metadata.uid is a precondition. Errors other than
// NotFound are Conflicts on "pods/binding".
absl::StatusOr<Answer> KubeStore::Bind(const ResourcePath& p,
                                       std::string_view body) {
  absl::StatusOr<Document> binding = ParseObject(body, "a Binding");
  if (!binding.ok()) return binding.status();
  const std::string name = GetString(*binding, {"metadata", "name"});
  if (name != p.name) {
    return BadRequest("name in URL does not match name in Binding object");
  }
  const std::string target_kind = GetString(*binding, {"target", "kind"});
  const std::string node = GetString(*binding, {"target", "name"});
  if (!target_kind.empty() && target_kind != "Node") {
    return Invalid("Binding", "", name,
                   "target.kind: Invalid value: must be empty or 'Node'");
  }
  if (node.empty())
    return Invalid("Binding", "", name, "target.name: Required value");
  const std::string want_uid = GetString(*binding, {"metadata", "uid"});
  const Value* annotations = Find(*binding, {"metadata", "annotations"});
  const std::string now = Rfc3339(clock_->Now());
  absl::StatusOr<Written> w = GuaranteedUpdate(
      *p.resource, p.ns, p.name,
      [&](const Document& old, Document& pod) -> absl::Status {
        auto conflict = [&](std::string_view why) {
          return Conflict("pods/binding", p.name, why);
        };
        const std::string uid = GetString(old, {"metadata", "uid"});
        if (!want_uid.empty() && want_uid != uid) {
          return conflict(Cat("Precondition failed: UID in precondition: ",
                              want_uid, ", UID in object meta: ", uid));
        }
        if (Find(old, {"metadata", "deletionTimestamp"}) != nullptr) {
          return conflict(
              Cat("pod ", p.name,
                  " is being deleted, cannot be assigned to a host"));
        }
        const std::string assigned = GetString(old, {"spec", "nodeName"});
        if (!assigned.empty()) {
          return conflict(Cat("pod ", p.name, " is already assigned to node \"",
                              assigned, "\""));
        }
        auto& a = pod.GetAllocator();
        SetString(pod, {"spec", "nodeName"}, node, a);
        if (annotations != nullptr && annotations->IsObject()) {
          for (auto m = annotations->MemberBegin();
               m != annotations->MemberEnd(); ++m) {
            if (!m->value.IsString()) continue;
            SetString(pod,
                      {"metadata", "annotations",
                       std::string_view(m->name.GetString())},
                      std::string_view(m->value.GetString(),
                                       m->value.GetStringLength()),
                      a);
          }
        }
        // api.UpdatePodCondition(PodScheduled=True).
        Value* conditions = FindMutable(pod, {"status", "conditions"});
        if (conditions == nullptr || !conditions->IsArray()) {
          Set(pod, {"status", "conditions"}, Value(rapidjson::kArrayType), a);
          conditions = FindMutable(pod, {"status", "conditions"});
        }
        Value* scheduled = nullptr;
        for (Value& c : conditions->GetArray()) {
          if (GetString(c, {"type"}) == "PodScheduled") scheduled = &c;
        }
        if (scheduled == nullptr) {
          conditions->PushBack(Value(rapidjson::kObjectType), a);
          scheduled = &(*conditions)[conditions->Size() - 1];
          SetString(*scheduled, {"type"}, "PodScheduled", a);
        }
        if (GetString(*scheduled, {"status"}) != "True") {
          SetString(*scheduled, {"status"}, "True", a);
          SetString(*scheduled, {"lastTransitionTime"}, now, a);
        }
        return absl::OkStatus();
      });
  if (!w.ok()) return w.status();
  return Answer{201, SuccessStatusJson(201)};
}

absl::StatusOr<std::vector<KubeStore::Stored>> KubeStore::ListEverything() {
  std::vector<Stored> out;
  for (const KubeResource& r : resources_) {
    absl::StatusOr<EtcdRangeResult> got =
        etcd_->Range(r.storage_prefix, EtcdClient::PrefixEnd(r.storage_prefix));
    if (!got.ok()) return got.status();
    for (const EtcdKeyValue& kv : got->kvs) {
      absl::StatusOr<Document> obj = Decode(kv);
      if (obj.ok()) out.push_back(Stored{&r, std::move(*obj)});
    }
  }
  return out;
}

absl::Status KubeStore::DeleteIfUid(const KubeResource& r, std::string_view ns,
                                    std::string_view name,
                                    std::string_view uid) {
  ResourcePath p{&r, std::string(ns), std::string(name), ""};
  absl::StatusOr<Answer> a = RemoveOrMark(p, uid, "", std::nullopt);
  if (a.ok() || absl::IsNotFound(a.status()) || absl::IsAborted(a.status())) {
    return absl::OkStatus();
  }
  return a.status();
}

absl::Status KubeStore::DropOwnerReferences(
    const KubeResource& r, std::string_view ns, std::string_view name,
    const std::vector<std::string>& dead) {
  absl::StatusOr<Written> w =
      GuaranteedUpdate(r, ns, name, [&](const Document&, Document& obj) {
        Value* refs = FindMutable(obj, {"metadata", "ownerReferences"});
        if (refs == nullptr || !refs->IsArray()) return absl::OkStatus();
        for (auto it = refs->Begin(); it != refs->End();) {
          const std::string uid = GetString(*it, {"uid"});
          if (std::find(dead.begin(), dead.end(), uid) != dead.end()) {
            it = refs->Erase(it);
          } else {
            ++it;
          }
        }
        return absl::OkStatus();
      });
  if (w.ok() || absl::IsNotFound(w.status())) return absl::OkStatus();
  return w.status();
}

}  // namespace pdc::testing::kube
