#include "tests/testing/kube_resources.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "tests/testing/kube_crd_rules.h"
#include "tests/testing/kube_list.h"
#include "tests/testing/kube_resource_claims.h"
#include "tests/testing/kube_resource_slices.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

// How often GuaranteedUpdate re-reads after losing a race before it gives up.
constexpr int kMaxUpdateAttempts = 64;

bool IsDnsSubdomain(std::string_view s) {
  // k8s.io/apimachinery/pkg/util/validation: lower-case alphanumerics, '-'
  // and '.', starting and ending alphanumeric, at most 253 characters.
  if (s.empty() || s.size() > 253) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

// The stored form: resourceVersion is never stored (etcd's mod_revision is
// the version; APIObjectVersioner.PrepareObjectForStorage clears it).
std::string StoredJson(const Document& obj) {
  Document copy;
  copy.CopyFrom(obj, copy.GetAllocator());
  Remove(copy, {"metadata", "resourceVersion"});
  return ToJson(copy);
}

Document Copy(const Value& v) {
  Document d;
  d.CopyFrom(v, d.GetAllocator());
  return d;
}

bool SameMember(const Value& a, const Value& b, std::string_view key) {
  const Value* x = Find(a, {key});
  const Value* y = Find(b, {key});
  if (x == nullptr || y == nullptr) return x == y;
  return *x == *y;
}

// Everything but metadata and status: what bumps metadata.generation
// (k8s.io/apiextensions-apiserver/pkg/registry/customresource/strategy.go
// PrepareForUpdate; the double applies the rule to every resource).
bool SpecChanged(const Value& old, const Value& obj) {
  auto count = [](const Value& v) {
    int n = 0;
    for (auto m = v.MemberBegin(); m != v.MemberEnd(); ++m) {
      const std::string_view k(m->name.GetString(), m->name.GetStringLength());
      if (k != "metadata" && k != "status") ++n;
    }
    return n;
  };
  if (count(old) != count(obj)) return true;
  for (auto m = obj.MemberBegin(); m != obj.MemberEnd(); ++m) {
    const std::string_view k(m->name.GetString(), m->name.GetStringLength());
    if (k == "metadata" || k == "status") continue;
    if (!SameMember(old, obj, k)) return true;
  }
  return false;
}

absl::Status Precondition(const ResourcePath& p, std::string_view what,
                          std::string_view want, std::string_view have) {
  // k8s.io/apiserver/pkg/storage/interfaces.go Preconditions.Check, turned
  // into a Conflict by storage/errors (InterpretDeleteError/UpdateError).
  return Conflict(p.resource->qualified(), p.name,
                  Cat("Precondition failed: ", what, " in precondition: ", want,
                      ", ", what, " in object meta: ", have));
}

}  // namespace

std::string KubeResource::api_version() const {
  return group.empty() ? version : Cat(group, "/", version);
}

std::string KubeResource::qualified() const {
  return group.empty() ? resource : Cat(resource, ".", group);
}

std::vector<KubeResource> StandardResources() {
  // One line per resource: group, version, resource, kind, status, binding,
  // graceful delete, etcd prefix, validation.
  return {
      {"", "v1", "pods", "Pod", true, true, true, "/registry/pods/", nullptr},
      {"", "v1", "events", "Event", false, false, false, "/registry/events/", nullptr},
      {"", "v1", "configmaps", "ConfigMap", false, false, false, "/registry/configmaps/", nullptr},
      {"pdc.kubevirt.io", "v1alpha1", "persistentdeviceclaims",
       "PersistentDeviceClaim", true, false, false,
       "/registry/pdc.kubevirt.io/persistentdeviceclaims/", ValidatePersistentDeviceClaim},
      {"kubevirt.io", "v1", "virtualmachines", "VirtualMachine", true, false,
       false, "/registry/kubevirt.io/virtualmachines/", nullptr},
      {"kubevirt.io", "v1", "virtualmachineinstances", "VirtualMachineInstance",
       true, false, false, "/registry/kubevirt.io/virtualmachineinstances/", nullptr},
      {"coordination.k8s.io", "v1", "leases", "Lease", false, false, false,
       "/registry/leases/", nullptr},
      {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", false, false, false,
       "/registry/endpointslices/", nullptr},
      {"resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", true, false, false,
       "/registry/resourceclaims/", ValidateResourceClaim},
      {"resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", false,
       false, false, "/registry/resourceclaimtemplates/", nullptr},
      {"resource.k8s.io", "v1", "resourceslices", "ResourceSlice", false, false, false,
       "/registry/resourceslices/", ValidateResourceSlice, /*cluster_scoped=*/true},
      {"resource.k8s.io", "v1", "deviceclasses", "DeviceClass", false, false, false,
       "/registry/deviceclasses/", ValidateDeviceClass, /*cluster_scoped=*/true},
  };
}

Query ParseQuery(std::string_view query) {
  Query out;
  auto decode = [](std::string_view s) {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '+') {
        r.push_back(' ');
      } else if (s[i] == '%' && i + 2 < s.size()) {
        int v = 0;
        if (HexAtoi(s.substr(i + 1, 2), &v)) {
          r.push_back(static_cast<char>(v));
          i += 2;
        } else {
          r.push_back('%');
        }
      } else {
        r.push_back(s[i]);
      }
    }
    return r;
  };
  for (std::string_view kv : Split(query, '&', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) {
      out[decode(kv)] = "";
    } else {
      out[decode(kv.substr(0, eq))] = decode(kv.substr(eq + 1));
    }
  }
  return out;
}

KubeStore::KubeStore(EtcdClient* etcd, std::vector<KubeResource> resources,
                     const Clock* clock)
    : etcd_(etcd), resources_(std::move(resources)), clock_(clock) {}

absl::StatusOr<ResourcePath> KubeStore::ParsePath(std::string_view path) const {
  const absl::Status not_found = ApiError(
      {404, "NotFound"},
      Cat("the server could not find the requested resource (", path, ")"));
  std::vector<std::string_view> parts = Split(path, '/', absl::SkipEmpty());
  std::string group, version;
  size_t i;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = std::string(parts[1]);
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = std::string(parts[1]);
    version = std::string(parts[2]);
    i = 3;
  } else {
    return not_found;
  }
  ResourcePath p;
  if (parts.size() > i + 1 && parts[i] == "namespaces") {
    p.ns = std::string(parts[i + 1]);
    i += 2;
  }
  if (i >= parts.size()) return not_found;
  for (const KubeResource& r : resources_) {
    if (r.group == group && r.version == version && r.resource == parts[i])
      p.resource = &r;
  }
  if (p.resource == nullptr) return not_found;
  // A cluster-scoped resource has no namespaced paths.
  if (p.resource->cluster_scoped && !p.ns.empty()) return not_found;
  ++i;
  if (i < parts.size()) {
    // Named objects of a namespaced resource live in a namespace.
    if (p.ns.empty() && !p.resource->cluster_scoped) return not_found;
    p.name = std::string(parts[i++]);
  }
  if (i < parts.size()) p.subresource = std::string(parts[i++]);
  if (i < parts.size()) return not_found;
  if (!p.subresource.empty() &&
      !((p.subresource == "status" && p.resource->status_subresource) ||
        (p.subresource == "binding" && p.resource->binding_subresource))) {
    return not_found;
  }
  return p;
}

std::string KubeStore::Key(const KubeResource& r, std::string_view ns,
                           std::string_view name) {
  // Cluster-scoped objects are stored at <prefix><name>
  // (k8s.io/apiserver/pkg/registry/generic/registry/store.go NoNamespaceKeyFunc).
  return r.cluster_scoped ? Cat(r.storage_prefix, name)
                          : Cat(r.storage_prefix, ns, "/", name);
}

std::string KubeStore::CollectionPrefix(const KubeResource& r,
                                        std::string_view ns) {
  return ns.empty() ? r.storage_prefix : Cat(r.storage_prefix, ns, "/");
}

absl::StatusOr<Document> KubeStore::Decode(const EtcdKeyValue& kv, int64_t rv) {
  Document d;
  d.Parse(kv.value.data(), kv.value.size());
  if (d.HasParseError() || !d.IsObject()) {
    return absl::DataLossError(
        Cat("etcd key ", kv.key, " holds no JSON object"));
  }
  SetString(d, {"metadata", "resourceVersion"},
            Cat(rv > 0 ? rv : kv.mod_revision), d.GetAllocator());
  return d;
}

void KubeStore::Removed(const Document& obj) {
  const std::string uid = GetString(obj, {"metadata", "uid"});
  if (on_removed_ && !uid.empty()) on_removed_(uid);
}

// k8s.io/apiserver/pkg/registry/generic/registry/store.go Create, with
// rest.BeforeCreate (k8s.io/apiserver/pkg/registry/rest/create.go) filling
// the system fields, and k8s.io/apiserver/pkg/storage/etcd3/store.go Create: a
// transaction that puts the key only when it does not exist (create_revision ==
// 0).
absl::StatusOr<Answer> KubeStore::Create(const ResourcePath& p,
                                         std::string_view body) {
  const KubeResource& r = *p.resource;
  if (p.ns.empty() && !r.cluster_scoped)
    return ApiError({405, "MethodNotAllowed"}, "POST needs a namespace");
  absl::StatusOr<Document> parsed = ParseObject(body, Cat("a ", r.kind));
  if (!parsed.ok()) return parsed.status();
  Document& obj = *parsed;
  auto& a = obj.GetAllocator();
  const std::string kind = GetString(obj, {"kind"});
  const std::string api_version = GetString(obj, {"apiVersion"});
  if ((!kind.empty() && kind != r.kind) ||
      (!api_version.empty() && api_version != r.api_version())) {
    return BadRequest(Cat("the API version in the data (", api_version,
                          ", kind ", kind,
                          ") does not match the expected API version (",
                          r.api_version(), ", kind ", r.kind, ")"));
  }
  const std::string body_ns = GetString(obj, {"metadata", "namespace"});
  if (!body_ns.empty() && body_ns != p.ns && !r.cluster_scoped) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace "
        "sent on the request");
  }
  if (!GetString(obj, {"metadata", "resourceVersion"}).empty()) {
    // k8s.io/apiserver/pkg/storage/etcd3/store.go Create.
    return ApiError(
        {500, "InternalError"},
        "resourceVersion should not be set on objects to be created");
  }
  SetString(obj, {"kind"}, r.kind, a);
  SetString(obj, {"apiVersion"}, r.api_version(), a);
  if (r.cluster_scoped) {
    Remove(obj, {"metadata", "namespace"});
  } else {
    SetString(obj, {"metadata", "namespace"}, p.ns, a);
  }
  SetString(obj, {"metadata", "uid"}, RandomUuid(), a);
  SetString(obj, {"metadata", "creationTimestamp"}, Rfc3339(clock_->Now()), a);
  Set(obj, {"metadata", "generation"}, Value(int64_t{1}), a);
  Remove(obj, {"metadata", "deletionTimestamp"});
  Remove(obj, {"metadata", "deletionGracePeriodSeconds"});
  Remove(obj, {"metadata", "managedFields"});
  if (r.status_subresource) {
    // A create never sets status when there is a status subresource
    // (customresource strategy.go PrepareForCreate; the pod strategy resets
    // it to phase Pending).
    Remove(obj, {"status"});
    if (r.kind == "Pod") SetString(obj, {"status", "phase"}, "Pending", a);
  }
  if (r.validate) {
    if (absl::Status s = r.validate(nullptr, obj, ""); !s.ok()) return s;
  }
  std::string name = GetString(obj, {"metadata", "name"});
  const std::string generate = GetString(obj, {"metadata", "generateName"});
  if (name.empty() && generate.empty()) {
    return Invalid(
        r.kind, r.group, "",
        "metadata.name: Required value: name or generateName is required");
  }
  // k8s.io/apiserver/pkg/storage/names/generate.go: generateName + 5
  // random characters; a taken name is tried again with new characters.
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (!generate.empty() && GetString(obj, {"metadata", "name"}).empty()) {
      name = generate + RandomSuffix(5);
    } else if (attempt > 0 && generate.empty()) {
      break;
    }
    if (!IsDnsSubdomain(name)) {
      return Invalid(
          r.kind, r.group, name,
          Cat("metadata.name: Invalid value: \"", name,
              "\": a lowercase RFC 1123 subdomain must consist of lower case "
              "alphanumeric characters, '-' or '.', and must start and end "
              "with an alphanumeric character"));
    }
    Document stored = Copy(obj);
    SetString(stored, {"metadata", "name"}, name, stored.GetAllocator());
    const std::string key = Key(r, p.ns, name);
    absl::StatusOr<EtcdTxnResult> t =
        etcd_->Txn({{key, EtcdCompare::Target::kCreateRevision, 0}},
                   {{EtcdOp::Kind::kPut, key, StoredJson(stored)}}, {});
    if (!t.ok()) return t.status();
    if (t->succeeded) {
      SetString(stored, {"metadata", "resourceVersion"}, Cat(t->revision),
                stored.GetAllocator());
      return Answer{201, ToJson(stored)};
    }
    if (!GetString(obj, {"metadata", "name"}).empty() || generate.empty()) {
      return AlreadyExists(r.qualified(), name);
    }
  }
  return AlreadyExists(r.qualified(), name);
}

absl::StatusOr<Answer> KubeStore::Get(const ResourcePath& p) {
  absl::StatusOr<EtcdRangeResult> got =
      etcd_->Range(Key(*p.resource, p.ns, p.name));
  if (!got.ok()) return got.status();
  if (got->kvs.empty()) return NotFound(p.resource->qualified(), p.name);
  absl::StatusOr<Document> obj = Decode(got->kvs[0]);
  if (!obj.ok()) return obj.status();
  return Answer{200, ToJson(*obj)};
}

absl::StatusOr<Answer> KubeStore::List(const ResourcePath& p, const Query& q) {
  return ListCollection(*etcd_, *p.resource, p.ns, q);
}

absl::StatusOr<KubeStore::Written> KubeStore::GuaranteedUpdate(
    const KubeResource& r, std::string_view ns, std::string_view name,
    const Mutation& mutate) {
  const std::string key = Key(r, ns, name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    absl::StatusOr<EtcdRangeResult> got = etcd_->Range(key);
    if (!got.ok()) return got.status();
    if (got->kvs.empty()) return NotFound(r.qualified(), name);
    const EtcdKeyValue& kv = got->kvs[0];
    absl::StatusOr<Document> old = Decode(kv);
    if (!old.ok()) return old.status();
    Document obj = Copy(*old);
    if (absl::Status s = mutate(*old, obj); !s.ok()) return s;
    const std::string stored = StoredJson(obj);
    // Unchanged (compared as JSON values: member order does not matter):
    // nothing is written and the resourceVersion stays, as GuaranteedUpdate
    // does when the new bytes equal the old.
    Document before;
    before.Parse(kv.value.data(), kv.value.size());
    Document after;
    after.Parse(stored.data(), stored.size());
    if (before == after) return Written{std::move(*old), false};
    // rest.ShouldDeleteDuringUpdate (k8s.io/apiserver/pkg/registry/generic/
    // registry/store.go): the last finalizer of a deleting object is gone.
    const bool remove =
        Find(obj, {"metadata", "deletionTimestamp"}) != nullptr &&
        GetStrings(obj, {"metadata", "finalizers"}).empty() &&
        GetInt(obj, {"metadata", "deletionGracePeriodSeconds"}) == 0;
    absl::StatusOr<EtcdTxnResult> t =
        etcd_->Txn({{key, EtcdCompare::Target::kModRevision, kv.mod_revision}},
                   {remove ? EtcdOp{EtcdOp::Kind::kDelete, key, ""}
                           : EtcdOp{EtcdOp::Kind::kPut, key, stored}},
                   {});
    if (!t.ok()) return t.status();
    if (!t->succeeded) continue;  // Someone wrote in between: read again.
    SetString(obj, {"metadata", "resourceVersion"}, Cat(t->revision),
              obj.GetAllocator());
    if (remove) Removed(obj);
    return Written{std::move(obj), remove};
  }
  return ApiError({500, "InternalError"},
                  Cat("gave up updating ", r.qualified(), " \"", name,
                      "\" after ", kMaxUpdateAttempts, " conflicting writes"));
}

absl::Status KubeStore::PrepareUpdate(const KubeResource& r,
                                      const ResourcePath& p,
                                      const Document& old,
                                      Document& obj) const {
  auto& a = obj.GetAllocator();
  const std::string name = GetString(obj, {"metadata", "name"});
  if (!name.empty() && name != p.name) {
    return BadRequest(Cat("the name of the object (", name,
                          ") does not match the name on the URL (", p.name,
                          ")"));
  }
  const std::string ns = GetString(obj, {"metadata", "namespace"});
  if (!ns.empty() && ns != p.ns && !r.cluster_scoped) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace "
        "sent on the request");
  }
  // Optimistic concurrency (sig-architecture/api-conventions.md,
  // "Concurrency Control and Consistency"; etcd3 store.go GuaranteedUpdate): a
  // resourceVersion in the request must be the current one; none means
  // "unconditionally".
  const std::string rv = GetString(obj, {"metadata", "resourceVersion"});
  const std::string old_rv = GetString(old, {"metadata", "resourceVersion"});
  if (!rv.empty() && rv != old_rv)
    return Conflict(r.qualified(), p.name, kOptimisticLockMessage);
  const std::string uid = GetString(obj, {"metadata", "uid"});
  const std::string old_uid = GetString(old, {"metadata", "uid"});
  if (!uid.empty() && uid != old_uid) {
    // k8s.io/apimachinery/pkg/api/validation/objectmeta.go
    // ValidateObjectMetaUpdate.
    return Invalid(
        r.kind, r.group, p.name,
        Cat("metadata.uid: Invalid value: \"", uid, "\": field is immutable"));
  }
  if (p.subresource == "status") {
    // Only .status changes (k8s.io/apiextensions-apiserver/pkg/registry/
    // customresource/status_strategy.go
    // PrepareForUpdate: the old object with the new status).
    Document next = Copy(old);
    Remove(next, {"status"});
    if (const Value* st = Find(obj, {"status"}); st != nullptr) {
      Value copy(*st, next.GetAllocator());
      Set(next, {"status"}, std::move(copy), next.GetAllocator());
    }
    obj.Swap(next);
    return absl::OkStatus();
  }
  if (r.status_subresource) {
    // The main resource ignores .status (k8s.io/apiextensions-apiserver/pkg/
    // registry/customresource/strategy.go
    // PrepareForUpdate, the pod strategy alike).
    Remove(obj, {"status"});
    if (const Value* st = Find(old, {"status"}); st != nullptr) {
      Set(obj, {"status"}, Value(*st, a), a);
    }
  }
  SetString(obj, {"kind"}, r.kind, a);
  SetString(obj, {"apiVersion"}, r.api_version(), a);
  SetString(obj, {"metadata", "name"}, p.name, a);
  if (r.cluster_scoped) {
    Remove(obj, {"metadata", "namespace"});
  } else {
    SetString(obj, {"metadata", "namespace"}, p.ns, a);
  }
  SetString(obj, {"metadata", "uid"}, old_uid, a);
  SetString(obj, {"metadata", "resourceVersion"}, old_rv, a);
  Remove(obj, {"metadata", "managedFields"});
  // rest.BeforeUpdate (k8s.io/apiserver/pkg/registry/rest/update.go): an
  // update never changes creationTimestamp, deletionTimestamp or
  // deletionGracePeriodSeconds, nor sets generation.
  for (std::string_view f : {"creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds"}) {
    Remove(obj, {"metadata", f});
    if (const Value* v = Find(old, {"metadata", f}); v != nullptr) {
      Set(obj, {"metadata", f}, Value(*v, a), a);
    }
  }
  int64_t generation = GetInt(old, {"metadata", "generation"});
  if (SpecChanged(old, obj)) ++generation;
  Set(obj, {"metadata", "generation"}, Value(generation), a);
  if (Find(old, {"metadata", "deletionTimestamp"}) != nullptr) {
    // objectmeta.go ValidateNoNewFinalizers.
    const std::vector<std::string> before =
        GetStrings(old, {"metadata", "finalizers"});
    std::vector<std::string> added;
    for (const std::string& f : GetStrings(obj, {"metadata", "finalizers"})) {
      if (std::find(before.begin(), before.end(), f) == before.end())
        added.push_back(f);
    }
    if (!added.empty()) {
      return Invalid(
          r.kind, r.group, p.name,
          Cat("metadata.finalizers: Forbidden: no new finalizers can be "
              "added if the object is being deleted, found new finalizers "
              "[]string{\"",
              absl::StrJoin(added, "\", \""), "\"}"));
    }
  }
  return absl::OkStatus();
}

// k8s.io/apiserver/pkg/registry/generic/registry/store.go Update (PUT): the
// object must exist (no create on update for these resources).
absl::StatusOr<Answer> KubeStore::Update(const ResourcePath& p,
                                         std::string_view body) {
  absl::StatusOr<Document> parsed =
      ParseObject(body, Cat("a ", p.resource->kind));
  if (!parsed.ok()) return parsed.status();
  const KubeResource& r = *p.resource;
  absl::StatusOr<Written> w = GuaranteedUpdate(
      r, p.ns, p.name, [&](const Document& old, Document& obj) {
        obj.CopyFrom(*parsed, obj.GetAllocator());
        RETURN_IF_ERROR(PrepareUpdate(r, p, old, obj));
        return r.validate ? r.validate(&old, obj, p.subresource)
                          : absl::OkStatus();
      });
  if (!w.ok()) return w.status();
  return Answer{200, ToJson(w->object)};
}

// k8s.io/apiserver/pkg/endpoints/handlers/patch.go: the patch is applied to
// the current object, then it is an update; a resourceVersion inside the
// patch is a precondition (and a uid must match).
absl::StatusOr<Answer> KubeStore::Patch(const ResourcePath& p,
                                        std::string_view content_type,
                                        std::string_view body) {
  const std::string_view media = content_type.substr(0, content_type.find(';'));
  if (media != "application/merge-patch+json") {
    return ApiError(
        {415, "UnsupportedMediaType"},
        Cat("the body of the request was in an unknown format - accepted "
            "media types include: application/merge-patch+json (got \"",
            content_type, "\")"));
  }
  absl::StatusOr<Document> patch = ParseObject(body, "a merge patch");
  if (!patch.ok()) return patch.status();
  const KubeResource& r = *p.resource;
  const std::string patch_uid = GetString(*patch, {"metadata", "uid"});
  absl::StatusOr<Written> w = GuaranteedUpdate(
      r, p.ns, p.name, [&](const Document& old, Document& obj) {
        const std::string old_uid = GetString(old, {"metadata", "uid"});
        if (!patch_uid.empty() && patch_uid != old_uid) {
          return Precondition(p, "UID", patch_uid, old_uid);
        }
        ApplyMergePatch(obj, *patch, obj.GetAllocator());
        RETURN_IF_ERROR(PrepareUpdate(r, p, old, obj));
        return r.validate ? r.validate(&old, obj, p.subresource)
                          : absl::OkStatus();
      });
  if (!w.ok()) return w.status();
  return Answer{200, ToJson(w->object)};
}

// k8s.io/apiserver/pkg/registry/generic/registry/store.go Delete with
// DeleteOptions (body or query): preconditions, graceful deletion (pods),
// finalizers (markAsDeleting: deletionTimestamp now, deletionGracePeriodSeconds
// 0, generation + 1); without either the key is deleted in a transaction on
// mod_revision.
absl::StatusOr<Answer> KubeStore::Delete(const ResourcePath& p,
                                         std::string_view body,
                                         const Query& q) {
  std::string pre_uid, pre_rv, policy;
  std::optional<int64_t> grace;
  if (auto it = q.find("gracePeriodSeconds"); it != q.end()) {
    int64_t g = 0;
    if (!Atoi(it->second, &g)) {
      return BadRequest(
          Cat("gracePeriodSeconds: not an integer: ", it->second));
    }
    grace = g;
  }
  if (auto it = q.find("propagationPolicy"); it != q.end()) policy = it->second;
  if (!Strip(body).empty()) {
    absl::StatusOr<Document> opts = ParseObject(body, "DeleteOptions");
    if (!opts.ok()) return opts.status();
    pre_uid = GetString(*opts, {"preconditions", "uid"});
    pre_rv = GetString(*opts, {"preconditions", "resourceVersion"});
    if (const Value* g = Find(*opts, {"gracePeriodSeconds"});
        g != nullptr && g->IsInt64()) {
      grace = g->GetInt64();
    }
    if (const std::string pp = GetString(*opts, {"propagationPolicy"});
        !pp.empty())
      policy = pp;
  }
  if (!policy.empty() && policy != "Background") {
    return BadRequest(
        Cat("propagationPolicy ", policy,
            " is not supported by the kube-apiserver double (Background "
            "only)"));
  }
  return RemoveOrMark(p, pre_uid, pre_rv, grace);
}

absl::StatusOr<Answer> KubeStore::RemoveOrMark(const ResourcePath& p,
                                               std::string_view pre_uid,
                                               std::string_view pre_rv,
                                               std::optional<int64_t> grace) {
  const KubeResource& r = *p.resource;
  const std::string key = Key(r, p.ns, p.name);
  for (int attempt = 0; attempt < kMaxUpdateAttempts; ++attempt) {
    absl::StatusOr<EtcdRangeResult> got = etcd_->Range(key);
    if (!got.ok()) return got.status();
    if (got->kvs.empty()) return NotFound(r.qualified(), p.name);
    const EtcdKeyValue& kv = got->kvs[0];
    absl::StatusOr<Document> obj = Decode(kv);
    if (!obj.ok()) return obj.status();
    const std::string uid = GetString(*obj, {"metadata", "uid"});
    const std::string rv = GetString(*obj, {"metadata", "resourceVersion"});
    if (!pre_uid.empty() && pre_uid != uid)
      return Precondition(p, "UID", pre_uid, uid);
    if (!pre_rv.empty() && pre_rv != rv)
      return Precondition(p, "ResourceVersion", pre_rv, rv);
    auto& a = obj->GetAllocator();
    const bool deleting =
        Find(*obj, {"metadata", "deletionTimestamp"}) != nullptr;
    const bool has_finalizers =
        !GetStrings(*obj, {"metadata", "finalizers"}).empty();
    // pkg/registry/core/pod/strategy.go CheckGracefulDelete: a pod on a
    // node gets its grace period (the request's, else
    // spec.terminationGracePeriodSeconds, else 30); an unscheduled one none.
    int64_t wait = 0;
    if (r.graceful_delete && !GetString(*obj, {"spec", "nodeName"}).empty()) {
      wait = grace.has_value() ? *grace : 30;
      if (!grace.has_value()) {
        if (const Value* t =
                Find(*obj, {"spec", "terminationGracePeriodSeconds"});
            t != nullptr && t->IsInt64()) {
          wait = t->GetInt64();
        }
      }
    }
    const int64_t current_grace =
        GetInt(*obj, {"metadata", "deletionGracePeriodSeconds"});
    if (wait > 0 || has_finalizers) {
      // Stays, marked: rest.BeforeDelete (graceful) / markAsDeleting.
      if (deleting && wait >= current_grace) return Answer{200, ToJson(*obj)};
      if (!deleting) {
        Set(*obj, {"metadata", "generation"},
            Value(GetInt(*obj, {"metadata", "generation"}) + 1), a);
      }
      SetString(*obj, {"metadata", "deletionTimestamp"},
                Rfc3339(clock_->Now() + absl::Seconds(wait)), a);
      Set(*obj, {"metadata", "deletionGracePeriodSeconds"}, Value(wait), a);
      if (wait == 0 && !has_finalizers) {
        // Graceful deletion over, nothing holds it: fall through to removal.
      } else {
        absl::StatusOr<EtcdTxnResult> t = etcd_->Txn(
            {{key, EtcdCompare::Target::kModRevision, kv.mod_revision}},
            {{EtcdOp::Kind::kPut, key, StoredJson(*obj)}}, {});
        if (!t.ok()) return t.status();
        if (!t->succeeded) continue;
        SetString(*obj, {"metadata", "resourceVersion"}, Cat(t->revision), a);
        return Answer{200, ToJson(*obj)};
      }
    }
    absl::StatusOr<EtcdTxnResult> t =
        etcd_->Txn({{key, EtcdCompare::Target::kModRevision, kv.mod_revision}},
                   {{EtcdOp::Kind::kDelete, key, ""}}, {});
    if (!t.ok()) return t.status();
    if (!t->succeeded) continue;
    // The answer is the object as it was (store.go returns the deleted
    // object for these resources).
    Removed(*obj);
    return Answer{200, ToJson(*obj)};
  }
  return ApiError({500, "InternalError"},
                  Cat("gave up deleting ", r.qualified(), " \"", p.name,
                      "\" after conflicting writes"));
}

}  // namespace pdc::testing::kube
