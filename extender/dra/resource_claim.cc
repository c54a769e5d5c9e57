#include "extender/dra/resource_claim.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::extender::dra {
namespace {

constexpr std::string_view kWhat = "ResourceClaim";

// Whether the claim's controller owner reference names a core/v1 Pod.
absl::StatusOr<bool> PodOwned(const api::json::Value& object) {
  const std::string field = absl::StrCat(Sv(kWhat), ".metadata");
  ASSIGN_OR_RETURN(const api::json::Value* metadata, api::json::OptObject(object, "metadata", field));
  if (metadata == nullptr) return false;
  ASSIGN_OR_RETURN(std::vector<api::OwnerReference> owners,
                   api::ReadOwnerReferences(*metadata, field));
  const api::OwnerReference* controller = api::ControllerOf(owners);
  return controller != nullptr && controller->kind == "Pod" && controller->api_version == "v1";
}

// status.allocation.devices.results of `allocation`.
absl::StatusOr<std::vector<AllocatedDevice>> ReadResults(const api::json::Value& allocation) {
  std::vector<AllocatedDevice> out;
  const std::string at = absl::StrCat(Sv(kWhat), ".status.allocation");
  if (!allocation.IsObject()) return api::json::TypeError(at, "must be an object");
  ASSIGN_OR_RETURN(const api::json::Value* devices,
                   api::json::OptObject(allocation, "devices", absl::StrCat(at, ".devices")));
  if (devices == nullptr) return out;
  const std::string field = absl::StrCat(at, ".devices.results");
  ASSIGN_OR_RETURN(const api::json::Value* results,
                   api::json::OptArray(*devices, "results", field));
  if (results == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < results->Size(); ++i) {
    const api::json::Value& r = (*results)[i];
    const std::string ri = absl::StrCat(field, "[", i, "]");
    if (!r.IsObject()) return api::json::TypeError(ri, "must be an object");
    AllocatedDevice d;
    for (auto [key, to] : {std::pair<std::string_view, std::string*>{"request", &d.request},
                           {"driver", &d.driver},
                           {"pool", &d.pool},
                           {"device", &d.device}}) {
      ASSIGN_OR_RETURN(std::string_view v,
                       api::json::ReqString(r, key, absl::StrCat(ri, ".", Sv(key))));
      *to = std::string(v);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::string ResourceClaimPath(std::string_view ns, std::string_view name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", Sv(ns), "/resourceclaims/", Sv(name));
}

std::string ResourceClaimStatusPath(std::string_view ns, std::string_view name) {
  return absl::StrCat(ResourceClaimPath(ns, name), "/status");
}

Consumer VmConsumer(std::string_view name, std::string_view uid) {
  return Consumer{"kubevirt.io", "virtualmachines", std::string(name), std::string(uid)};
}

absl::StatusOr<DraClaim> ReadDraClaim(const api::json::Value& object) {
  DraClaim out;
  if (!object.IsObject()) return api::json::TypeError(kWhat, "must be an object");
  ASSIGN_OR_RETURN(bool pod_owned, PodOwned(object));
  out.pod_owned = pod_owned;
  ASSIGN_OR_RETURN(const api::json::Value* status,
                   api::json::OptObject(object, "status", absl::StrCat(Sv(kWhat), ".status")));
  if (status == nullptr) return out;
  const api::json::Value* allocation = api::json::Find(*status, "allocation");
  out.allocated = !api::json::IsNullish(allocation);
  if (out.allocated) {
    ASSIGN_OR_RETURN(out.devices, ReadResults(*allocation));
  }
  const std::string field = absl::StrCat(Sv(kWhat), ".status.reservedFor");
  ASSIGN_OR_RETURN(const api::json::Value* list,
                   api::json::OptArray(*status, "reservedFor", field));
  if (list == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    const api::json::Value& e = (*list)[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (!e.IsObject()) return api::json::TypeError(at, "must be an object");
    Consumer c;
    ASSIGN_OR_RETURN(std::string_view group,
                     api::json::OptString(e, "apiGroup", absl::StrCat(at, ".apiGroup")));
    ASSIGN_OR_RETURN(std::string_view resource,
                     api::json::ReqString(e, "resource", absl::StrCat(at, ".resource")));
    ASSIGN_OR_RETURN(std::string_view name,
                     api::json::ReqString(e, "name", absl::StrCat(at, ".name")));
    ASSIGN_OR_RETURN(std::string_view uid,
                     api::json::ReqString(e, "uid", absl::StrCat(at, ".uid")));
    c.api_group = std::string(group);
    c.resource = std::string(resource);
    c.name = std::string(name);
    c.uid = std::string(uid);
    out.reserved_for.push_back(std::move(c));
  }
  return out;
}

void WriteReservedFor(rapidjson::Document& object, const std::vector<Consumer>& list) {
  auto& a = object.GetAllocator();
  if (!object.HasMember("status") || !object["status"].IsObject()) {
    object.RemoveMember("status");
    object.AddMember("status", rapidjson::Value(rapidjson::kObjectType), a);
  }
  rapidjson::Value& status = object["status"];
  rapidjson::Value out(rapidjson::kArrayType);
  for (const Consumer& c : list) {
    rapidjson::Value e(rapidjson::kObjectType);
    if (!c.api_group.empty()) e.AddMember("apiGroup", rapidjson::Value(c.api_group.c_str(), a), a);
    e.AddMember("resource", rapidjson::Value(c.resource.c_str(), a), a);
    e.AddMember("name", rapidjson::Value(c.name.c_str(), a), a);
    e.AddMember("uid", rapidjson::Value(c.uid.c_str(), a), a);
    out.PushBack(e, a);
  }
  status.RemoveMember("reservedFor");
  status.AddMember("reservedFor", out, a);
}

}  // namespace pdc::extender::dra
