// resource.k8s.io/v1 ResourceClaim rules of the kube-apiserver double
// (kube_resources.h): what kube-apiserver checks on a claim's create, spec
// update and status update, where a DRA client's correctness depends on it.
// Follows pkg/apis/resource/validation/validation.go
// (ValidateResourceClaimUpdate, ValidateResourceClaimStatusUpdate) and the
// claim strategies of pkg/registry/resource/resourceclaim/strategy.go (the
// main resource keeps the stored status, /status keeps the stored spec:
// kube_resources.cc does that for every resource with a status subresource).
// Not checked: the request and selector schema of the spec, device status
// (status.devices), admin access, the field limits of requests and results.
// Thread-safety: pure functions.
#ifndef PDC_TESTS_TESTING_KUBE_RESOURCE_CLAIMS_H_
#define PDC_TESTS_TESTING_KUBE_RESOURCE_CLAIMS_H_

#include <string_view>

#include "absl/status/status.h"
#include "tests/testing/kube_json.h"

namespace pdc::testing::kube {

// ResourceClaimReservedForMaxSize (pkg/apis/resource/types.go).
inline constexpr int kResourceClaimReservedForMaxSize = 256;

// `old` is null on create. `obj` is the object about to be stored (after
// the strategy: on /status, the stored spec with the new status).
// `subresource` is "" or "status". 422 Invalid naming the first field in
// error, as kube-apiserver words it.
absl::Status ValidateResourceClaim(const Value* old, const Value& obj,
                                   std::string_view subresource);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_RESOURCE_CLAIMS_H_
