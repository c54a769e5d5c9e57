#include "api/claim_json.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {

using json::Find;
using json::IsNullish;
using json::Key;
using json::Str;
using json::Value;
using json::Writer;

void WriteReservation(Writer& w, const std::optional<Reservation>& r) {
  if (!r) {
    w.Null();
    return;
  }
  w.StartObject();
  Key(w, "vm");
  Str(w, r->vm);
  Key(w, "podName");
  Str(w, r->pod_name);
  Key(w, "podUid");
  Str(w, r->pod_uid);
  if (!r->vm_uid.empty()) {
    Key(w, "vmUid");
    Str(w, r->vm_uid);
  }
  if (!r->vmi_uid.empty()) {
    Key(w, "vmiUid");
    Str(w, r->vmi_uid);
  }
  w.EndObject();
}

absl::StatusOr<std::optional<Reservation>> ParseReservation(
    const Value& obj, std::string_view key, std::string_view field) {
  const Value* v = Find(obj, key);
  if (IsNullish(v)) return std::optional<Reservation>();
  if (!v->IsObject()) return json::TypeError(field, "must be an object or null");
  Reservation r;
  auto at = [&](std::string_view k) { return absl::StrCat(Sv(field), ".", Sv(k)); };
  ASSIGN_OR_RETURN(std::string_view vm, json::OptString(*v, "vm", at("vm")));
  ASSIGN_OR_RETURN(std::string_view pn, json::OptString(*v, "podName", at("podName")));
  ASSIGN_OR_RETURN(std::string_view pu, json::OptString(*v, "podUid", at("podUid")));
  ASSIGN_OR_RETURN(std::string_view vu, json::OptString(*v, "vmUid", at("vmUid")));
  // What a client shows and logs is bounded as the server bounds it.
  if (!vm.empty()) RETURN_IF_ERROR(ValidateObjectName(at("vm"), vm));
  if (!pn.empty()) RETURN_IF_ERROR(ValidateObjectName(at("podName"), pn));
  if (!pu.empty()) RETURN_IF_ERROR(ValidateUid(at("podUid"), pu));
  ASSIGN_OR_RETURN(std::string_view vi, json::OptString(*v, "vmiUid", at("vmiUid")));
  if (!vu.empty()) RETURN_IF_ERROR(ValidateUid(at("vmUid"), vu));
  if (!vi.empty()) RETURN_IF_ERROR(ValidateUid(at("vmiUid"), vi));
  r.vm = std::string(vm);
  r.pod_name = std::string(pn);
  r.pod_uid = std::string(pu);
  r.vm_uid = std::string(vu);
  r.vmi_uid = std::string(vi);
  return std::optional<Reservation>(std::move(r));
}

absl::StatusOr<ReclaimPolicy> ParseReclaimPolicy(std::string_view s,
                                          std::string_view field) {
  if (s.empty() || s == "Retain") return ReclaimPolicy::kRetain;
  if (s == "Delete") return ReclaimPolicy::kDelete;
  return json::FieldError(
      field, absl::StrCat(model::QuoteForMessage(s), " must be Retain or Delete"));
}


absl::StatusOr<ClaimKey> ParseClaimKey(std::string_view s, std::string_view field) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == s.size()) {
    return json::FieldError(field, "must be namespace/name");
  }
  const std::string_view ns = s.substr(0, slash);
  const std::string_view name = s.substr(slash + 1);
  RETURN_IF_ERROR(ValidateNamespace(field, ns));
  RETURN_IF_ERROR(ValidateObjectName(field, name));
  return ClaimKey{std::string(ns), std::string(name)};
}

absl::StatusOr<ClaimKey> ParseDeviceHandOver(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "hand-over must be an object");
  ASSIGN_OR_RETURN(std::string_view claim, json::ReqString(doc, "claim", "claim"));
  return ParseClaimKey(claim, "claim");
}

std::string WriteDeviceHandOver(const ClaimKey& to) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "claim");
  Str(w, to.ToString());
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<ClaimCreate> ParseClaimCreate(std::string_view body,
                                             std::string_view ns) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "claim must be an object");
  ClaimCreate c;
  RETURN_IF_ERROR(ValidateNamespace("namespace", ns));
  c.key.ns = std::string(ns);
  ASSIGN_OR_RETURN(std::string_view body_ns,
                   json::OptString(doc, "namespace", "namespace"));
  if (!body_ns.empty() && body_ns != ns) {
    return json::FieldError("namespace",
                            absl::StrCat(model::QuoteForMessage(body_ns),
                                         " does not match the namespace ",
                                         model::QuoteForMessage(ns), " in the URL"));
  }
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(doc, "name", "name"));
  RETURN_IF_ERROR(ValidateObjectName("name", name));
  c.key.name = std::string(name);
  ASSIGN_OR_RETURN(std::string_view res,
                   json::ReqString(doc, "resourceName", "resourceName"));
  if (res.empty()) return json::FieldError("resourceName", "is required");
  RETURN_IF_ERROR(ValidateResourceName("resourceName", res));
  c.spec.resource_name = std::string(res);
  ASSIGN_OR_RETURN(int64_t count, json::OptInt(doc, "count", "count", 1));
  if (count < 1 || count > kMaxClaimCount) {
    return json::FieldError("count", absl::StrCat("must be between 1 and ", kMaxClaimCount));
  }
  c.spec.count = static_cast<int32_t>(count);
  ASSIGN_OR_RETURN(std::string_view node, json::OptString(doc, "node", "node"));
  if (!node.empty()) RETURN_IF_ERROR(ValidateObjectName("node", node));
  c.spec.node = std::string(node);
  ASSIGN_OR_RETURN(std::string_view serial,
                   json::OptString(doc, "serial", "serial"));
  RETURN_IF_ERROR(ValidateSerial("serial", serial));
  c.spec.serial = std::string(serial);
  ASSIGN_OR_RETURN(std::string_view addr,
                   json::OptString(doc, "address", "address"));
  if (!addr.empty()) {
    ASSIGN_OR_RETURN(PciAddress a, ParseAddress(addr, "address"));
    c.spec.address = a;
  }
  if ((!serial.empty() || !addr.empty()) && c.spec.count != 1) {
    return json::FieldError("count",
                            "must be 1 for a claim pinned to a serial or an "
                            "address");
  }
  ASSIGN_OR_RETURN(std::string_view pol,
                   json::OptString(doc, "reclaimPolicy", "reclaimPolicy"));
  ASSIGN_OR_RETURN(c.spec.reclaim_policy, ParseReclaimPolicy(pol, "reclaimPolicy"));
  ASSIGN_OR_RETURN(std::string_view owner,
                   json::OptString(doc, "ownerVM", "ownerVM"));
  if (!owner.empty()) RETURN_IF_ERROR(ValidateObjectName("ownerVM", owner));
  c.spec.owner_vm = std::string(owner);
  ASSIGN_OR_RETURN(std::string_view owner_uid,
                   json::OptString(doc, "ownerVMUid", "ownerVMUid"));
  if (!owner_uid.empty()) {
    RETURN_IF_ERROR(ValidateUid("ownerVMUid", owner_uid));
    if (owner.empty()) return json::FieldError("ownerVMUid", "needs ownerVM (the VM's name)");
  }
  c.spec.owner_vm_uid = std::string(owner_uid);
  return c;
}

void WriteClaimSpecFields(Writer& w, const ClaimSpec& spec) {
  Key(w, "resourceName");
  Str(w, spec.resource_name);
  Key(w, "count");
  w.Int(spec.count);
  Key(w, "node");
  Str(w, spec.node);
  Key(w, "serial");
  Str(w, spec.serial);
  Key(w, "address");
  Str(w, spec.address ? spec.address->ToString() : "");
  Key(w, "reclaimPolicy");
  Str(w, ToString(spec.reclaim_policy));
}

std::string WriteClaimCreate(const ClaimCreate& c) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "name");
  Str(w, c.key.name);
  WriteClaimSpecFields(w, c.spec);
  if (!c.spec.owner_vm.empty()) {
    Key(w, "ownerVM");
    Str(w, c.spec.owner_vm);
  }
  if (!c.spec.owner_vm_uid.empty()) {
    Key(w, "ownerVMUid");
    Str(w, c.spec.owner_vm_uid);
  }
  w.EndObject();
  return std::string(json::Output(buf));
}

void WriteClaimStatusFields(Writer& w, const ClaimStatus& status,
                            const std::vector<DeviceFacts>& facts) {
  Key(w, "phase");
  Str(w, ToString(status.phase));
  Key(w, "node");
  Str(w, status.node);
  Key(w, "devices");
  w.StartArray();
  for (size_t i = 0; i < status.devices.size(); ++i) {
    const BoundDevice& d = status.devices[i];
    w.StartObject();
    Key(w, "address");
    Str(w, d.address.ToString());
    Key(w, "serial");
    Str(w, d.serial);
    if (i < facts.size() && facts[i].iommu_group >= 0) {
      Key(w, "iommuGroup");
      w.Int(facts[i].iommu_group);
    }
    if (i < facts.size() && facts[i].numa_node >= 0) {
      Key(w, "numaNode");
      w.Int(facts[i].numa_node);
    }
    w.EndObject();
  }
  w.EndArray();
  Key(w, "lostReason");
  Str(w, status.lost_reason);
  Key(w, "reservedFor");
  WriteReservation(w, status.reserved_for);
  Key(w, "handedOffTo");
  Str(w, status.handed_off_to);
}

void WriteClaimObject(Writer& w, const Claim& c) {
  w.StartObject();
  Key(w, "namespace");
  Str(w, c.key.ns);
  Key(w, "name");
  Str(w, c.key.name);
  Key(w, "uid");
  Str(w, c.uid);
  WriteClaimSpecFields(w, c.spec);
  Key(w, "ownerVM");
  Str(w, c.spec.owner_vm);
  if (!c.spec.owner_vm_uid.empty()) {
    Key(w, "ownerVMUid");
    Str(w, c.spec.owner_vm_uid);
  }
  Key(w, "status");
  w.StartObject();
  WriteClaimStatusFields(w, c.status);
  w.EndObject();
  w.EndObject();
}

std::string WriteClaim(const Claim& c) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  WriteClaimObject(w, c);
  return std::string(json::Output(buf));
}

std::string WriteClaimList(const std::vector<Claim>& claims) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "items");
  w.StartArray();
  for (const Claim& c : claims) WriteClaimObject(w, c);
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

namespace {

// Longest lostReason a client accepts: the allocator writes a sentence
// naming a device, a node and serial numbers, far below this.
constexpr size_t kMaxReasonBytes = 1024;

// A claim as a client reads it holds only values the server could have
// written: names, UIDs and serials within their bounds (all optional here,
// as older or partial answers may leave them out).
absl::Status CheckClaimStrings(const Claim& c) {
  if (!c.key.ns.empty()) RETURN_IF_ERROR(ValidateNamespace("namespace", c.key.ns));
  if (!c.key.name.empty()) RETURN_IF_ERROR(ValidateObjectName("name", c.key.name));
  if (!c.uid.empty()) RETURN_IF_ERROR(ValidateUid("uid", c.uid));
  if (!c.spec.resource_name.empty()) {
    RETURN_IF_ERROR(ValidateResourceName("resourceName", c.spec.resource_name));
  }
  if (!c.spec.node.empty()) RETURN_IF_ERROR(ValidateObjectName("node", c.spec.node));
  RETURN_IF_ERROR(ValidateSerial("serial", c.spec.serial));
  if (!c.spec.owner_vm.empty()) RETURN_IF_ERROR(ValidateObjectName("ownerVM", c.spec.owner_vm));
  if (!c.spec.owner_vm_uid.empty()) {
    RETURN_IF_ERROR(ValidateUid("ownerVMUid", c.spec.owner_vm_uid));
  }
  if (!c.status.node.empty()) RETURN_IF_ERROR(ValidateObjectName("status.node", c.status.node));
  if (c.status.lost_reason.size() > kMaxReasonBytes) {
    return json::FieldError("status.lostReason",
                            absl::StrCat("is longer than ", kMaxReasonBytes, " bytes"));
  }
  if (!c.status.handed_off_to.empty()) {
    RETURN_IF_ERROR(ValidateUid("status.handedOffTo", c.status.handed_off_to));
  }
  for (size_t i = 0; i < c.status.devices.size(); ++i) {
    RETURN_IF_ERROR(ValidateSerial(absl::StrCat("status.devices[", i, "].serial"),
                                   c.status.devices[i].serial));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Claim> ParseClaim(const Value& v) {
  if (!v.IsObject()) return json::TypeError("", "claim must be an object");
  Claim c;
  auto str = [&](const Value& o, std::string_view k,
                 std::string_view field) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(std::string_view s, json::OptString(o, k, field));
    return std::string(s);
  };
  ASSIGN_OR_RETURN(c.key.ns, str(v, "namespace", "namespace"));
  ASSIGN_OR_RETURN(c.key.name, str(v, "name", "name"));
  ASSIGN_OR_RETURN(c.uid, str(v, "uid", "uid"));
  ASSIGN_OR_RETURN(c.spec.resource_name, str(v, "resourceName", "resourceName"));
  ASSIGN_OR_RETURN(int64_t count, json::OptInt(v, "count", "count", 1));
  // The server holds the same bound; a claim outside it is not one it wrote.
  if (count < 1 || count > kMaxClaimCount) {
    return json::FieldError("count", absl::StrCat("must be between 1 and ", kMaxClaimCount));
  }
  c.spec.count = static_cast<int32_t>(count);
  ASSIGN_OR_RETURN(c.spec.node, str(v, "node", "node"));
  ASSIGN_OR_RETURN(c.spec.serial, str(v, "serial", "serial"));
  ASSIGN_OR_RETURN(std::string addr, str(v, "address", "address"));
  if (!addr.empty()) {
    ASSIGN_OR_RETURN(PciAddress a, ParseAddress(addr, "address"));
    c.spec.address = a;
  }
  ASSIGN_OR_RETURN(std::string pol, str(v, "reclaimPolicy", "reclaimPolicy"));
  ASSIGN_OR_RETURN(c.spec.reclaim_policy, ParseReclaimPolicy(pol, "reclaimPolicy"));
  ASSIGN_OR_RETURN(c.spec.owner_vm, str(v, "ownerVM", "ownerVM"));
  ASSIGN_OR_RETURN(c.spec.owner_vm_uid, str(v, "ownerVMUid", "ownerVMUid"));
  const Value* st = Find(v, "status");
  if (!IsNullish(st)) {
    if (!st->IsObject()) return json::TypeError("status", "must be an object");
    ASSIGN_OR_RETURN(std::string phase, str(*st, "phase", "status.phase"));
    if (phase == "Bound") {
      c.status.phase = ClaimPhase::kBound;
    } else if (phase == "Lost") {
      c.status.phase = ClaimPhase::kLost;
    } else if (phase == "Pending" || phase.empty()) {
      c.status.phase = ClaimPhase::kPending;
    } else {
      return json::FieldError("status.phase", "must be Pending, Bound or Lost");
    }
    ASSIGN_OR_RETURN(c.status.node, str(*st, "node", "status.node"));
    ASSIGN_OR_RETURN(c.status.lost_reason,
                     str(*st, "lostReason", "status.lostReason"));
    ASSIGN_OR_RETURN(c.status.reserved_for,
                     ParseReservation(*st, "reservedFor", "status.reservedFor"));
    ASSIGN_OR_RETURN(c.status.handed_off_to,
                     str(*st, "handedOffTo", "status.handedOffTo"));
    const Value* devs = Find(*st, "devices");
    if (!IsNullish(devs)) {
      if (!devs->IsArray()) {
        return json::TypeError("status.devices", "must be an array");
      }
      for (rapidjson::SizeType i = 0; i < devs->Size(); ++i) {
        const std::string at = absl::StrCat("status.devices[", i, "]");
        BoundDevice d;
        ASSIGN_OR_RETURN(std::string_view a,
                         json::ReqString((*devs)[i], "address", at + ".address"));
        ASSIGN_OR_RETURN(d.address, ParseAddress(a, at + ".address"));
        ASSIGN_OR_RETURN(d.serial, str((*devs)[i], "serial", at + ".serial"));
        c.status.devices.push_back(std::move(d));
      }
    }
  }
  RETURN_IF_ERROR(CheckClaimStrings(c));
  return c;
}

absl::StatusOr<Claim> ParseClaim(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  return ParseClaim(doc);
}

absl::StatusOr<std::vector<Claim>> ParseClaimList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "must be an object");
  std::vector<Claim> out;
  const Value* items = Find(doc, "items");
  if (IsNullish(items)) return out;
  if (!items->IsArray()) return json::TypeError("items", "must be an array");
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i) {
    absl::StatusOr<Claim> c = ParseClaim((*items)[i]);
    if (!c.ok()) {
      const std::string at = absl::StrCat("items[", i, "]");
      const std::string field = json::FieldOf(c.status());
      return json::WithField(
          absl::Status(c.status().code(), absl::StrCat(at, ": ", c.status().message())),
          field.empty() ? at : absl::StrCat(at, ".", field), json::HttpStatusFor(c.status()));
    }
    out.push_back(*std::move(c));
  }
  return out;
}

}  // namespace pdc::api
