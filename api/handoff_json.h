// JSON of the device hand-off endpoints (docs/rest-api.md §5):
//   POST   /v1/nodes/{node}/handoffs          the node driver confirms one
//   GET    /v1/nodes/{node}/handoffs, /v1/handoffs   pods waiting for devices
//   DELETE /v1/nodes/{node}/handoffs/{podUid} cancel (the pod is gone)
// Parsers return errors naming the field (400 wrong shape, 422 bad value).
// Thread-safety: pure functions.
#ifndef PDC_API_HANDOFF_JSON_H_
#define PDC_API_HANDOFF_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/allocations.h"

namespace pdc::api {

// {"podUid": "...", "resourceName": "...", "devices": ["0000:3b:00.0"]}
struct HandoffConfirm {
  std::string pod_uid;
  std::string resource_name;
  std::vector<PciAddress> devices;

  bool operator==(const HandoffConfirm&) const = default;
};
absl::StatusOr<HandoffConfirm> ParseHandoffConfirm(std::string_view body);
std::string WriteHandoffConfirm(const HandoffConfirm& c);

// {"node", "podUid", "resourceName", "claims": ["ns/name"]}
std::string WriteHandoffConfirmed(std::string_view node, const HandoffConfirm& c,
                                  const std::vector<ClaimKey>& claims);

// {"items": [{"node","resourceName","namespace","vm","podName","podUid",
//             "claims": [...], "devices": [...]}]}
std::string WriteHandoffList(const std::vector<PendingHandoff>& items);
absl::StatusOr<std::vector<PendingHandoff>> ParseHandoffList(std::string_view body);

// {"released": ["ns/name", ...]}
std::string WriteReleased(const std::vector<ClaimKey>& claims);

// The claim keys listed under `member` of a JSON object: "claims" of a
// hand-off confirmation, "released" of a cancellation. Absent or null: none.
absl::StatusOr<std::vector<ClaimKey>> ParseClaimKeys(std::string_view body,
                                                     std::string_view member);

}  // namespace pdc::api

#endif  // PDC_API_HANDOFF_JSON_H_
