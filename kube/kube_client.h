// KubeClient: the three Kubernetes API calls pdc-extender makes when it is
// kube-scheduler's binder (docs/design.md §5.4): read a pod it did not see in
// filter, annotate a pod with its devices, and bind the pod to its node.
// Implementations: HttpKubeClient (kube_http_client.h, HTTPS to
// kube-apiserver) and fakes in tests.
// Every call takes its own time limit (`timeout`, > 0), so that a caller
// with a deadline (the bind saga) can give each step what is left of it.
// Thread-safety: implementations must be thread-safe; calls block.
#ifndef PDC_KUBE_KUBE_CLIENT_H_
#define PDC_KUBE_KUBE_CLIENT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdc::kube {

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // GET /api/v1/namespaces/{ns}/pods/{name}: the pod's JSON. NotFound when
  // the apiserver says 404.
  virtual absl::StatusOr<std::string> GetPod(std::string_view ns, std::string_view name,
                                             absl::Duration timeout) = 0;
  // PATCH /api/v1/namespaces/{ns}/pods/{name} (merge patch) setting
  // metadata.annotations[key] = value.
  virtual absl::Status AnnotatePod(std::string_view ns, std::string_view name,
                                   std::string_view key, std::string_view value,
                                   absl::Duration timeout) = 0;
  // POST /api/v1/namespaces/{ns}/pods/{name}/binding with a v1 Binding to
  // `node`. Conflict (the pod is already bound, or has another UID) is
  // Aborted. Never sent twice: when it fails on the way (Unavailable,
  // DeadlineExceeded), the apiserver may still have committed it.
  virtual absl::Status BindPod(std::string_view ns, std::string_view name,
                               std::string_view uid, std::string_view node,
                               absl::Duration timeout) = 0;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_KUBE_CLIENT_H_
