// The claims' wire (docs/rest-api.md §3): a claim, its create body, lists,
// the claim key "namespace/name" and a device's hand-over to a claim. The
// REST codecs' conventions: api/rest_json.h.
// Thread-safety: pure functions.
#ifndef PDC_API_CLAIM_JSON_H_
#define PDC_API_CLAIM_JSON_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/json_util.h"
#include "model/allocations.h"
#include "model/types.h"

namespace pdc::api {

// --- Claims ----------------------------------------------------------------
struct ClaimCreate {
  ClaimKey key;
  ClaimSpec spec;
};
// POST /v1/namespaces/{ns}/claims. Names must be DNS-1123 subdomains,
// count >= 1, address a PCI address, reclaimPolicy Retain|Delete.
absl::StatusOr<ClaimCreate> ParseClaimCreate(std::string_view body,
                                             std::string_view ns);
std::string WriteClaimCreate(const ClaimCreate& c);
// The members of a claim's spec (resourceName, count, pins, reclaimPolicy)
// and of its status, written into an object the caller opened: shared by the
// REST claim and the PersistentDeviceClaim object (api/claim_object.h).
void WriteClaimSpecFields(json::Writer& w, const ClaimSpec& spec);
// What a claim object's status also says of a bound device: facts of the
// node's inventory when pdc wrote the status (-1: unknown, not written).
struct DeviceFacts {
  int32_t iommu_group = -1;
  int16_t numa_node = -1;
  bool operator==(const DeviceFacts&) const = default;
};
// `facts`: one per status.devices entry, or fewer (the rest unknown).
void WriteClaimStatusFields(json::Writer& w, const ClaimStatus& status,
                            const std::vector<DeviceFacts>& facts = {});
void WriteClaimObject(json::Writer& w, const Claim& c);
std::string WriteClaim(const Claim& c);
std::string WriteClaimList(const std::vector<Claim>& claims);
absl::StatusOr<Claim> ParseClaim(const json::Value& v);
// One claim object (a create, get or release answer).
absl::StatusOr<Claim> ParseClaim(std::string_view body);
// {"items": [claim, ...]}; a wrong item is named by its index.
absl::StatusOr<std::vector<Claim>> ParseClaimList(std::string_view body);

// A claim's reservation ({"vm", "podName", "podUid", "vmUid", "vmiUid"}) or null.
void WriteReservation(json::Writer& w, const std::optional<Reservation>& r);
absl::StatusOr<std::optional<Reservation>> ParseReservation(const json::Value& obj,
                                                            std::string_view key,
                                                            std::string_view field);
// "Retain" (or absent) or "Delete"; FieldError naming `field` otherwise.
absl::StatusOr<ReclaimPolicy> ParseReclaimPolicy(std::string_view s, std::string_view field);

// "namespace/name"; FieldError naming `field` when either part is missing
// or is not a valid namespace / object name (so at most 63 + 1 + 253 bytes).
absl::StatusOr<ClaimKey> ParseClaimKey(std::string_view s, std::string_view field);

// The body of POST /v1/nodes/{node}/devices/{address}/handover:
// {"claim": "<namespace>/<name>"}, the claim a Released device goes to.
absl::StatusOr<ClaimKey> ParseDeviceHandOver(std::string_view body);
std::string WriteDeviceHandOver(const ClaimKey& to);

}  // namespace pdc::api

#endif  // PDC_API_CLAIM_JSON_H_
