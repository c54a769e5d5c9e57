#include "driver/dra/claim_source.h"

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/dra/names.h"

namespace pdc::driver::dra {

namespace json = ::pdc::api::json;

absl::StatusOr<ResourceClaimView> ParseResourceClaim(std::string_view text) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(text, &doc));
  return ResourceClaimFromJson(doc);
}

absl::StatusOr<ResourceClaimView> ResourceClaimFromJson(const json::Value& doc) {
  if (!doc.IsObject()) return json::TypeError("ResourceClaim", "is not an object");
  ResourceClaimView view;
  ASSIGN_OR_RETURN(const json::Value* meta, json::OptObject(doc, "metadata", "metadata"));
  if (meta == nullptr) return json::TypeError("metadata", "is missing");
  ASSIGN_OR_RETURN(std::string_view ns, json::ReqString(*meta, "namespace", "metadata.namespace"));
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(*meta, "name", "metadata.name"));
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(*meta, "uid", "metadata.uid"));
  view.ns = std::string(ns);
  view.name = std::string(name);
  view.uid = std::string(uid);
  ASSIGN_OR_RETURN(const json::Value* annotations,
                   json::OptObject(*meta, "annotations", "metadata.annotations"));
  if (annotations != nullptr) {
    const json::Value* pod_claim = json::Find(*annotations, kPodClaimNameAnnotation);
    if (!json::IsNullish(pod_claim)) {
      if (!pod_claim->IsString()) {
        return json::TypeError(
            absl::StrCat("metadata.annotations[", Sv(kPodClaimNameAnnotation), "]"),
            "is not a string");
      }
      view.pod_claim_name = std::string(json::StringOf(*pod_claim));
    }
  }
  ASSIGN_OR_RETURN(const json::Value* status, json::OptObject(doc, "status", "status"));
  if (status == nullptr) return view;
  ASSIGN_OR_RETURN(const json::Value* allocation,
                   json::OptObject(*status, "allocation", "status.allocation"));
  if (allocation == nullptr) return view;
  view.allocated = true;
  ASSIGN_OR_RETURN(const json::Value* devices,
                   json::OptObject(*allocation, "devices", "status.allocation.devices"));
  if (devices == nullptr) return view;
  ASSIGN_OR_RETURN(const json::Value* results,
                   json::OptArray(*devices, "results", "status.allocation.devices.results"));
  if (results == nullptr) return view;
  for (rapidjson::SizeType i = 0; i < results->Size(); ++i) {
    const std::string field = absl::StrCat("status.allocation.devices.results[", i, "]");
    const json::Value& r = (*results)[i];
    if (!r.IsObject()) return json::TypeError(field, "is not an object");
    AllocatedDevice d;
    ASSIGN_OR_RETURN(std::string_view request, json::ReqString(r, "request", field + ".request"));
    ASSIGN_OR_RETURN(std::string_view driver, json::ReqString(r, "driver", field + ".driver"));
    ASSIGN_OR_RETURN(std::string_view pool, json::ReqString(r, "pool", field + ".pool"));
    ASSIGN_OR_RETURN(std::string_view device, json::ReqString(r, "device", field + ".device"));
    d.request = std::string(request);
    d.driver = std::string(driver);
    d.pool = std::string(pool);
    d.device = std::string(device);
    view.devices.push_back(std::move(d));
  }
  return view;
}

// The path of one ResourceClaim (a helper tests/deploy/check_manifests.py
// follows to the RBAC pdc-node needs).
std::string ResourceClaimPath(std::string_view ns, std::string_view name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", Sv(ns),
                      "/resourceclaims/", Sv(name));
}

absl::StatusOr<ResourceClaimView> KubeClaimSource::Get(std::string_view ns,
                                                       std::string_view name) {
  const std::string what =
      absl::StrCat("reading ResourceClaim ", Sv(ns), "/", Sv(name));
  ASSIGN_OR_RETURN(
      HttpResponse response,
      api_->Call("GET", ResourceClaimPath(ns, name), "", "", what, timeout_));
  if (response.status / 100 != 2) {
    return kube::FromApiserver(response.status, response.body, what);
  }
  absl::StatusOr<ResourceClaimView> view = ParseResourceClaim(response.body);
  if (!view.ok()) {
    return absl::Status(view.status().code(), absl::StrCat(what, ": ", view.status().message()));
  }
  return view;
}

}  // namespace pdc::driver::dra
