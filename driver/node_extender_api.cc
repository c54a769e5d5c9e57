#include "driver/node_extender_api.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace pdc::driver {
namespace {

using rapidjson::Value;

absl::Status Bad(std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("allocations answer: field ", Sv(field), ": ", Sv(why)));
}

const Value* Member(const Value& obj, const char* key) {
  if (!obj.IsObject()) return nullptr;
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

// Error body of a non-200 answer: {"error": "..."} when present.
std::string ErrorText(const HttpResponse& r) {
  rapidjson::Document doc;
  doc.Parse(r.body.data(), r.body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    if (const Value* e = Member(doc, "error"); e && e->IsString()) return e->GetString();
  }
  return r.body.substr(0, 200);
}

absl::Status HttpError(std::string_view what, const HttpResponse& r) {
  std::string msg = absl::StrCat(Sv(what), ": HTTP ", r.status, ": ", ErrorText(r));
  if (r.status >= 500) return absl::UnavailableError(msg);
  if (r.status == 401 || r.status == 403) return absl::PermissionDeniedError(msg);
  if (r.status == 404) return absl::NotFoundError(msg);
  return absl::InvalidArgumentError(msg);
}

}  // namespace

std::string EncodeInventory(const NodeInventory& inventory) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("node");
  w.String(inventory.node.c_str(), static_cast<rapidjson::SizeType>(inventory.node.size()));
  w.Key("devices");
  w.StartArray();
  for (const Device& d : inventory.devices) {
    w.StartObject();
    const std::string address = d.address.ToString();
    const std::string vendor = absl::StrFormat("%04x", d.vendor_id);
    const std::string device = absl::StrFormat("%04x", d.device_id);
    const std::string cls = absl::StrFormat("%06x", d.class_code);
    w.Key("address");
    w.String(address.c_str());
    w.Key("vendor");
    w.String(vendor.c_str());
    w.Key("device");
    w.String(device.c_str());
    w.Key("class");
    w.String(cls.c_str());
    w.Key("iommuGroup");
    w.Int(d.iommu_group);
    w.Key("numaNode");
    w.Int(d.numa_node);
    w.Key("serial");
    w.String(d.serial.c_str(), static_cast<rapidjson::SizeType>(d.serial.size()));
    w.Key("driver");
    w.String(d.driver.c_str(), static_cast<rapidjson::SizeType>(d.driver.size()));
    w.Key("healthy");
    w.Bool(d.health == DeviceHealth::kHealthy);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

absl::StatusOr<NodeAllocations> DecodeAllocations(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Bad("", "not a JSON object");
  NodeAllocations out;
  const Value* version = Member(doc, "version");
  if (version == nullptr || !version->IsUint64()) return Bad("version", "want an unsigned integer");
  out.version = version->GetUint64();
  if (const Value* claimed = Member(doc, "claimed"); claimed && !claimed->IsNull()) {
    if (!claimed->IsArray()) return Bad("claimed", "want an array");
    for (rapidjson::SizeType i = 0; i < claimed->Size(); ++i) {
      const Value& c = (*claimed)[i];
      const std::string field = absl::StrCat("claimed[", i, "]");
      const Value* address = Member(c, "address");
      if (address == nullptr || !address->IsString()) return Bad(field + ".address", "want a string");
      auto a = PciAddress::Parse(std::string_view(address->GetString(), address->GetStringLength()));
      if (!a.ok()) return Bad(field + ".address", StdSv(a.status().message()));
      ClaimedDevice d;
      d.address = *a;
      if (const Value* v = Member(c, "claim"); v && v->IsString()) d.claim = v->GetString();
      if (const Value* v = Member(c, "resourceName"); v && v->IsString()) d.resource_name = v->GetString();
      if (const Value* v = Member(c, "reclaimPolicy"); v && v->IsString()) {
        const std::string p = v->GetString();
        if (p == "Delete") {
          d.reclaim_policy = ReclaimPolicy::kDelete;
        } else if (p != "Retain" && !p.empty()) {
          return Bad(field + ".reclaimPolicy", absl::StrCat("\"", p, "\" is not Retain or Delete"));
        }
      }
      if (const Value* v = Member(c, "reservedFor"); v && !v->IsNull()) {
        if (!v->IsObject()) return Bad(field + ".reservedFor", "want an object or null");
        PodReservation r;
        for (auto [key, out] : {std::pair{"vm", &r.vm}, std::pair{"podName", &r.pod_name},
                                std::pair{"podUid", &r.pod_uid}}) {
          const Value* m = Member(*v, key);
          if (m == nullptr || m->IsNull()) continue;
          if (!m->IsString()) return Bad(absl::StrCat(field, ".reservedFor.", key), "want a string");
          *out = std::string(m->GetString(), m->GetStringLength());
        }
        d.reserved = true;
        d.reserved_for = std::move(r);
        d.handed_off = false;  // Until the answer says otherwise.
      }
      if (const Value* v = Member(c, "handedOff"); v && !v->IsNull()) {
        if (!v->IsBool()) return Bad(field + ".handedOff", "want true or false");
        d.handed_off = v->GetBool();
      }
      out.claimed.push_back(std::move(d));
    }
  }
  if (const Value* back = Member(doc, "returnToHost"); back && !back->IsNull()) {
    if (!back->IsArray()) return Bad("returnToHost", "want an array");
    for (rapidjson::SizeType i = 0; i < back->Size(); ++i) {
      const Value& v = (*back)[i];
      const std::string field = absl::StrCat("returnToHost[", i, "]");
      if (!v.IsString()) return Bad(field, "want a string");
      auto a = PciAddress::Parse(std::string_view(v.GetString(), v.GetStringLength()));
      if (!a.ok()) return Bad(field, StdSv(a.status().message()));
      out.return_to_host.push_back(*a);
    }
  }
  std::sort(out.claimed.begin(), out.claimed.end(),
            [](const auto& x, const auto& y) { return x.address < y.address; });
  std::sort(out.return_to_host.begin(), out.return_to_host.end());
  return out;
}

std::string EncodeHandoff(std::string_view pod_uid, std::string_view resource_name,
                          absl::Span<const PciAddress> devices) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("podUid");
  w.String(pod_uid.data(), static_cast<rapidjson::SizeType>(pod_uid.size()));
  w.Key("resourceName");
  w.String(resource_name.data(), static_cast<rapidjson::SizeType>(resource_name.size()));
  w.Key("devices");
  w.StartArray();
  for (PciAddress a : devices) {
    const std::string s = a.ToString();
    w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
  }
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

absl::Status ExtenderApi::ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                                         std::string_view resource_name,
                                         absl::Span<const PciAddress> devices) {
  return absl::UnimplementedError("this extender API does not confirm device hand-offs");
}

absl::Status HttpExtenderApi::ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                                             std::string_view resource_name,
                                             absl::Span<const PciAddress> devices) {
  auto r = client_->Post(absl::StrCat("/v1/nodes/", Sv(node), "/handoffs"),
                         EncodeHandoff(pod_uid, resource_name, devices));
  if (!r.ok()) return r.status();
  if (r->status == 200) return absl::OkStatus();
  if (r->status == 409) {
    return absl::FailedPreconditionError(
        absl::StrCat("hand-off confirmation: HTTP 409: ", ErrorText(*r)));
  }
  return HttpError("hand-off confirmation", *r);
}

absl::StatusOr<uint64_t> HttpExtenderApi::PutInventory(const NodeInventory& inventory) {
  auto r = client_->Put(absl::StrCat("/v1/nodes/", inventory.node, "/inventory"),
                        EncodeInventory(inventory));
  if (!r.ok()) return r.status();
  if (r->status != 200) return HttpError("inventory report", *r);
  rapidjson::Document doc;
  doc.Parse(r->body.data(), r->body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return absl::InvalidArgumentError("inventory answer is not a JSON object");
  }
  const Value* v = Member(doc, "version");
  return v != nullptr && v->IsUint64() ? v->GetUint64() : 0;
}

absl::StatusOr<NodeAllocations> HttpExtenderApi::GetAllocations(std::string_view node,
                                                                uint64_t since,
                                                                absl::Duration wait) {
  const int64_t wait_s = std::clamp<int64_t>(absl::ToInt64Seconds(wait), 0, 60);
  HttpRequestOptions options;
  options.timeout = absl::Seconds(wait_s + 10);
  auto r = client_->Get(
      absl::StrCat("/v1/nodes/", Sv(node), "/allocations?since=", since, "&wait=", wait_s),
      options);
  if (!r.ok()) return r.status();
  if (r->status != 200) return HttpError("allocations", *r);
  return DecodeAllocations(r->body);
}

}  // namespace pdc::driver
