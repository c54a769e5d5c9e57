// ResourceClaimControllerDouble: kube-controller-manager's resourceclaim
// controller, the part that keeps status.reservedFor and the allocation of
// ResourceClaims (pkg/controller/resourceclaim/controller.go, syncClaim),
// against the kube-apiserver double. No informers and no threads: the test
// drives it with SyncAll (one level-triggered pass over every claim of a
// namespace), as the controller's worker would on each claim it looks at.
// Pods are read from the apiserver (syncClaim's path for a pod its informer
// has not seen: a GET).
//
// Two behaviours, chosen per test (kVersion134 stands for 1.34 and 1.35):
//  - kVersion134: an entry in reservedFor that is not a core "pods" entry
//    makes syncClaim fail with "unsupported ReservedFor entry" before any
//    write: nothing of that claim is pruned or deallocated;
//  - kVersion136: unknown entries are kept, pod entries still pruned.
// Both prune pod entries whose pod is deleted, replaced (another UID) or
// done (isPodDone: phase Succeeded/Failed, or deleting and never
// scheduled), with a status update on the resourceVersion read (no patch),
// and clear status.allocation only when *their own* pruning empties the list
// and the claim carries resource.kubernetes.io/delete-protection (then the
// finalizer goes too). A deleted claim with no consumer loses its
// allocation and the finalizer. A claim owned by a pod (made from a
// template) is deleted once unreserved and its pod is gone or done.
// Thread-safety: thread-compatible.
#ifndef PDC_TESTS_TESTING_RESOURCECLAIM_CONTROLLER_DOUBLE_H_
#define PDC_TESTS_TESTING_RESOURCECLAIM_CONTROLLER_DOUBLE_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/testing/kube_json_client.h"

namespace pdc::testing {

enum class ClaimControllerVersion { kVersion134, kVersion136 };
std::string_view ToString(ClaimControllerVersion v);  // "1.34/1.35", "1.36"
inline void PrintTo(ClaimControllerVersion v, std::ostream* os) { *os << ToString(v); }

// resourceapi.Finalizer.
inline constexpr std::string_view kClaimFinalizer =
    "resource.kubernetes.io/delete-protection";

class ResourceClaimControllerDouble {
 public:
  static absl::StatusOr<std::unique_ptr<ResourceClaimControllerDouble>> Start(
      const std::string& api_url, ClaimControllerVersion version);

  // What one syncClaim did.
  struct Outcome {
    std::string claim;
    absl::Status status;   // The error syncClaim returned (retried later).
    int pruned = 0;        // Pod entries removed.
    bool deallocated = false;
  };
  // syncClaim of every claim in `ns`, ordered by name.
  absl::StatusOr<std::vector<Outcome>> SyncAll(std::string_view ns);
  Outcome SyncClaim(std::string_view ns, std::string_view name);

 private:
  ResourceClaimControllerDouble(std::unique_ptr<kube::KubeJsonClient> api,
                                ClaimControllerVersion version)
      : api_(std::move(api)), version_(version) {}
  // Whether the pod entry `ref` of a claim in `ns` stays; an error when the
  // apiserver could not say.
  absl::StatusOr<bool> KeepPod(std::string_view ns, const kube::Value& ref);
  absl::Status Write(kube::Document& claim, kube::Value* valid, bool prune,
                     Outcome& out);

  std::unique_ptr<kube::KubeJsonClient> api_;
  const ClaimControllerVersion version_;
};

// isPodDone (pkg/controller/resourceclaim/controller.go): terminal, or
// being deleted and never scheduled.
bool IsPodDone(const kube::Value& pod);

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_RESOURCECLAIM_CONTROLLER_DOUBLE_H_
