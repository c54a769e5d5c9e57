#include "tests/testing/kube_json_client.h"

#include <utility>

#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {

absl::StatusOr<std::unique_ptr<KubeJsonClient>> KubeJsonClient::Connect(
    const std::string& url) {
  HttpClientOptions o;
  o.base_url = url;
  o.peer_name = "kube-apiserver double";
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<HttpClient>> c = HttpClient::Create(o);
  if (!c.ok()) return c.status();
  return std::unique_ptr<KubeJsonClient>(new KubeJsonClient(*std::move(c)));
}

absl::StatusOr<Document> KubeJsonClient::Do(std::string_view method,
                                            std::string_view path,
                                            std::string_view body) {
  HttpRequestOptions o;
  o.content_type = "application/json";
  absl::StatusOr<HttpResponse> r = http_->Do(method, path, body, o);
  if (!r.ok()) return r.status();
  Document d;
  d.Parse(r->body.data(), r->body.size());
  if (r->status >= 200 && r->status < 300) {
    if (d.HasParseError() || !d.IsObject()) {
      return absl::InternalError(Cat(method, " ", path, ": not a JSON object"));
    }
    return d;
  }
  const std::string message =
      Cat(method, " ", path, ": ", r->status, " ",
          d.IsObject() ? GetString(d, {"message"}) : r->body);
  switch (r->status) {
    case 404:
      return absl::NotFoundError(message);
    case 409:
      return absl::AbortedError(message);
    case 422:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<Document> KubeJsonClient::Get(std::string_view path) {
  return Do("GET", path, "");
}
absl::StatusOr<Document> KubeJsonClient::Put(std::string_view path,
                                             const Value& obj) {
  return Do("PUT", path, ToJson(obj));
}
absl::StatusOr<Document> KubeJsonClient::Post(std::string_view path,
                                              std::string_view body) {
  return Do("POST", path, body);
}
absl::StatusOr<Document> KubeJsonClient::Delete(std::string_view path) {
  return Do("DELETE", path, "");
}

std::string ClaimsPath(std::string_view ns) {
  return Cat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims");
}
std::string ClaimPath(std::string_view ns, std::string_view name) {
  return Cat(ClaimsPath(ns), "/", name);
}
std::string PodPath(std::string_view ns, std::string_view name) {
  return Cat("/api/v1/namespaces/", ns, "/pods/", name);
}

}  // namespace pdc::testing::kube
