#include "api/handoff_json.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/rest_json.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::api {
namespace {

using json::Find;
using json::IsNullish;
using json::Key;
using json::Str;
using json::StringOf;
using json::Value;
using json::Writer;

void WriteKeys(Writer& w, std::string_view name, const std::vector<ClaimKey>& keys) {
  Key(w, name);
  w.StartArray();
  for (const ClaimKey& k : keys) Str(w, k.ToString());
  w.EndArray();
}

absl::StatusOr<std::vector<PciAddress>> ParseAddressArray(const Value& obj,
                                                          std::string_view key,
                                                          std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return json::FieldError(field, "must list at least one PCI address");
  if (!v->IsArray()) return json::TypeError(field, "must be an array of PCI addresses");
  std::vector<PciAddress> out;
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    const std::string at = absl::StrCat(Sv(field), "[", i, "]");
    if (!(*v)[i].IsString()) return json::TypeError(at, "must be a string");
    ASSIGN_OR_RETURN(PciAddress a, ParseAddress(StringOf((*v)[i]), at));
    out.push_back(a);
  }
  return out;
}

}  // namespace

absl::StatusOr<HandoffConfirm> ParseHandoffConfirm(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "must be an object");
  HandoffConfirm c;
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(doc, "podUid", "podUid"));
  RETURN_IF_ERROR(ValidateUid("podUid", uid));
  c.pod_uid = std::string(uid);
  ASSIGN_OR_RETURN(std::string_view res,
                   json::ReqString(doc, "resourceName", "resourceName"));
  RETURN_IF_ERROR(ValidateResourceName("resourceName", res));
  c.resource_name = std::string(res);
  ASSIGN_OR_RETURN(c.devices, ParseAddressArray(doc, "devices", "devices"));
  if (c.devices.empty()) return json::FieldError("devices", "must list at least one PCI address");
  return c;
}

std::string WriteHandoffConfirm(const HandoffConfirm& c) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "podUid");
  Str(w, c.pod_uid);
  Key(w, "resourceName");
  Str(w, c.resource_name);
  Key(w, "devices");
  w.StartArray();
  for (PciAddress a : c.devices) Str(w, a.ToString());
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteHandoffConfirmed(std::string_view node, const HandoffConfirm& c,
                                  const std::vector<ClaimKey>& claims) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "node");
  Str(w, node);
  Key(w, "podUid");
  Str(w, c.pod_uid);
  Key(w, "resourceName");
  Str(w, c.resource_name);
  WriteKeys(w, "claims", claims);
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteHandoffList(const std::vector<PendingHandoff>& items) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "items");
  w.StartArray();
  for (const PendingHandoff& p : items) {
    w.StartObject();
    Key(w, "node");
    Str(w, p.node);
    Key(w, "resourceName");
    Str(w, p.resource_name);
    Key(w, "namespace");
    Str(w, p.ns);
    Key(w, "vm");
    Str(w, p.pod.vm);
    Key(w, "podName");
    Str(w, p.pod.pod_name);
    Key(w, "podUid");
    Str(w, p.pod.pod_uid);
    WriteKeys(w, "claims", p.claims);
    Key(w, "devices");
    w.StartArray();
    for (PciAddress a : p.devices) Str(w, a.ToString());
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<std::vector<PendingHandoff>> ParseHandoffList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "must be an object");
  const Value* items = Find(doc, "items");
  std::vector<PendingHandoff> out;
  if (IsNullish(items)) return out;
  if (!items->IsArray()) return json::TypeError("items", "must be an array");
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i) {
    const Value& v = (*items)[i];
    const std::string at = absl::StrCat("items[", i, "]");
    if (!v.IsObject()) return json::TypeError(at, "must be an object");
    auto str = [&](std::string_view key) -> absl::StatusOr<std::string> {
      ASSIGN_OR_RETURN(std::string_view s, json::OptString(v, key, absl::StrCat(at, ".", Sv(key))));
      return std::string(s);
    };
    PendingHandoff p;
    ASSIGN_OR_RETURN(p.node, str("node"));
    ASSIGN_OR_RETURN(p.resource_name, str("resourceName"));
    ASSIGN_OR_RETURN(p.ns, str("namespace"));
    ASSIGN_OR_RETURN(p.pod.vm, str("vm"));
    ASSIGN_OR_RETURN(p.pod.pod_name, str("podName"));
    ASSIGN_OR_RETURN(p.pod.pod_uid, str("podUid"));
    const Value* claims = Find(v, "claims");
    if (!IsNullish(claims)) {
      if (!claims->IsArray()) return json::TypeError(at + ".claims", "must be an array");
      for (rapidjson::SizeType j = 0; j < claims->Size(); ++j) {
        const std::string cat = absl::StrCat(at, ".claims[", j, "]");
        if (!(*claims)[j].IsString()) return json::TypeError(cat, "must be a string");
        ASSIGN_OR_RETURN(ClaimKey k, ParseClaimKey(StringOf((*claims)[j]), cat));
        p.claims.push_back(std::move(k));
      }
    }
    ASSIGN_OR_RETURN(p.devices, ParseAddressArray(v, "devices", at + ".devices"));
    out.push_back(std::move(p));
  }
  return out;
}

std::string WriteReleased(const std::vector<ClaimKey>& claims) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteKeys(w, "released", claims);
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<std::vector<ClaimKey>> ParseClaimKeys(std::string_view body,
                                                     std::string_view member) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "must be an object");
  std::vector<ClaimKey> out;
  const Value* v = Find(doc, member);
  if (IsNullish(v)) return out;
  if (!v->IsArray()) return json::TypeError(member, "must be an array");
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    const std::string at = absl::StrCat(Sv(member), "[", i, "]");
    if (!(*v)[i].IsString()) return json::TypeError(at, "must be a string");
    ASSIGN_OR_RETURN(ClaimKey k, ParseClaimKey(StringOf((*v)[i]), at));
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace pdc::api
