#include "api/kube_objects.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {

namespace {

using json::FieldError;
using json::OptArray;
using json::OptObject;
using json::TypeError;
using json::Value;

// Bounds on what one object may carry into pdc's caches. The API has no
// limit on the number of owner references or finalizers but the object's
// size (1.5 MiB in etcd); real objects have a handful.
constexpr size_t kMaxOwners = 64;
constexpr size_t kMaxFinalizers = 64;
// Kinds are CamelCase Go identifiers; API versions are "<group>/<version>"
// (a DNS subdomain and a DNS label) or "v1".
constexpr size_t kMaxKindLength = 63;
constexpr size_t kMaxApiVersionLength = 253 + 1 + 63;

absl::Status CheckToken(std::string_view field, std::string_view s, size_t max) {
  if (s.empty()) return FieldError(field, "must not be empty");
  if (s.size() > max) {
    return FieldError(field, absl::StrCat("is longer than ", max, " bytes: ",
                                          model::QuoteForMessage(s)));
  }
  for (char c : s) {
    if (c <= ' ' || c > '~') {
      return FieldError(field, absl::StrCat("must be printable ASCII without spaces: ",
                                            model::QuoteForMessage(s)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OwnerReference> ReadOwner(const Value& v, const std::string& field) {
  if (!v.IsObject()) return TypeError(field, "must be an object");
  OwnerReference o;
  ASSIGN_OR_RETURN(std::string_view api_version,
                   json::ReqString(v, "apiVersion", absl::StrCat(field, ".apiVersion")));
  ASSIGN_OR_RETURN(std::string_view kind, json::ReqString(v, "kind", absl::StrCat(field, ".kind")));
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(v, "name", absl::StrCat(field, ".name")));
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(v, "uid", absl::StrCat(field, ".uid")));
  ASSIGN_OR_RETURN(o.controller,
                   json::OptBool(v, "controller", absl::StrCat(field, ".controller"), false));
  RETURN_IF_ERROR(
      CheckToken(absl::StrCat(field, ".apiVersion"), api_version, kMaxApiVersionLength));
  RETURN_IF_ERROR(CheckToken(absl::StrCat(field, ".kind"), kind, kMaxKindLength));
  RETURN_IF_ERROR(ValidateObjectName(absl::StrCat(field, ".name"), name));
  RETURN_IF_ERROR(ValidateUid(absl::StrCat(field, ".uid"), uid));
  o.api_version = std::string(api_version);
  o.kind = std::string(kind);
  o.name = std::string(name);
  o.uid = std::string(uid);
  return o;
}

}  // namespace

const OwnerReference* ControllerOf(const std::vector<OwnerReference>& owners) {
  for (const OwnerReference& o : owners) {
    if (o.controller) return &o;
  }
  return nullptr;
}

const OwnerReference* ObjectMeta::Controller() const { return ControllerOf(owners); }

absl::StatusOr<std::vector<OwnerReference>> ReadOwnerReferences(const Value& meta,
                                                                std::string_view field) {
  const std::string of = absl::StrCat(Sv(field), ".ownerReferences");
  ASSIGN_OR_RETURN(const Value* owners, OptArray(meta, "ownerReferences", of));
  std::vector<OwnerReference> out;
  if (owners == nullptr) return out;
  if (owners->Size() > kMaxOwners) {
    return FieldError(of, absl::StrCat("has ", owners->Size(), " entries; at most ", kMaxOwners,
                                       " are accepted"));
  }
  for (rapidjson::SizeType i = 0; i < owners->Size(); ++i) {
    ASSIGN_OR_RETURN(OwnerReference o, ReadOwner((*owners)[i], absl::StrCat(of, "[", i, "]")));
    out.push_back(std::move(o));
  }
  return out;
}

std::string ObjectMeta::Key() const { return ns.empty() ? name : absl::StrCat(ns, "/", name); }

absl::StatusOr<ObjectMeta> ReadObjectMeta(const Value& object, std::string_view field) {
  if (!object.IsObject()) return TypeError(field, "must be an object");
  const std::string f = absl::StrCat(Sv(field), ".metadata");
  ASSIGN_OR_RETURN(const Value* meta, OptObject(object, "metadata", f));
  if (meta == nullptr) return TypeError(f, "is required");
  ObjectMeta m;
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(*meta, "name", absl::StrCat(f, ".name")));
  ASSIGN_OR_RETURN(std::string_view ns,
                   json::OptString(*meta, "namespace", absl::StrCat(f, ".namespace")));
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(*meta, "uid", absl::StrCat(f, ".uid")));
  ASSIGN_OR_RETURN(std::string_view rv, json::ReqString(*meta, "resourceVersion",
                                                        absl::StrCat(f, ".resourceVersion")));
  ASSIGN_OR_RETURN(m.generation,
                   json::OptInt(*meta, "generation", absl::StrCat(f, ".generation"), 0));
  RETURN_IF_ERROR(ValidateObjectName(absl::StrCat(f, ".name"), name));
  if (!ns.empty()) RETURN_IF_ERROR(ValidateNamespace(absl::StrCat(f, ".namespace"), ns));
  RETURN_IF_ERROR(ValidateUid(absl::StrCat(f, ".uid"), uid));
  RETURN_IF_ERROR(CheckToken(absl::StrCat(f, ".resourceVersion"), rv, kMaxUidLength));
  m.name = std::string(name);
  m.ns = std::string(ns);
  m.uid = std::string(uid);
  m.resource_version = std::string(rv);
  ASSIGN_OR_RETURN(std::string_view deletion,
                   json::OptString(*meta, "deletionTimestamp",
                                   absl::StrCat(f, ".deletionTimestamp")));
  m.deleting = !deletion.empty();

  ASSIGN_OR_RETURN(m.owners, ReadOwnerReferences(*meta, f));
  const std::string ff = absl::StrCat(f, ".finalizers");
  ASSIGN_OR_RETURN(const Value* finalizers, OptArray(*meta, "finalizers", ff));
  if (finalizers != nullptr) {
    if (finalizers->Size() > kMaxFinalizers) {
      return FieldError(ff, absl::StrCat("has ", finalizers->Size(), " entries; at most ",
                                         kMaxFinalizers, " are accepted"));
    }
    for (rapidjson::SizeType i = 0; i < finalizers->Size(); ++i) {
      const std::string fi = absl::StrCat(ff, "[", i, "]");
      const Value& v = (*finalizers)[i];
      if (!v.IsString()) return TypeError(fi, "must be a string");
      RETURN_IF_ERROR(model::ValidateQualifiedName(fi, json::StringOf(v)));
      m.finalizers.emplace_back(json::StringOf(v));
    }
  }
  return m;
}

absl::StatusOr<ListMeta> ReadListMeta(const Value& list) {
  if (!list.IsObject()) return TypeError("List", "must be an object");
  ASSIGN_OR_RETURN(const Value* meta, OptObject(list, "metadata", "List.metadata"));
  if (meta == nullptr) return TypeError("List.metadata", "is required");
  ListMeta m;
  ASSIGN_OR_RETURN(std::string_view rv, json::ReqString(*meta, "resourceVersion",
                                                        "List.metadata.resourceVersion"));
  RETURN_IF_ERROR(CheckToken("List.metadata.resourceVersion", rv, kMaxUidLength));
  ASSIGN_OR_RETURN(std::string_view cont,
                   json::OptString(*meta, "continue", "List.metadata.continue"));
  // Continue tokens are opaque base64 of a key and a revision.
  if (!cont.empty()) RETURN_IF_ERROR(CheckToken("List.metadata.continue", cont, 4096));
  m.resource_version = std::string(rv);
  m.continue_token = std::string(cont);
  return m;
}

std::string_view ToString(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

absl::StatusOr<WatchEvent> ReadWatchEvent(const Value& event) {
  if (!event.IsObject()) return TypeError("WatchEvent", "must be an object");
  ASSIGN_OR_RETURN(std::string_view type, json::ReqString(event, "type", "WatchEvent.type"));
  WatchEvent e;
  if (type == "ADDED") {
    e.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    e.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    e.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    e.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    e.type = WatchEventType::kError;
  } else {
    return FieldError("WatchEvent.type",
                      absl::StrCat("must be ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, not ",
                                   model::QuoteForMessage(type)));
  }
  ASSIGN_OR_RETURN(e.object, OptObject(event, "object", "WatchEvent.object"));
  if (e.object == nullptr) return TypeError("WatchEvent.object", "is required");
  return e;
}

absl::StatusOr<ApiStatus> ReadApiStatus(const Value& status) {
  if (!status.IsObject()) return TypeError("Status", "must be an object");
  ApiStatus s;
  ASSIGN_OR_RETURN(int64_t code, json::OptInt(status, "code", "Status.code", 0));
  if (code < 0 || code > 999) return FieldError("Status.code", "must be an HTTP status");
  s.code = static_cast<int>(code);
  ASSIGN_OR_RETURN(std::string_view reason, json::OptString(status, "reason", "Status.reason"));
  ASSIGN_OR_RETURN(std::string_view message,
                   json::OptString(status, "message", "Status.message"));
  // Both only travel into log lines and errors: cut, never refused.
  s.reason = std::string(reason.substr(0, 64));
  s.message = std::string(message.substr(0, 1024));
  return s;
}

}  // namespace pdc::api
