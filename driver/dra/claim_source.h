// ClaimSource: reads a ResourceClaim (resource.k8s.io/v1) by namespace and
// name, reduced to what preparing it needs: its UID, the pod claim name of a
// claim made from a template, and the devices of its allocation
// (status.allocation.devices.results[]: request, driver, pool, device).
// KubeClaimSource reads it from kube-apiserver (kube/kube_http_client.h);
// tests use a fake. ParseResourceClaim is the pure decoder.
// Thread-safety: implementations are thread-safe; calls block.
#ifndef PDC_DRIVER_DRA_CLAIM_SOURCE_H_
#define PDC_DRIVER_DRA_CLAIM_SOURCE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/json_util.h"
#include "kube/kube_http_client.h"

namespace pdc::driver::dra {

// One entry of status.allocation.devices.results.
struct AllocatedDevice {
  std::string request;  // "<request>" or "<request>/<subrequest>".
  std::string driver;
  std::string pool;
  std::string device;

  bool operator==(const AllocatedDevice&) const = default;
};

struct ResourceClaimView {
  std::string ns;
  std::string name;
  std::string uid;
  // metadata.annotations["resource.kubernetes.io/pod-claim-name"]; set
  // only on a claim made from a ResourceClaimTemplate.
  std::optional<std::string> pod_claim_name;
  bool allocated = false;  // status.allocation is set.
  std::vector<AllocatedDevice> devices;
};

// Decodes a ResourceClaim. InvalidArgument naming the field when the JSON
// is malformed or a required field is missing or of the wrong type.
absl::StatusOr<ResourceClaimView> ParseResourceClaim(std::string_view json);
// The same, of an object parsed already (a list item, a watch event).
absl::StatusOr<ResourceClaimView> ResourceClaimFromJson(const api::json::Value& object);

class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // NotFound when the claim does not exist; Unavailable when the apiserver
  // cannot be asked now.
  virtual absl::StatusOr<ResourceClaimView> Get(std::string_view ns, std::string_view name) = 0;
};

// GET /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}.
class KubeClaimSource : public ClaimSource {
 public:
  // `api` must outlive this.
  KubeClaimSource(kube::KubeApi* api, absl::Duration timeout) : api_(api), timeout_(timeout) {}
  absl::StatusOr<ResourceClaimView> Get(std::string_view ns, std::string_view name) override;

 private:
  kube::KubeApi* const api_;
  const absl::Duration timeout_;
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_CLAIM_SOURCE_H_
