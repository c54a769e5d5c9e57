#include "kube/leader_endpoint.h"

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "common/status_macros.h"

namespace pdc::kube {
namespace {

namespace json = api::json;

std::string SlicesPath(const LeaderEndpoint& e) {
  return absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", e.ns,
                      "/endpointslices");
}
std::string SlicePath(const LeaderEndpoint& e) {
  return absl::StrCat("/apis/discovery.k8s.io/v1/namespaces/", e.ns,
                      "/endpointslices/", e.service, "-leader");
}

}  // namespace

std::string EndpointSliceJson(const LeaderEndpoint& e, bool withdrawn,
                              std::string_view resource_version) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  w.Text("apiVersion");
  w.Text("discovery.k8s.io/v1");
  w.Text("kind");
  w.Text("EndpointSlice");
  w.Text("metadata");
  w.StartObject();
  w.Text("name");
  w.Text(absl::StrCat(e.service, "-leader"));
  w.Text("namespace");
  w.Text(e.ns);
  if (!resource_version.empty()) {
    w.Text("resourceVersion");
    w.Text(resource_version);
  }
  w.Text("labels");
  w.StartObject();
  // Ties the slice to its Service; kube-proxy and DNS read it from there.
  w.Text("kubernetes.io/service-name");
  w.Text(e.service);
  // Not the EndpointSlice controller's: it leaves the slice alone.
  w.Text("endpointslice.kubernetes.io/managed-by");
  w.Text("pdc-extender.pdc.kubevirt.io");
  w.EndObject();
  w.EndObject();
  w.Text("addressType");
  w.Text(e.ip.find(':') == std::string::npos ? "IPv4" : "IPv6");
  w.Text("endpoints");
  w.StartArray();
  if (!withdrawn) {
    w.StartObject();
    w.Text("addresses");
    w.StartArray();
    w.Text(e.ip);
    w.EndArray();
    w.Text("conditions");
    w.StartObject();
    w.Text("ready");
    w.Bool(true);
    w.Text("serving");
    w.Bool(true);
    w.Text("terminating");
    w.Bool(false);
    w.EndObject();
    w.Text("targetRef");
    w.StartObject();
    w.Text("kind");
    w.Text("Pod");
    w.Text("namespace");
    w.Text(e.ns);
    w.Text("name");
    w.Text(e.pod);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Text("ports");
  w.StartArray();
  for (const auto& [name, port] : e.ports) {
    w.StartObject();
    w.Text("name");
    w.Text(name);
    w.Text("port");
    w.Uint(port);
    w.Text("protocol");
    w.Text("TCP");
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::Status WriteLeaderEndpoint(KubeApi* api, const LeaderEndpoint& e,
                                 bool withdrawn, absl::Duration timeout,
                                 const Clock* clock) {
  const std::string what =
      absl::StrCat("EndpointSlice ", e.ns, "/", e.service, "-leader");
  const absl::Time deadline = clock->Now() + timeout;
  ASSIGN_OR_RETURN(HttpResponse got,
                   api->Call("GET", SlicePath(e), "", "", what, timeout));
  if (got.status == 404) {
    ASSIGN_OR_RETURN(
        HttpResponse made,
        api->Call("POST", SlicesPath(e), EndpointSliceJson(e, withdrawn, ""),
                  "application/json", what, deadline - clock->Now()));
    if (made.status == 201) return absl::OkStatus();
    return FromApiserver(made.status, made.body, what);
  }
  if (got.status != 200) return FromApiserver(got.status, got.body, what);
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(got.body, &doc));
  ASSIGN_OR_RETURN(api::ObjectMeta meta,
                   api::ReadObjectMeta(doc, "EndpointSlice"));
  ASSIGN_OR_RETURN(
      HttpResponse put,
      api->Call("PUT", SlicePath(e),
                EndpointSliceJson(e, withdrawn, meta.resource_version),
                "application/json", what, deadline - clock->Now()));
  if (put.status == 200) return absl::OkStatus();
  return FromApiserver(put.status, put.body, what);
}

}  // namespace pdc::kube
