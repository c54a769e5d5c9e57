#include "api/claim_object.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/rest_json.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::api {

namespace {

using json::Key;
using json::Str;
using json::Value;
using json::Writer;

constexpr char kWhat[] = "PersistentDeviceClaim";

// The spec members a claim has (api/rest_json.h ParseClaim reads them);
// anything else in spec is not copied, so a spec can never pose as the
// claim's name, UID or status.
constexpr std::string_view kSpecMembers[] = {"resourceName", "count",         "node",
                                             "serial",       "address",       "reclaimPolicy",
                                             "ownerVM",      "ownerVMUid"};

absl::Status Prefixed(const absl::Status& s, std::string_view part) {
  const std::string field = json::FieldOf(s);
  const std::string path =
      field.empty() ? absl::StrCat(kWhat, ".", Sv(part))
                    : absl::StrCat(kWhat, ".", field.starts_with("status") ? "" : "spec.", field);
  std::string_view message = StdSv(s.message());
  if (!field.empty() && message.starts_with(field) &&
      message.substr(field.size()).starts_with(": ")) {
    message.remove_prefix(field.size() + 2);
  }
  return json::WithField(absl::Status(s.code(), absl::StrCat(path, ": ", Sv(message))), path,
                         json::HttpStatusFor(s));
}

void WriteMetaPreconditions(Writer& w, std::string_view uid, std::string_view resource_version) {
  Key(w, "metadata");
  w.StartObject();
  Key(w, "uid");
  Str(w, uid);
  Key(w, "resourceVersion");
  Str(w, resource_version);
}

}  // namespace

std::string ClaimCollectionPath(std::string_view ns) {
  return absl::StrCat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", Sv(ns),
                      "/persistentdeviceclaims");
}

std::string ClaimObjectPath(const ClaimKey& key) {
  return absl::StrCat(ClaimCollectionPath(key.ns), "/", key.name);
}

absl::StatusOr<ClaimObject> ReadClaimObject(const Value& object) {
  ClaimObject out;
  ASSIGN_OR_RETURN(out.meta, ReadObjectMeta(object, kWhat));
  if (out.meta.ns.empty()) {
    return json::FieldError(absl::StrCat(kWhat, ".metadata.namespace"), "is required");
  }
  ASSIGN_OR_RETURN(const Value* spec,
                   json::OptObject(object, "spec", absl::StrCat(kWhat, ".spec")));
  if (spec == nullptr) return json::FieldError(absl::StrCat(kWhat, ".spec"), "is required");
  ASSIGN_OR_RETURN(const Value* status,
                   json::OptObject(object, "status", absl::StrCat(kWhat, ".status")));

  // The REST claim has the spec's members at its top level and the same
  // status: read the object through that one codec.
  rapidjson::Document flat(rapidjson::kObjectType);
  auto& a = flat.GetAllocator();
  for (std::string_view member : kSpecMembers) {
    if (const Value* v = json::Find(*spec, member); v != nullptr) {
      flat.AddMember(Value(member.data(), static_cast<rapidjson::SizeType>(member.size()), a),
                     Value(*v, a), a);
    }
  }
  if (status != nullptr) {
    flat.AddMember("status", Value(*status, a), a);
    ASSIGN_OR_RETURN(std::string_view phase,
                     json::OptString(*status, "phase", absl::StrCat(kWhat, ".status.phase")));
    out.has_status = !phase.empty();
    ASSIGN_OR_RETURN(int64_t observed,
                     json::OptInt(*status, "observedGeneration",
                                  absl::StrCat(kWhat, ".status.observedGeneration"), 0));
    out.observed_generation = observed;
  }
  absl::StatusOr<Claim> claim = ParseClaim(flat);
  if (!claim.ok()) return Prefixed(claim.status(), "spec");
  if (claim->spec.resource_name.empty()) {
    return json::FieldError(absl::StrCat(kWhat, ".spec.resourceName"), "is required");
  }
  out.claim = *std::move(claim);
  out.claim.key = ClaimKey{out.meta.ns, out.meta.name};
  out.claim.uid = out.meta.uid;
  return out;
}

std::string WriteNewClaimObject(const Claim& claim, const std::optional<OwnerReference>& owner) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "apiVersion");
  Str(w, kClaimGroupVersion);
  Key(w, "kind");
  Str(w, kClaimKind);
  Key(w, "metadata");
  w.StartObject();
  Key(w, "name");
  Str(w, claim.key.name);
  Key(w, "namespace");
  Str(w, claim.key.ns);
  if (owner.has_value()) {
    Key(w, "ownerReferences");
    w.StartArray();
    w.StartObject();
    Key(w, "apiVersion");
    Str(w, owner->api_version);
    Key(w, "kind");
    Str(w, owner->kind);
    Key(w, "name");
    Str(w, owner->name);
    Key(w, "uid");
    Str(w, owner->uid);
    Key(w, "controller");
    w.Bool(true);
    // The owner is not deleted in the foreground before the claim is.
    Key(w, "blockOwnerDeletion");
    w.Bool(true);
    w.EndObject();
    w.EndArray();
  }
  Key(w, "finalizers");
  w.StartArray();
  Str(w, kClaimFinalizer);
  w.EndArray();
  w.EndObject();
  Key(w, "spec");
  w.StartObject();
  WriteClaimSpecFields(w, claim.spec);
  Key(w, "ownerVM");
  Str(w, claim.spec.owner_vm);
  if (!claim.spec.owner_vm_uid.empty()) {
    Key(w, "ownerVMUid");
    Str(w, claim.spec.owner_vm_uid);
  }
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteClaimStatusPatch(std::string_view uid, std::string_view resource_version,
                                  const ClaimStatus& status, int64_t observed_generation) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteMetaPreconditions(w, uid, resource_version);
  w.EndObject();
  Key(w, "status");
  w.StartObject();
  WriteClaimStatusFields(w, status);
  Key(w, "observedGeneration");
  w.Int64(observed_generation);
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteFinalizersPatch(std::string_view uid, std::string_view resource_version,
                                 const std::vector<std::string>& finalizers) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteMetaPreconditions(w, uid, resource_version);
  Key(w, "finalizers");
  w.StartArray();
  for (const std::string& f : finalizers) Str(w, f);
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<NodeHoldsObject> ReadNodeHolds(const Value& configmap) {
  constexpr char kCm[] = "ConfigMap";
  NodeHoldsObject out;
  ASSIGN_OR_RETURN(out.meta, ReadObjectMeta(configmap, kCm));
  const std::string at = absl::StrCat(kCm, " ", out.meta.Key());
  ASSIGN_OR_RETURN(const Value* data, json::OptObject(configmap, "data", at + ".data"));
  if (data == nullptr) return json::FieldError(at + ".data", "is required");
  ASSIGN_OR_RETURN(std::string_view node, json::ReqString(*data, "node", at + ".data.node"));
  RETURN_IF_ERROR(ValidateObjectName(at + ".data.node", node));
  out.node = std::string(node);
  ASSIGN_OR_RETURN(std::string_view text, json::ReqString(*data, "holds", at + ".data.holds"));
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(text, &doc));
  const std::string h = at + ".data.holds";
  ASSIGN_OR_RETURN(const Value* ret, json::OptArray(doc, "returnToHost", h + ".returnToHost"));
  if (ret != nullptr) {
    for (rapidjson::SizeType i = 0; i < ret->Size(); ++i) {
      const std::string f = absl::StrCat(h, ".returnToHost[", i, "]");
      if (!(*ret)[i].IsString()) return json::TypeError(f, "must be a string");
      ASSIGN_OR_RETURN(PciAddress a, ParseAddress(json::StringOf((*ret)[i]), f));
      out.return_to_host.push_back(a);
    }
  }
  ASSIGN_OR_RETURN(const Value* rel, json::OptArray(doc, "released", h + ".released"));
  if (rel != nullptr) {
    for (rapidjson::SizeType i = 0; i < rel->Size(); ++i) {
      const std::string f = absl::StrCat(h, ".released[", i, "]");
      if (!(*rel)[i].IsObject()) return json::TypeError(f, "must be an object");
      ReleasedDevice d;
      ASSIGN_OR_RETURN(std::string_view a, json::ReqString((*rel)[i], "address", f + ".address"));
      ASSIGN_OR_RETURN(d.address, ParseAddress(a, f + ".address"));
      ASSIGN_OR_RETURN(std::string_view serial,
                       json::OptString((*rel)[i], "serial", f + ".serial"));
      RETURN_IF_ERROR(ValidateSerial(f + ".serial", serial));
      d.serial = std::string(serial);
      ASSIGN_OR_RETURN(std::string_view claim, json::ReqString((*rel)[i], "claim", f + ".claim"));
      ASSIGN_OR_RETURN(d.claim, ParseClaimKey(claim, f + ".claim"));
      out.released.push_back(std::move(d));
    }
  }
  std::sort(out.return_to_host.begin(), out.return_to_host.end());
  out.return_to_host.erase(std::unique(out.return_to_host.begin(), out.return_to_host.end()),
                           out.return_to_host.end());
  std::sort(out.released.begin(), out.released.end(),
            [](const ReleasedDevice& a, const ReleasedDevice& b) { return a.address < b.address; });
  for (size_t i = 1; i < out.released.size(); ++i) {
    if (out.released[i].address == out.released[i - 1].address) {
      return json::FieldError(h + ".released", absl::StrCat("lists ",
                                                            out.released[i].address.ToString(),
                                                            " twice"));
    }
  }
  return out;
}

std::string WriteNodeHolds(std::string_view name, std::string_view ns, std::string_view uid,
                           std::string_view resource_version, std::string_view node,
                           const std::vector<PciAddress>& return_to_host,
                           const std::vector<ReleasedDevice>& released) {
  rapidjson::StringBuffer holds_buf;
  {
    Writer w(holds_buf);
    w.StartObject();
    Key(w, "returnToHost");
    w.StartArray();
    for (PciAddress a : return_to_host) Str(w, a.ToString());
    w.EndArray();
    Key(w, "released");
    w.StartArray();
    for (const ReleasedDevice& d : released) {
      w.StartObject();
      Key(w, "address");
      Str(w, d.address.ToString());
      Key(w, "serial");
      Str(w, d.serial);
      Key(w, "claim");
      Str(w, d.claim.ToString());
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "apiVersion");
  Str(w, "v1");
  Key(w, "kind");
  Str(w, "ConfigMap");
  Key(w, "metadata");
  w.StartObject();
  Key(w, "name");
  Str(w, name);
  Key(w, "namespace");
  Str(w, ns);
  if (!uid.empty()) {
    Key(w, "uid");
    Str(w, uid);
    Key(w, "resourceVersion");
    Str(w, resource_version);
  }
  Key(w, "labels");
  w.StartObject();
  Key(w, "app.kubernetes.io/managed-by");
  Str(w, "pdc-extender");
  w.EndObject();
  w.EndObject();
  Key(w, "data");
  w.StartObject();
  Key(w, "node");
  Str(w, node);
  Key(w, "holds");
  Str(w, json::Output(holds_buf));
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

}  // namespace pdc::api
