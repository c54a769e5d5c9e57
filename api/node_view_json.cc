#include "api/node_view_json.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/claim_json.h"
#include "api/device_json.h"
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
