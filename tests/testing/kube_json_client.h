// KubeJsonClient: the few JSON calls the Kubernetes component doubles
// (resourceclaim_controller_double.h, dra_scheduler_double.h) make to the
// kube-apiserver double, as client-go's typed clients would: get, list,
// update (PUT, with the object's resourceVersion), create, delete, each
// answer parsed. An answer that is not 2xx is an error with the apiserver's
// message: 404 NotFound, 409 Aborted, 422 InvalidArgument, others Internal.
// Thread-safety: thread-compatible (one HttpClient).
#ifndef PDC_TESTS_TESTING_KUBE_JSON_CLIENT_H_
#define PDC_TESTS_TESTING_KUBE_JSON_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "net/http_client.h"
#include "tests/testing/kube_json.h"

namespace pdc::testing::kube {

class KubeJsonClient {
 public:
  // `url`: "http://127.0.0.1:<port>" of the apiserver double.
  static absl::StatusOr<std::unique_ptr<KubeJsonClient>> Connect(
      const std::string& url);

  absl::StatusOr<Document> Get(std::string_view path);
  // PUT `obj` (its metadata.resourceVersion is the precondition).
  absl::StatusOr<Document> Put(std::string_view path, const Value& obj);
  absl::StatusOr<Document> Post(std::string_view path, std::string_view body);
  absl::StatusOr<Document> Delete(std::string_view path);

 private:
  explicit KubeJsonClient(std::unique_ptr<HttpClient> http)
      : http_(std::move(http)) {}
  absl::StatusOr<Document> Do(std::string_view method, std::string_view path,
                              std::string_view body);

  std::unique_ptr<HttpClient> http_;
};

// The paths of resource.k8s.io/v1 claims and core pods in `ns`.
std::string ClaimsPath(std::string_view ns);  // .../resourceclaims
std::string ClaimPath(std::string_view ns, std::string_view name);
std::string PodPath(std::string_view ns, std::string_view name);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_JSON_CLIENT_H_
