#include "api/device_json.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/claim_json.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {

using json::Find;
using json::IsNullish;
using json::Key;
using json::Str;
using json::StringOf;
using json::Value;
using json::Writer;

namespace {

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

}  // namespace

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
      ASSIGN_OR_RETURN(a.reclaim_policy, ParseReclaimPolicy(pol, at + ".reclaimPolicy"));
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

}  // namespace pdc::api
