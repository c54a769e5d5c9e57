// resource.k8s.io/v1 ResourceSlice and DeviceClass rules of the
// kube-apiserver double (kube_resources.h): what kube-apiserver checks on
// create and update where a DRA driver's publication or a deployment's
// DeviceClass depends on it. Follows pkg/apis/resource/validation/
// validation.go (ValidateResourceSlice, ValidateResourceSliceUpdate,
// validateResourceSliceSpec, validateResourcePool, validateDevice,
// validateQualifiedName, validateDeviceAttribute, ValidateDeviceClass,
// validateDeviceClassSpec, validateSelector) with the limits of
// pkg/apis/resource/types.go, and ValidateCSIDriverName of
// pkg/apis/core/validation/validation.go for driver names.
// Not checked: CEL expressions are not compiled (only required and at most
// CELSelectorExpressionMaxLength), node selectors beyond "exactly one term",
// device taints, counters, binding conditions, capacity request policies and
// quantity syntax, DeviceClass config contents.
// Thread-safety: pure functions.
#ifndef PDC_TESTS_TESTING_KUBE_RESOURCE_SLICES_H_
#define PDC_TESTS_TESTING_KUBE_RESOURCE_SLICES_H_

#include <string_view>

#include "absl/status/status.h"
#include "tests/testing/kube_json.h"

namespace pdc::testing::kube {

// pkg/apis/resource/types.go.
inline constexpr int kResourceSliceMaxDevices = 128;
// With a device that has taints or consumes counters.
inline constexpr int kResourceSliceMaxDevicesWithTaintsOrConsumesCounters = 64;
inline constexpr int kResourceSliceMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr int kDeviceMaxIdLength = 32;
inline constexpr int kDeviceAttributeMaxValueLength = 64;
inline constexpr int kDriverNameMaxLength = 63;
inline constexpr int kPoolNameMaxLength = 253;
inline constexpr int kDeviceSelectorsMaxSize = 32;
inline constexpr int kDeviceConfigMaxSize = 32;
inline constexpr int kCelSelectorExpressionMaxLength = 10 * 1024;

// `old` is null on create. 422 Invalid naming the first field in error, as
// kube-apiserver words it. `subresource` is always "" (neither has one).
absl::Status ValidateResourceSlice(const Value* old, const Value& obj,
                                   std::string_view subresource);
absl::Status ValidateDeviceClass(const Value* old, const Value& obj,
                                 std::string_view subresource);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_RESOURCE_SLICES_H_
