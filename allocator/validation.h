// Validation of names and specs that enter the allocator from outside.
// Every error is InvalidArgument and names the field that is wrong.
// Thread-safety: pure functions.
#ifndef PDC_ALLOCATOR_VALIDATION_H_
#define PDC_ALLOCATOR_VALIDATION_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "model/types.h"

namespace pdc {

// Names follow Kubernetes' rules: model/names.h.
absl::Status ValidateClaimKey(const ClaimKey& key);

// REQUIRES: `classes` is the configured list.
absl::Status ValidateClaimSpec(const ClaimSpec& spec,
                               const std::vector<DeviceClass>& classes);

// A VM UID as the allocator keeps it (ClaimSpec::owner_vm_uid,
// SchedulingRequest::vm_uid): "" or at most kMaxVmUidLength bytes of
// printable ASCII without spaces, the bound the API layer holds for UIDs.
inline constexpr size_t kMaxVmUidLength = 128;
absl::Status ValidateVmUid(std::string_view field, std::string_view uid);

absl::Status ValidateDeviceClasses(const std::vector<DeviceClass>& classes);

// Why a claim read back from a store cannot be taken as it is ("" when it
// can): its spec contradicts the devices its status names (a spec edited
// after the bind: count, node, serial or address pin), or the status
// contradicts itself (a Pending claim with devices, a device named twice).
std::string ClaimContradiction(const Claim& claim);

// Resource name -> the short name used for template claims:
// "devices.kubevirt.io/nvme" -> "nvme". Lower-cased; characters that are not
// allowed in a DNS label become '-'.
std::string ResourceShortName(std::string_view resource_name);

}  // namespace pdc

#endif  // PDC_ALLOCATOR_VALIDATION_H_
