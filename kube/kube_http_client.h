// HttpKubeClient: KubeClient over HTTPS to kube-apiserver (pdc_http_client:
// Beast + OpenSSL), and the two ways of finding the apiserver:
//  - in-cluster: $KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT, the
//    service-account token and CA under
//    /var/run/secrets/kubernetes.io/serviceaccount (the token file is read
//    again for every call: bound service-account tokens rotate);
//  - a kubeconfig file (current-context; cluster server and CA, user token,
//    tokenFile or client certificate; *-data fields are written to private
//    files because the TLS layer loads PEM from files).
// Errors from the apiserver are read from its v1 Status answer: 404 ->
// NotFound, 409 -> Aborted, 401 -> Unauthenticated, 403 -> PermissionDenied,
// 429/5xx -> Unavailable, with the apiserver's message.
// Thread-safety: thread-safe; a small pool of kept-alive connections.
#ifndef PDC_KUBE_KUBE_HTTP_CLIENT_H_
#define PDC_KUBE_KUBE_HTTP_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kube/kube_client.h"
#include "net/http_client.h"

namespace pdc::kube {

struct KubeClientConfig {
  std::string server;      // https://host:port
  std::string ca_file;     // "" = system trust store.
  std::string token;       // Static bearer token, or
  std::string token_file;  // a file re-read per call.
  std::string cert_file;   // Client certificate (PEM), optional.
  std::string key_file;
  absl::Duration timeout = absl::Seconds(10);
};

using GetEnv = std::function<std::optional<std::string>(std::string_view)>;

// `getenv` nullptr = the process environment; `sa_dir` is the
// service-account directory (tests point it at a temp dir).
absl::StatusOr<KubeClientConfig> InClusterConfig(
    const GetEnv& getenv = nullptr,
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");
// Inline *-data is written under `scratch_dir` ("" = a fresh private
// directory under $TMPDIR).
absl::StatusOr<KubeClientConfig> KubeconfigFile(const std::string& path,
                                                const std::string& scratch_dir = "");

absl::StatusOr<std::unique_ptr<KubeClient>> NewHttpKubeClient(
    KubeClientConfig config);

// One apiserver's connection settings, for callers that make their own
// requests (the reflectors, kube_reflector.h): each watch has a client of
// its own, which it can cancel.
class KubeEndpoint {
 public:
  explicit KubeEndpoint(KubeClientConfig config);
  // A new client: URL and TLS files checked now, connected on first use.
  absl::StatusOr<std::unique_ptr<HttpClient>> NewClient() const;
  // What every request carries: Accept, and Authorization with the token
  // (a token file is read now: bound service-account tokens rotate).
  absl::StatusOr<HttpRequestOptions> RequestOptions() const;
  const KubeClientConfig& config() const { return config_; }

 private:
  const KubeClientConfig config_;
};

// Requests to one apiserver over a small pool of kept-alive connections:
// the calls pdc makes besides watches (claims, their status, events).
// Thread-safe; calls block for at most their timeout (and the config's).
class KubeApi {
 public:
  // Checks the URL and TLS files now (one client is made and kept).
  static absl::StatusOr<std::unique_ptr<KubeApi>> Connect(KubeClientConfig config);

  // `method` `path` with `body` (`content_type` "" = none). A transport
  // failure is its Status prefixed with `what`; any HTTP answer, 2xx or
  // not, is returned (FromApiserver turns the others into a Status).
  // DeadlineExceeded without a request when `timeout` is not positive.
  absl::StatusOr<HttpResponse> Call(std::string_view method, const std::string& path,
                                    const std::string& body, std::string_view content_type,
                                    std::string_view what, absl::Duration timeout);
  const KubeClientConfig& config() const { return endpoint_.config(); }

 private:
  explicit KubeApi(KubeClientConfig config) : endpoint_(std::move(config)) {}

  const KubeEndpoint endpoint_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<HttpClient>> idle_ ABSL_GUARDED_BY(mu_);
};

// The Status for an apiserver answer that is not 2xx, from the v1 Status it
// carries: 404 NotFound, 409 Aborted, 401 Unauthenticated, 403
// PermissionDenied, 400/422 InvalidArgument, 429/5xx Unavailable, else
// Internal; the message says `what`, the code, reason and message.
absl::Status FromApiserver(int http, std::string_view body, std::string_view what);

// The v1 Binding kube-apiserver expects on pods/<name>/binding.
std::string BindingJson(std::string_view ns, std::string_view name,
                        std::string_view uid, std::string_view node);
// A JSON merge patch setting one annotation.
std::string AnnotationPatchJson(std::string_view key, std::string_view value);

}  // namespace pdc::kube

#endif  // PDC_KUBE_KUBE_HTTP_CLIENT_H_
