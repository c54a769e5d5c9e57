#include "api/claim_object.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
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

// metav1.Time on the wire: RFC 3339 in UTC, to the second.
std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

// status.devices[i].iommuGroup / numaNode, when in bounds.
std::vector<DeviceFacts> ReadDeviceFacts(const Value& status) {
  std::vector<DeviceFacts> out;
  const Value* devices = json::Find(status, "devices");
  if (devices == nullptr || !devices->IsArray()) return out;
  for (const Value& d : devices->GetArray()) {
    DeviceFacts f;
    if (d.IsObject()) {
      if (const Value* g = json::Find(d, "iommuGroup");
          g != nullptr && g->IsInt() && g->GetInt() >= 0) {
        f.iommu_group = g->GetInt();
      }
      if (const Value* n = json::Find(d, "numaNode");
          n != nullptr && n->IsInt() && n->GetInt() >= 0 && n->GetInt() <= INT16_MAX) {
        f.numa_node = static_cast<int16_t>(n->GetInt());
      }
    }
    out.push_back(f);
  }
  return out;
}

// status.conditions, the entries with a type, a True/False status and a
// readable lastTransitionTime.
std::vector<ClaimCondition> ReadConditions(const Value& status) {
  std::vector<ClaimCondition> out;
  const Value* conditions = json::Find(status, "conditions");
  if (conditions == nullptr || !conditions->IsArray()) return out;
  constexpr size_t kMaxConditions = 16;
  for (const Value& c : conditions->GetArray()) {
    if (out.size() == kMaxConditions) break;
    if (!c.IsObject()) continue;
    const Value* type = json::Find(c, "type");
    const Value* st = json::Find(c, "status");
    const Value* at = json::Find(c, "lastTransitionTime");
    if (type == nullptr || !type->IsString() || st == nullptr || !st->IsString() ||
        at == nullptr || !at->IsString()) {
      continue;
    }
    ClaimCondition cond;
    cond.type = std::string(json::StringOf(*type));
    const std::string_view status_text = json::StringOf(*st);
    if (cond.type.size() > 316 || (status_text != "True" && status_text != "False")) continue;
    cond.status = status_text == "True";
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, std::string(json::StringOf(*at)),
                         &cond.last_transition, &err)) {
      continue;
    }
    if (const Value* r = json::Find(c, "reason"); r != nullptr && r->IsString()) {
      cond.reason = std::string(json::StringOf(*r).substr(0, 1024));
    }
    if (const Value* m = json::Find(c, "message"); m != nullptr && m->IsString()) {
      cond.message = std::string(json::StringOf(*m).substr(0, 32768));
    }
    if (const Value* g = json::Find(c, "observedGeneration"); g != nullptr && g->IsInt64()) {
      cond.observed_generation = g->GetInt64();
    }
    out.push_back(std::move(cond));
  }
  return out;
}

// "0000:3b:00.0 (serial SN1), ..." naming at most a few devices.
std::string DeviceList(const std::vector<BoundDevice>& devices) {
  constexpr size_t kNamed = 8;
  std::string out;
  for (size_t i = 0; i < devices.size() && i < kNamed; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", devices[i].address.ToString());
    if (!devices[i].serial.empty()) absl::StrAppend(&out, " (serial ", devices[i].serial, ")");
  }
  if (devices.size() > kNamed) absl::StrAppend(&out, " and ", devices.size() - kNamed, " more");
  return out;
}

void WriteConditions(Writer& w, const std::vector<ClaimCondition>& conditions) {
  Key(w, "conditions");
  w.StartArray();
  for (const ClaimCondition& c : conditions) {
    w.StartObject();
    Key(w, "type");
    Str(w, c.type);
    Key(w, "status");
    Str(w, c.status ? "True" : "False");
    Key(w, "observedGeneration");
    w.Int64(c.observed_generation);
    Key(w, "lastTransitionTime");
    Str(w, Rfc3339(c.last_transition));
    Key(w, "reason");
    Str(w, c.reason);
    Key(w, "message");
    Str(w, c.message);
    w.EndObject();
  }
  w.EndArray();
}

// A condition stamped `now`, or with the transition time of the one of its
// type in `before` when its status did not change.
ClaimCondition NewCondition(std::string_view type, bool is, std::string reason,
                            std::string message, int64_t generation,
                            const std::vector<ClaimCondition>& before, absl::Time now) {
  ClaimCondition c{std::string(type), is, std::move(reason), std::move(message), now, generation};
  for (const ClaimCondition& b : before) {
    if (b.type == c.type && b.status == c.status) c.last_transition = b.last_transition;
  }
  return c;
}

}  // namespace

std::vector<ClaimCondition> ConditionsOf(const ClaimStatus& status, std::string_view conflict,
                                         int64_t generation,
                                         const std::vector<ClaimCondition>& before,
                                         absl::Time now) {
  std::vector<ClaimCondition> out;
  auto add = [&](std::string_view type, bool is, std::string reason, std::string message) {
    out.push_back(NewCondition(type, is, std::move(reason), std::move(message), generation,
                               before, now));
  };
  switch (status.phase) {
    case ClaimPhase::kBound:
      add(kConditionBound, true, "DeviceBound",
          absl::StrCat("bound to ", status.devices.size(), " device(s) on node ", status.node,
                       ": ", DeviceList(status.devices)));
      break;
    case ClaimPhase::kLost:
      add(kConditionBound, false, "DeviceLost",
          status.lost_reason.empty()
              ? absl::StrCat("its device(s) on node ", status.node, " are gone or unhealthy")
              : status.lost_reason);
      break;
    case ClaimPhase::kPending:
      add(kConditionBound, false, "WaitingForFirstConsumer",
          "no VM pod was bound with this claim yet: the first one's node decides its device(s)");
      break;
  }
  if (const std::optional<Reservation>& r = status.reserved_for; r.has_value()) {
    const bool handed = status.handed_off_to == r->pod_uid;
    std::string who = absl::StrCat("VM ", r->vm, r->vm_uid.empty() ? "" : " (uid ", r->vm_uid,
                                   r->vm_uid.empty() ? "" : ")", ", pod ", r->pod_name, " (uid ",
                                   r->pod_uid, ")");
    add(kConditionReserved, true, handed ? "HandedOff" : "HandOffPending",
        handed ? absl::StrCat("in use by ", who, ": its node's device plugin gave it the devices")
               : absl::StrCat("reserved for ", who,
                              ", which has not received the devices from its node yet"));
  } else {
    add(kConditionReserved, false, "NotInUse", "no VM pod uses the claim");
  }
  if (!conflict.empty()) {
    add(kConditionDeviceConflict, true, "DeviceInAnotherClaim", std::string(conflict));
  }
  return out;
}

std::vector<ClaimCondition> ReclaimingConditions(std::string_view node,
                                                 const std::vector<PciAddress>& devices,
                                                 int64_t generation,
                                                 const std::vector<ClaimCondition>& before,
                                                 absl::Time now) {
  std::vector<ClaimCondition> out;
  for (const ClaimCondition& c : before) {
    if (c.type != kConditionReserved && c.type != kConditionReclaiming) out.push_back(c);
  }
  auto add = [&](std::string_view type, bool is, std::string reason, std::string message) {
    out.push_back(NewCondition(type, is, std::move(reason), std::move(message), generation,
                               before, now));
  };
  add(kConditionReserved, false, "NotInUse", "no VM pod uses the claim");
  std::vector<std::string> names;
  for (PciAddress a : devices) names.push_back(a.ToString());
  add(kConditionReclaiming, true, "DeviceErasing",
      absl::StrCat("the claim was deleted with reclaimPolicy Delete: pdc-node on node ", Sv(node),
                   " erases device(s) ", absl::StrJoin(names, ", "),
                   " before they return to their host driver; the object goes once they have"));
  return out;
}

std::vector<ClaimCondition> WithheldConditions(std::string_view reason, std::string_view message,
                                               int64_t generation,
                                               const std::vector<ClaimCondition>& before,
                                               absl::Time now) {
  std::vector<ClaimCondition> out;
  for (const ClaimCondition& c : before) {
    if (c.type != kConditionWithheld) out.push_back(c);
  }
  out.push_back(NewCondition(kConditionWithheld, true, std::string(reason), std::string(message),
                             generation, before, now));
  return out;
}

bool IsReclaiming(const std::vector<ClaimCondition>& conditions) {
  return std::any_of(conditions.begin(), conditions.end(), [](const ClaimCondition& c) {
    return c.type == kConditionReclaiming && c.status;
  });
}

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
    out.device_facts = ReadDeviceFacts(*status);
    out.conditions = ReadConditions(*status);
  }
  absl::StatusOr<Claim> claim = ParseClaim(flat);
  if (!claim.ok()) return Prefixed(claim.status(), "spec");
  if (claim->spec.resource_name.empty()) {
    return json::FieldError(absl::StrCat(kWhat, ".spec.resourceName"), "is required");
  }
  out.claim = *std::move(claim);
  out.claim.key = ClaimKey{out.meta.ns, out.meta.name};
  out.claim.uid = out.meta.uid;
  // The owner VM's UID is pdc's record: status first, then pdc's
  // annotation (set at create), the spec only for objects of earlier
  // versions. A user's edit of spec.ownerVMUid changes nothing then.
  std::string_view recorded_owner;
  if (status != nullptr) {
    ASSIGN_OR_RETURN(recorded_owner,
                     json::OptString(*status, "ownerVMUid", absl::StrCat(kWhat, ".status.ownerVMUid")));
  }
  if (recorded_owner.empty()) {
    const Value* meta = json::Find(object, "metadata");
    const Value* annotations =
        meta != nullptr && meta->IsObject() ? json::Find(*meta, "annotations") : nullptr;
    const Value* a = annotations != nullptr && annotations->IsObject()
                         ? json::Find(*annotations, kOwnerVmUidAnnotation)
                         : nullptr;
    if (a != nullptr && a->IsString()) recorded_owner = json::StringOf(*a);
  }
  if (!recorded_owner.empty()) {
    if (out.claim.spec.owner_vm.empty()) {
      return json::FieldError(absl::StrCat(kWhat, ".status.ownerVMUid"),
                              "names an owner VM UID, but spec.ownerVM is empty");
    }
    RETURN_IF_ERROR(
        ValidateUid(absl::StrCat(kWhat, ".status.ownerVMUid"), recorded_owner));
    out.claim.spec.owner_vm_uid = std::string(recorded_owner);
  }
  return out;
}

absl::StatusOr<ClaimObject> ReadClaimObjectStatusOnly(const Value& object) {
  absl::StatusOr<ClaimObject> whole = ReadClaimObject(object);
  if (whole.ok() || !object.IsObject()) return whole;
  // The same object with a spec that reads: only the status counts.
  rapidjson::Document copy;
  copy.CopyFrom(object, copy.GetAllocator());
  Value spec(rapidjson::kObjectType);
  spec.AddMember("resourceName", "pdc.kubevirt.io/unreadable", copy.GetAllocator());
  copy.RemoveMember("spec");
  copy.AddMember("spec", spec, copy.GetAllocator());
  ASSIGN_OR_RETURN(ClaimObject out, ReadClaimObject(copy));
  out.claim.spec = ClaimSpec{};
  out.claim.spec.reclaim_policy = ReclaimPolicy::kRetain;
  out.spec_problem = std::string(whole.status().message());
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
  if (!claim.spec.owner_vm_uid.empty()) {
    Key(w, "annotations");
    w.StartObject();
    Key(w, kOwnerVmUidAnnotation);
    Str(w, claim.spec.owner_vm_uid);
    w.EndObject();
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
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteClaimStatusPatch(std::string_view uid, std::string_view resource_version,
                                  const ClaimStatus& status, int64_t observed_generation,
                                  const std::vector<DeviceFacts>& facts,
                                  const std::vector<ClaimCondition>& conditions,
                                  std::string_view owner_vm_uid) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteMetaPreconditions(w, uid, resource_version);
  w.EndObject();
  Key(w, "status");
  w.StartObject();
  WriteClaimStatusFields(w, status, facts);
  if (!owner_vm_uid.empty()) {
    Key(w, "ownerVMUid");
    Str(w, owner_vm_uid);
  }
  Key(w, "observedGeneration");
  w.Int64(observed_generation);
  WriteConditions(w, conditions);
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteClaimConditionsPatch(std::string_view uid, std::string_view resource_version,
                                      const std::vector<ClaimCondition>& conditions) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteMetaPreconditions(w, uid, resource_version);
  w.EndObject();
  Key(w, "status");
  w.StartObject();
  WriteConditions(w, conditions);
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
      // "" = no claim (an abandoned erase): only an administrator decides.
      ASSIGN_OR_RETURN(std::string_view claim, json::ReqString((*rel)[i], "claim", f + ".claim"));
      if (!claim.empty()) {
        ASSIGN_OR_RETURN(d.claim, ParseClaimKey(claim, f + ".claim"));
      }
      ASSIGN_OR_RETURN(std::string_view claim_uid,
                       json::OptString((*rel)[i], "claimUid", f + ".claimUid"));
      if (claim_uid.size() > 128) return json::FieldError(f + ".claimUid", "is too long");
      d.claim_uid = std::string(claim_uid);
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
      Str(w, d.claim.ns.empty() ? std::string() : d.claim.ToString());
      if (!d.claim_uid.empty()) {
        Key(w, "claimUid");
        Str(w, d.claim_uid);
      }
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
