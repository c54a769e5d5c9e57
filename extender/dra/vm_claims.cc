#include "extender/dra/vm_claims.h"

#include "absl/strings/str_cat.h"
#include "api/kube_objects.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "rapidjson/stringbuffer.h"

namespace pdc::extender::dra {
namespace {

namespace json = ::pdc::api::json;

// The longest object name (a DNS subdomain, RFC 1123).
constexpr size_t kMaxObjectName = 253;

// Writes the members of `labels_or_annotations` (an object of strings, or
// nullptr), then `extra_key`: `extra_value` when `extra_key` is not empty.
void WriteStringMap(json::Writer& w, const json::Value* map, std::string_view extra_key,
                    std::string_view extra_value) {
  w.StartObject();
  if (map != nullptr && map->IsObject()) {
    for (const auto& m : map->GetObject()) {
      const std::string_view key(m.name.GetString(), m.name.GetStringLength());
      if (key == extra_key || !m.value.IsString()) continue;
      w.Text(key);
      w.Text(json::StringOf(m.value));
    }
  }
  if (!extra_key.empty()) {
    w.Text(extra_key);
    w.Text(extra_value);
  }
  w.EndObject();
}

}  // namespace

std::string ResourceClaimsPath(std::string_view ns) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", Sv(ns), "/resourceclaims");
}

std::string ResourceClaimTemplatePath(std::string_view ns, std::string_view name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", Sv(ns),
                      "/resourceclaimtemplates/", Sv(name));
}

absl::StatusOr<std::vector<PodClaimEntry>> ReadPodClaimEntries(const json::Value& pod,
                                                               std::string_view what) {
  std::vector<PodClaimEntry> out;
  ASSIGN_OR_RETURN(const json::Value* spec,
                   json::OptObject(pod, "spec", absl::StrCat(Sv(what), ".spec")));
  if (spec == nullptr) return out;
  ASSIGN_OR_RETURN(const json::Value* list,
                   json::OptArray(*spec, "resourceClaims",
                                  absl::StrCat(Sv(what), ".spec.resourceClaims")));
  if (list == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    const std::string field = absl::StrCat(Sv(what), ".spec.resourceClaims[", i, "]");
    const json::Value& e = (*list)[i];
    if (!e.IsObject()) return json::TypeError(field, "is not an object");
    PodClaimEntry entry;
    entry.index = i;
    ASSIGN_OR_RETURN(std::string_view name, json::ReqString(e, "name", field + ".name"));
    ASSIGN_OR_RETURN(std::string_view claim,
                     json::OptString(e, "resourceClaimName", field + ".resourceClaimName"));
    ASSIGN_OR_RETURN(std::string_view tmpl, json::OptString(e, "resourceClaimTemplateName",
                                                            field + ".resourceClaimTemplateName"));
    entry.name = std::string(name);
    entry.claim_name = std::string(claim);
    entry.template_name = std::string(tmpl);
    out.push_back(std::move(entry));
  }
  return out;
}

bool OptedIn(const json::Value& pod) {
  const json::Value* meta = json::Find(pod, "metadata");
  const json::Value* labels = meta == nullptr ? nullptr : json::Find(*meta, "labels");
  const json::Value* v = labels == nullptr ? nullptr : json::Find(*labels, kPersistentClaimsLabel);
  return v != nullptr && v->IsString() && json::StringOf(*v) == "true";
}

absl::StatusOr<std::string> VmClaimName(std::string_view vm, std::string_view entry) {
  std::string name = absl::StrCat(Sv(vm), "-", Sv(entry));
  if (name.size() > kMaxObjectName) {
    return absl::InvalidArgumentError(
        absl::StrCat("the claim name \"", name, "\" (VirtualMachine name, '-', claim entry name) "
                     "is longer than ", kMaxObjectName, " characters"));
  }
  return name;
}

absl::StatusOr<std::string> VmClaimJson(const json::Value& template_object, std::string_view ns,
                                        std::string_view name, std::string_view entry,
                                        std::string_view vm, std::string_view vm_uid) {
  ASSIGN_OR_RETURN(const json::Value* spec,
                   json::OptObject(template_object, "spec", "ResourceClaimTemplate.spec"));
  const json::Value* claim_spec = spec == nullptr ? nullptr : json::Find(*spec, "spec");
  if (claim_spec == nullptr || !claim_spec->IsObject()) {
    return json::FieldError("ResourceClaimTemplate.spec.spec", "is missing or not an object");
  }
  ASSIGN_OR_RETURN(const json::Value* meta,
                   json::OptObject(*spec, "metadata", "ResourceClaimTemplate.spec.metadata"));
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  w.Text("apiVersion");
  w.Text("resource.k8s.io/v1");
  w.Text("kind");
  w.Text("ResourceClaim");
  w.Text("metadata");
  w.StartObject();
  w.Text("name");
  w.Text(name);
  w.Text("namespace");
  w.Text(ns);
  w.Text("labels");
  WriteStringMap(w, meta == nullptr ? nullptr : json::Find(*meta, "labels"), "", "");
  w.Text("annotations");
  WriteStringMap(w, meta == nullptr ? nullptr : json::Find(*meta, "annotations"),
                 kPodClaimNameAnnotation, entry);
  w.Text("ownerReferences");
  w.StartArray();
  w.StartObject();
  w.Text("apiVersion");
  w.Text("kubevirt.io/v1");
  w.Text("kind");
  w.Text("VirtualMachine");
  w.Text("name");
  w.Text(vm);
  w.Text("uid");
  w.Text(vm_uid);
  w.Text("controller");
  w.Bool(true);
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.Text("spec");
  claim_spec->Accept(w);
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::Status JudgeVmClaim(const json::Value& claim, std::string_view ns, std::string_view name,
                          std::string_view vm, std::string_view vm_uid) {
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(claim, "ResourceClaim"));
  const std::string what = absl::StrCat("ResourceClaim ", Sv(ns), "/", Sv(name));
  const std::string mine = absl::StrCat("VirtualMachine ", Sv(vm), " (uid ", Sv(vm_uid), ")");
  const api::OwnerReference* owner = meta.Controller();
  const bool a_vm = owner != nullptr && owner->kind == "VirtualMachine" &&
                    owner->api_version.starts_with("kubevirt.io/");
  if (!a_vm) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " exists and is not owned by a VirtualMachine",
        owner == nullptr ? "" : absl::StrCat(" (its controller is ", owner->kind, " ",
                                             owner->name, ")"),
        ": it is not made for ", mine, " from its template; rename or delete it"));
  }
  if (owner->uid != vm_uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " belongs to VirtualMachine ", owner->name, " (uid ", owner->uid,
        "), not to ", mine,
        ": a VirtualMachine made again under an old name waits until the old claim is "
        "deleted (the garbage collector deletes it once the old VirtualMachine is gone)"));
  }
  if (meta.deleting) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " of ", mine, " is being deleted; the pod waits until it is gone and a new "
        "one is made"));
  }
  return absl::OkStatus();
}

}  // namespace pdc::extender::dra
