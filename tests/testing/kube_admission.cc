#include "tests/testing/kube_admission.h"

#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

// errors.NewForbidden(qualifiedResource, name, err): `<resource> "<name>" is
// forbidden: <err>`, reason Forbidden, details {name, group, kind}.
absl::Status Forbidden(const ResourcePath& p, std::string_view name, std::string_view why) {
  ApiErrorInfo info{403, "Forbidden", std::string(name)};
  info.group = p.resource->group;
  info.kind = p.resource->resource;
  return ApiError(info,
                  Cat(p.resource->qualified(), " \"", name, "\" is forbidden: ", why));
}

// The name the request is about: the path's, else the body's metadata.name.
std::string NameOf(const ResourcePath& p, std::string_view body) {
  if (!p.name.empty()) return p.name;
  absl::StatusOr<Document> d = ParseObject(body, "object");
  return d.ok() ? GetString(*d, {"metadata", "name"}) : "";
}

struct OwnerRef {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool block = false;
};

std::vector<OwnerRef> OwnersOf(std::string_view object) {
  std::vector<OwnerRef> out;
  if (object.empty()) return out;
  absl::StatusOr<Document> d = ParseObject(object, "object");
  if (!d.ok()) return out;
  const Value* refs = Find(*d, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->IsArray()) return out;
  for (const Value& r : refs->GetArray()) {
    if (!r.IsObject()) continue;
    OwnerRef o{GetString(r, {"apiVersion"}), GetString(r, {"kind"}), GetString(r, {"name"}),
               GetString(r, {"uid"}), false};
    const Value* b = Find(r, {"blockOwnerDeletion"});
    o.block = b != nullptr && b->IsBool() && b->GetBool();
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

void KubeAdmission::Forbid(AccessRule rule) {
  absl::MutexLock lock(&mu_);
  forbidden_.insert(std::move(rule));
}

void KubeAdmission::EnforceOwnerReferencesPermission(bool on) {
  absl::MutexLock lock(&mu_);
  owner_references_ = on;
}

void KubeAdmission::TerminateNamespace(std::string ns) {
  absl::MutexLock lock(&mu_);
  terminating_.insert(std::move(ns));
}

void KubeAdmission::ExceedQuota(std::string ns, std::string group, std::string resource) {
  absl::MutexLock lock(&mu_);
  quota_.insert({std::move(ns), std::move(group), std::move(resource)});
}

void KubeAdmission::Clear() {
  absl::MutexLock lock(&mu_);
  forbidden_.clear();
  owner_references_ = false;
  terminating_.clear();
  quota_.clear();
}

std::string KubeAdmission::VerbOf(std::string_view method, const ResourcePath& p, bool watch) {
  if (method == "GET") return p.name.empty() ? (watch ? "watch" : "list") : "get";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return p.name.empty() ? "deletecollection" : "delete";
  return std::string(method);
}

bool KubeAdmission::Allowed(const AccessRule& want) const {
  AccessRule any_ns = want;
  any_ns.ns.clear();
  return !forbidden_.contains(want) && !forbidden_.contains(any_ns);
}

absl::Status KubeAdmission::Check(std::string_view verb, const ResourcePath& p,
                                  std::string_view body, std::string_view old_object) const {
  if (p.resource == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  const std::string resource =
      p.subresource.empty() ? p.resource->resource
                            : Cat(p.resource->resource, "/", p.subresource);
  // 1. Authorization (the RBAC authorizer's "cannot <verb> resource ...").
  if (!Allowed({p.resource->group, resource, std::string(verb), p.ns})) {
    return Forbidden(p, p.name,
                     Cat("User \"", user_, "\" cannot ", verb, " resource \"", resource,
                                  "\" in API group \"", p.resource->group, "\"",
                                  p.ns.empty() ? std::string(" at the cluster scope")
                                               : Cat(" in the namespace \"", p.ns, "\"")));
  }
  const bool create = verb == "create" && p.subresource.empty();
  // 2. NamespaceLifecycle: no new content in a namespace being deleted.
  if (create && terminating_.contains(p.ns)) {
    ApiErrorInfo info{403, "Forbidden", NameOf(p, body)};
    info.group = p.resource->group;
    info.kind = p.resource->resource;
    return ApiError(info, Cat(p.resource->qualified(), " \"", info.name,
                                       "\" is forbidden: unable to create new content in "
                                       "namespace ",
                                       p.ns, " because it is being terminated"));
  }
  // 3. OwnerReferencesPermissionEnforcement: a reference newly blocking its
  // owner's deletion (create, or an update that adds one or turns
  // blockOwnerDeletion on) needs update on the owner's finalizers.
  if (owner_references_ && (create || verb == "update")) {
    const std::vector<OwnerRef> before = OwnersOf(old_object);
    for (const OwnerRef& ref : OwnersOf(body)) {
      if (!ref.block) continue;
      bool was_blocking = false;
      for (const OwnerRef& o : before) {
        if (o.uid == ref.uid && o.block) was_blocking = true;
      }
      if (was_blocking) continue;
      const size_t slash = ref.api_version.find('/');
      const std::string group = slash == std::string::npos ? "" : ref.api_version.substr(0, slash);
      // RESTMapper: KubeVirt's and core kinds pluralise as lower case + "s".
      std::string plural;
      for (char c : ref.kind) plural += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      plural += "s";
      if (!Allowed({group, plural + "/finalizers", "update", p.ns})) {
        return Forbidden(p, NameOf(p, body),
                         "cannot set blockOwnerDeletion if an ownerReference refers to a "
                         "resource you can't set finalizers on: , <nil>");
      }
    }
  }
  // 4. ResourceQuota.
  if (create && quota_.contains({p.ns, p.resource->group, p.resource->resource})) {
    return Forbidden(p, NameOf(p, body),
                     Cat("exceeded quota: pdc-test-quota, requested: count/",
                                  p.resource->qualified(), "=1, used: count/",
                                  p.resource->qualified(), "=1, limited: count/",
                                  p.resource->qualified(), "=1"));
  }
  return absl::OkStatus();
}

}  // namespace pdc::testing::kube
