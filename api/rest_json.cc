#include "api/rest_json.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {
namespace {

using json::Find;
using json::IsNullish;
using json::Key;
using json::Str;
using json::StringOf;
using json::Value;
using json::Writer;

std::string Hex(uint32_t v, int digits) {
  return absl::StrFormat("%0*x", digits, v);
}

absl::StatusOr<uint32_t> ParseHex(const Value& obj, std::string_view key,
                                  std::string_view field, int digits) {
  ASSIGN_OR_RETURN(std::string_view s, json::ReqString(obj, key, field));
  const int64_t v = ParseFixedHex(s, static_cast<size_t>(digits));
  if (v < 0) {
    return json::FieldError(field, absl::StrCat(model::QuoteForMessage(s), " must be ",
                                                digits, " hex digits"));
  }
  return static_cast<uint32_t>(v);
}

std::string UnhealthyReasonError(std::string_view reason) {
  std::vector<std::string> names;
  for (auto r = static_cast<uint8_t>(UnhealthyReason::kUnspecified);
       r <= static_cast<uint8_t>(kLastUnhealthyReason); ++r) {
    names.emplace_back(ToString(static_cast<UnhealthyReason>(r)));
  }
  return absl::StrCat(model::QuoteForMessage(reason), " must be one of ",
                      absl::StrJoin(names, ", "));
}

absl::StatusOr<Device> ParseDevice(const Value& v, std::string_view at) {
  if (!v.IsObject()) return json::TypeError(at, "must be an object");
  auto f = [&](std::string_view k) { return absl::StrCat(Sv(at), ".", Sv(k)); };
  Device d;
  ASSIGN_OR_RETURN(std::string_view addr,
                   json::ReqString(v, "address", f("address")));
  ASSIGN_OR_RETURN(d.address, ParseAddress(addr, f("address")));
  ASSIGN_OR_RETURN(uint32_t vendor, ParseHex(v, "vendor", f("vendor"), 4));
  ASSIGN_OR_RETURN(uint32_t device, ParseHex(v, "device", f("device"), 4));
  ASSIGN_OR_RETURN(d.class_code, ParseHex(v, "class", f("class"), 6));
  d.vendor_id = static_cast<uint16_t>(vendor);
  d.device_id = static_cast<uint16_t>(device);
  ASSIGN_OR_RETURN(int64_t group,
                   json::OptInt(v, "iommuGroup", f("iommuGroup"), -1));
  if (group < -1 || group > INT32_MAX) {
    return json::FieldError(f("iommuGroup"), "must be -1 or a group number");
  }
  d.iommu_group = static_cast<int32_t>(group);
  ASSIGN_OR_RETURN(int64_t numa, json::OptInt(v, "numaNode", f("numaNode"), -1));
  if (numa < -1 || numa > INT16_MAX) {
    return json::FieldError(f("numaNode"), "must be -1 or a NUMA node number");
  }
  d.numa_node = static_cast<int16_t>(numa);
  ASSIGN_OR_RETURN(std::string_view serial,
                   json::OptString(v, "serial", f("serial")));
  ASSIGN_OR_RETURN(std::string_view driver,
                   json::OptString(v, "driver", f("driver")));
  RETURN_IF_ERROR(ValidateSerial(f("serial"), serial));
  RETURN_IF_ERROR(ValidateDriverName(f("driver"), driver));
  d.serial = std::string(serial);
  d.driver = std::string(driver);
  ASSIGN_OR_RETURN(bool healthy, json::OptBool(v, "healthy", f("healthy"), true));
  ASSIGN_OR_RETURN(std::string_view reason,
                   json::OptString(v, "unhealthyReason", f("unhealthyReason")));
  if (healthy) {
    if (!reason.empty()) {
      return json::FieldError(f("unhealthyReason"), "is set but the device is healthy");
    }
    return d;
  }
  d.health = DeviceHealth::kUnhealthy;
  d.unhealthy_reason = UnhealthyReason::kUnspecified;
  if (!reason.empty()) {
    std::optional<UnhealthyReason> r = ParseUnhealthyReason(reason);
    if (!r) return json::FieldError(f("unhealthyReason"), UnhealthyReasonError(reason));
    d.unhealthy_reason = *r;
  }
  return d;
}

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
  if (!vu.empty()) RETURN_IF_ERROR(ValidateUid(at("vmUid"), vu));
  r.vm = std::string(vm);
  r.pod_name = std::string(pn);
  r.pod_uid = std::string(pu);
  r.vm_uid = std::string(vu);
  return std::optional<Reservation>(std::move(r));
}

absl::StatusOr<ReclaimPolicy> ParsePolicy(std::string_view s,
                                          std::string_view field) {
  if (s.empty() || s == "Retain") return ReclaimPolicy::kRetain;
  if (s == "Delete") return ReclaimPolicy::kDelete;
  return json::FieldError(
      field, absl::StrCat(model::QuoteForMessage(s), " must be Retain or Delete"));
}

// Device address -> "ns/name" of the claim holding it on `node`.
}  // namespace

absl::StatusOr<PciAddress> ParseAddress(std::string_view s, std::string_view field) {
  absl::StatusOr<PciAddress> a = PciAddress::Parse(s);
  if (!a.ok()) return json::FieldError(field, StdSv(a.status().message()));
  return *a;
}

void WriteDeviceFields(Writer& w, const Device& d) {
  Key(w, "address");
  Str(w, d.address.ToString());
  Key(w, "vendor");
  Str(w, Hex(d.vendor_id, 4));
  Key(w, "device");
  Str(w, Hex(d.device_id, 4));
  Key(w, "class");
  Str(w, Hex(d.class_code, 6));
  Key(w, "iommuGroup");
  w.Int(d.iommu_group);
  Key(w, "numaNode");
  w.Int(d.numa_node);
  Key(w, "serial");
  Str(w, d.serial);
  Key(w, "driver");
  Str(w, d.driver);
  Key(w, "healthy");
  w.Bool(d.health == DeviceHealth::kHealthy);
  if (d.health != DeviceHealth::kHealthy) {
    Key(w, "unhealthyReason");
    Str(w, ToString(d.unhealthy_reason == UnhealthyReason::kNone ? UnhealthyReason::kUnspecified
                                                                 : d.unhealthy_reason));
  }
}

absl::StatusOr<NodeInventory> ParseInventory(std::string_view body,
                                             std::string_view path_node) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (!doc.IsObject()) return json::TypeError("", "inventory must be an object");
  NodeInventory inv;
  ASSIGN_OR_RETURN(std::string_view node, json::ReqString(doc, "node", "node"));
  if (node != path_node) {
    return json::FieldError(
        "node", absl::StrCat(model::QuoteForMessage(node), " does not match the node ",
                             model::QuoteForMessage(path_node), " in the URL"));
  }
  RETURN_IF_ERROR(ValidateObjectName("node", node));
  inv.node = std::string(node);
  const Value* devices = Find(doc, "devices");
  if (!IsNullish(devices)) {
    if (!devices->IsArray()) return json::TypeError("devices", "must be an array");
    for (rapidjson::SizeType i = 0; i < devices->Size(); ++i) {
      ASSIGN_OR_RETURN(Device d,
                       ParseDevice((*devices)[i], absl::StrCat("devices[", i, "]")));
      inv.devices.push_back(std::move(d));
    }
  }
  std::sort(inv.devices.begin(), inv.devices.end(),
            [](const Device& a, const Device& b) { return a.address < b.address; });
  const Value* returned = Find(doc, "returned");
  if (!IsNullish(returned)) {
    if (!returned->IsArray()) return json::TypeError("returned", "must be an array");
    for (rapidjson::SizeType i = 0; i < returned->Size(); ++i) {
      const std::string f = absl::StrCat("returned[", i, "]");
      if (!(*returned)[i].IsString()) return json::TypeError(f, "must be a string");
      const std::string_view id((*returned)[i].GetString(), (*returned)[i].GetStringLength());
      RETURN_IF_ERROR(ValidateSerial(f, id));
      if (id.empty()) return json::FieldError(f, "must not be empty");
      inv.returned.emplace_back(id);
    }
    std::sort(inv.returned.begin(), inv.returned.end());
    inv.returned.erase(std::unique(inv.returned.begin(), inv.returned.end()), inv.returned.end());
  }
  for (size_t i = 1; i < inv.devices.size(); ++i) {
    if (inv.devices[i].address == inv.devices[i - 1].address) {
      return json::FieldError(
          "devices", absl::StrCat("address ", inv.devices[i].address.ToString(),
                                  " is listed twice"));
    }
  }
  return inv;
}

std::string WriteInventory(const NodeInventory& inv) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "node");
  Str(w, inv.node);
  Key(w, "devices");
  w.StartArray();
  for (const Device& d : inv.devices) {
    w.StartObject();
    WriteDeviceFields(w, d);
    w.EndObject();
  }
  w.EndArray();
  if (!inv.returned.empty()) {
    Key(w, "returned");
    w.StartArray();
    for (const std::string& id : inv.returned) Str(w, id);
    w.EndArray();
  }
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteInventoryAccepted(const InventoryAccepted& a) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "node");
  Str(w, a.node);
  Key(w, "devices");
  w.Uint64(a.devices);
  Key(w, "version");
  w.Uint64(a.version);
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<InventoryAccepted> ParseInventoryAccepted(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  InventoryAccepted a;
  ASSIGN_OR_RETURN(std::string_view node, json::ReqString(doc, "node", "node"));
  a.node = std::string(node);
  ASSIGN_OR_RETURN(a.devices, json::ReqCount(doc, "devices", "devices"));
  ASSIGN_OR_RETURN(a.version, json::OptCount(doc, "version", "version", 0));
  return a;
}

std::string WriteNodeAllocations(std::string_view node,
                                 const NodeAllocations& a) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "node");
  Str(w, node);
  Key(w, "version");
  w.Uint64(a.version);
  Key(w, "claimed");
  w.StartArray();
  for (const NodeAllocation& c : a.claimed) {
    w.StartObject();
    Key(w, "address");
    Str(w, c.address.ToString());
    Key(w, "claim");
    Str(w, c.claim.ToString());
    Key(w, "resourceName");
    Str(w, c.resource_name);
    Key(w, "reclaimPolicy");
    Str(w, ToString(c.reclaim_policy));
    Key(w, "reservedFor");
    WriteReservation(w, c.reserved_for);
    Key(w, "handedOff");
    w.Bool(!c.handoff_pending);
    Key(w, "handoffIndex");
    w.Uint(c.handoff_index);
    w.EndObject();
  }
  w.EndArray();
  Key(w, "returnToHost");
  w.StartArray();
  for (const PciAddress& p : a.return_to_host) Str(w, p.ToString());
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<NodeAllocationsReply> ParseNodeAllocations(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  NodeAllocationsReply r;
  // The URL names the node already; the answer repeats it.
  ASSIGN_OR_RETURN(std::string_view node, json::OptString(doc, "node", "node"));
  r.node = std::string(node);
  ASSIGN_OR_RETURN(r.allocations.version, json::ReqCount(doc, "version", "version"));
  const Value* claimed = Find(doc, "claimed");
  if (!IsNullish(claimed)) {
    if (!claimed->IsArray()) return json::TypeError("claimed", "must be an array");
    for (rapidjson::SizeType i = 0; i < claimed->Size(); ++i) {
      const Value& c = (*claimed)[i];
      const std::string at = absl::StrCat("claimed[", i, "]");
      if (!c.IsObject()) return json::TypeError(at, "must be an object");
      NodeAllocation a;
      ASSIGN_OR_RETURN(std::string_view addr,
                       json::ReqString(c, "address", at + ".address"));
      ASSIGN_OR_RETURN(a.address, ParseAddress(addr, at + ".address"));
      ASSIGN_OR_RETURN(std::string_view claim,
                       json::ReqString(c, "claim", at + ".claim"));
      ASSIGN_OR_RETURN(a.claim, ParseClaimKey(claim, at + ".claim"));
      ASSIGN_OR_RETURN(std::string_view res,
                       json::OptString(c, "resourceName", at + ".resourceName"));
      // Absent from extenders before resource names were sent.
      if (!res.empty()) RETURN_IF_ERROR(ValidateResourceName(at + ".resourceName", res));
      a.resource_name = std::string(res);
      ASSIGN_OR_RETURN(std::string_view pol,
                       json::OptString(c, "reclaimPolicy", at + ".reclaimPolicy"));
      ASSIGN_OR_RETURN(a.reclaim_policy, ParsePolicy(pol, at + ".reclaimPolicy"));
      ASSIGN_OR_RETURN(a.reserved_for,
                       ParseReservation(c, "reservedFor", at + ".reservedFor"));
      // Absent (an extender from before hand-offs): nothing is pending.
      ASSIGN_OR_RETURN(bool handed_off, json::OptBool(c, "handedOff", at + ".handedOff", true));
      a.handoff_pending = a.reserved_for.has_value() && !handed_off;
      // Absent (an extender from before hand-off order): 0, address order.
      ASSIGN_OR_RETURN(uint64_t index,
                       json::OptCount(c, "handoffIndex", at + ".handoffIndex", 0));
      if (index >= static_cast<uint64_t>(kMaxNodeDevices)) {
        return json::FieldError(at + ".handoffIndex",
                               absl::StrCat("must be below ", kMaxNodeDevices));
      }
      a.handoff_index = static_cast<uint32_t>(index);
      r.allocations.claimed.push_back(std::move(a));
    }
  }
  const Value* back = Find(doc, "returnToHost");
  if (!IsNullish(back)) {
    if (!back->IsArray()) return json::TypeError("returnToHost", "must be an array");
    for (rapidjson::SizeType i = 0; i < back->Size(); ++i) {
      const std::string at = absl::StrCat("returnToHost[", i, "]");
      if (!(*back)[i].IsString()) return json::TypeError(at, "must be a string");
      ASSIGN_OR_RETURN(PciAddress a, ParseAddress(StringOf((*back)[i]), at));
      r.allocations.return_to_host.push_back(a);
    }
  }
  std::sort(r.allocations.claimed.begin(), r.allocations.claimed.end(),
            [](const NodeAllocation& x, const NodeAllocation& y) { return x.address < y.address; });
  std::sort(r.allocations.return_to_host.begin(), r.allocations.return_to_host.end());
  return r;
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
  ASSIGN_OR_RETURN(c.spec.reclaim_policy, ParsePolicy(pol, "reclaimPolicy"));
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
  ASSIGN_OR_RETURN(c.spec.reclaim_policy, ParsePolicy(pol, "reclaimPolicy"));
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

void WriteTime(Writer& w, absl::Time t) {
  if (t == absl::InfinitePast()) {
    w.Null();
    return;
  }
  Str(w, StdSv(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone())));
}

NodeSummary SummaryOf(const NodeView& n) {
  return NodeSummary{n.name, n.reporting, n.last_report, n.inventory.devices.size()};
}

std::string_view ToString(DeviceState state) {
  switch (state) {
    case DeviceState::kFree:
      return "Free";
    case DeviceState::kAllocated:
      return "Allocated";
    case DeviceState::kUnhealthy:
      return "Unhealthy";
    case DeviceState::kReturning:
      return "ReturningToHost";
    case DeviceState::kReleased:
      return "Released";
  }
  return "Unknown";
}

namespace {

// The state of a listing that does not say (a server before states).
DeviceState ImpliedState(const DeviceListing& l) {
  if (l.claim.has_value()) return DeviceState::kAllocated;
  if (l.device.health != DeviceHealth::kHealthy || l.device.iommu_group < 0) {
    return DeviceState::kUnhealthy;
  }
  return DeviceState::kFree;
}

}  // namespace

std::vector<DeviceListing> ListDevices(const std::vector<NodeView>& nodes,
                                       const std::vector<Claim>& claims) {
  std::map<std::pair<std::string_view, PciAddress>, const ClaimKey*> held;
  for (const Claim& c : claims) {
    for (const BoundDevice& d : c.status.devices) held[{c.status.node, d.address}] = &c.key;
  }
  std::vector<DeviceListing> out;
  for (const NodeView& n : nodes) {
    for (const Device& d : n.inventory.devices) {
      DeviceListing l;
      l.node = n.name;
      l.device = d;
      if (auto it = held.find({n.name, d.address}); it != held.end()) l.claim = *it->second;
      auto released = std::find_if(n.released.begin(), n.released.end(),
                                   [&](const ReleasedDevice& r) { return r.address == d.address; });
      if (l.claim.has_value()) {
        l.state = DeviceState::kAllocated;
      } else if (std::find(n.return_to_host.begin(), n.return_to_host.end(), d.address) !=
                 n.return_to_host.end()) {
        l.state = DeviceState::kReturning;
      } else if (released != n.released.end()) {
        l.state = DeviceState::kReleased;
        // No claim (an abandoned erase): null, only an administrator decides.
        if (!released->claim.ns.empty()) l.released_from = released->claim;
      } else {
        l.state = ImpliedState(l);
      }
      out.push_back(std::move(l));
    }
  }
  return out;
}

namespace {

void WriteNodeFields(Writer& w, const NodeSummary& n) {
  Key(w, "name");
  Str(w, n.name);
  Key(w, "reporting");
  w.Bool(n.reporting);
  Key(w, "lastReport");
  WriteTime(w, n.last_report);
}

// The device fields and "claim" of one listing; "node" with `with_node`.
void WriteListing(Writer& w, const DeviceListing& l, bool with_node) {
  w.StartObject();
  if (with_node) {
    Key(w, "node");
    Str(w, l.node);
  }
  WriteDeviceFields(w, l.device);
  Key(w, "claim");
  if (l.claim.has_value()) {
    Str(w, l.claim->ToString());
  } else {
    w.Null();
  }
  Key(w, "state");
  Str(w, ToString(l.state));
  Key(w, "releasedFrom");
  if (l.released_from.has_value()) {
    Str(w, l.released_from->ToString());
  } else {
    w.Null();
  }
  w.EndObject();
}

// RFC 3339 (as WriteTime writes it, or with an offset), or null.
absl::StatusOr<absl::Time> ParseTime(const Value& obj, std::string_view key,
                                     std::string_view field) {
  ASSIGN_OR_RETURN(std::string_view s, json::OptString(obj, key, field));
  if (s.empty()) return absl::InfinitePast();
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(s), &t, &err) ||
      t == absl::InfiniteFuture() || t == absl::InfinitePast()) {
    return json::FieldError(field, absl::StrCat("\"", Sv(s), "\" is not an RFC 3339 time"));
  }
  // Whole seconds, as WriteTime writes (and Kubernetes' metav1.Time).
  return absl::FromUnixSeconds(absl::ToUnixSeconds(t));
}

absl::Status ParseNodeFields(const Value& v, std::string_view at, NodeSummary* n) {
  auto f = [&](std::string_view k) { return at.empty() ? std::string(k) : absl::StrCat(Sv(at), ".", Sv(k)); };
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(v, "name", f("name")));
  n->name = std::string(name);
  ASSIGN_OR_RETURN(n->reporting, json::OptBool(v, "reporting", f("reporting"), false));
  ASSIGN_OR_RETURN(n->last_report, ParseTime(v, "lastReport", f("lastReport")));
  return absl::OkStatus();
}

absl::StatusOr<DeviceListing> ParseListing(const Value& v, std::string_view at,
                                           std::string_view node) {
  DeviceListing l;
  ASSIGN_OR_RETURN(l.device, ParseDevice(v, at));
  if (node.empty()) {
    ASSIGN_OR_RETURN(std::string_view n, json::ReqString(v, "node", absl::StrCat(Sv(at), ".node")));
    node = n;
  }
  l.node = std::string(node);
  ASSIGN_OR_RETURN(std::string_view claim,
                   json::OptString(v, "claim", absl::StrCat(Sv(at), ".claim")));
  if (!claim.empty()) {
    ASSIGN_OR_RETURN(l.claim, ParseClaimKey(claim, absl::StrCat(Sv(at), ".claim")));
  }
  const std::string state_field = absl::StrCat(Sv(at), ".state");
  ASSIGN_OR_RETURN(std::string_view state, json::OptString(v, "state", state_field));
  if (state.empty()) {
    l.state = ImpliedState(l);
  } else {
    bool known = false;
    for (DeviceState s : {DeviceState::kFree, DeviceState::kAllocated, DeviceState::kUnhealthy,
                          DeviceState::kReturning, DeviceState::kReleased}) {
      if (state == ToString(s)) {
        l.state = s;
        known = true;
      }
    }
    if (!known) {
      return json::FieldError(
          state_field, absl::StrCat(model::QuoteForMessage(state),
                                    " must be Free, Allocated, Unhealthy, ReturningToHost or "
                                    "Released"));
    }
  }
  const std::string from_field = absl::StrCat(Sv(at), ".releasedFrom");
  ASSIGN_OR_RETURN(std::string_view from, json::OptString(v, "releasedFrom", from_field));
  if (!from.empty()) {
    ASSIGN_OR_RETURN(l.released_from, ParseClaimKey(from, from_field));
  }
  return l;
}

// The array member `key` of `obj` (absent or null: empty), each element
// decoded by `parse(element, "key[i]")`.
template <typename T, typename Parse>
absl::StatusOr<std::vector<T>> ParseArray(const Value& obj, std::string_view key, Parse parse) {
  std::vector<T> out;
  const Value* items = Find(obj, key);
  if (IsNullish(items)) return out;
  if (!items->IsArray()) return json::TypeError(key, "must be an array");
  out.reserve(items->Size());
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i) {
    const std::string at = absl::StrCat(Sv(key), "[", i, "]");
    if (!(*items)[i].IsObject()) return json::TypeError(at, "must be an object");
    ASSIGN_OR_RETURN(T item, parse((*items)[i], at));
    out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

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

std::string WriteNodeList(const std::vector<NodeSummary>& nodes) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "items");
  w.StartArray();
  for (const NodeSummary& n : nodes) {
    w.StartObject();
    WriteNodeFields(w, n);
    Key(w, "devices");
    w.Uint64(n.devices);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<std::vector<NodeSummary>> ParseNodeList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  return ParseArray<NodeSummary>(
      doc, "items", [](const Value& v, std::string_view at) -> absl::StatusOr<NodeSummary> {
        NodeSummary n;
        RETURN_IF_ERROR(ParseNodeFields(v, at, &n));
        ASSIGN_OR_RETURN(n.devices, json::OptCount(v, "devices", absl::StrCat(Sv(at), ".devices"), 0));
        return n;
      });
}

std::string WriteNodeDetail(const NodeDetail& detail) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  WriteNodeFields(w, detail.node);
  Key(w, "devices");
  w.StartArray();
  for (const DeviceListing& l : detail.devices) WriteListing(w, l, /*with_node=*/false);
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<NodeDetail> ParseNodeDetail(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  NodeDetail d;
  RETURN_IF_ERROR(ParseNodeFields(doc, "", &d.node));
  ASSIGN_OR_RETURN(d.devices, ParseArray<DeviceListing>(
                                  doc, "devices", [&](const Value& v, std::string_view at) {
                                    return ParseListing(v, at, d.node.name);
                                  }));
  d.node.devices = d.devices.size();
  return d;
}

std::string WriteDeviceList(const std::vector<DeviceListing>& devices) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  Key(w, "items");
  w.StartArray();
  for (const DeviceListing& l : devices) WriteListing(w, l, /*with_node=*/true);
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<std::vector<DeviceListing>> ParseDeviceList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(body, &doc));
  return ParseArray<DeviceListing>(doc, "items", [](const Value& v, std::string_view at) {
    return ParseListing(v, at, "");
  });
}

}  // namespace pdc::api
