// What people read of nodes and devices (docs/rest-api.md §4.2-§4.4): the
// node list, a node with its devices, the device list. The REST codecs'
// conventions: api/rest_json.h.
// Thread-safety: pure functions.
#ifndef PDC_API_NODE_VIEW_JSON_H_
#define PDC_API_NODE_VIEW_JSON_H_

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

// --- Nodes and devices (GET /v1/nodes, /v1/nodes/{node}, /v1/devices) ------
// RFC 3339 in UTC, or JSON null for InfinitePast.
void WriteTime(json::Writer& w, absl::Time t);

// A node as GET /v1/nodes lists it.
struct NodeSummary {
  std::string name;
  bool reporting = false;
  absl::Time last_report = absl::InfinitePast();  // Never reported.
  uint64_t devices = 0;                           // How many it reported.

  bool operator==(const NodeSummary&) const = default;
};
// Where a device stands (docs/rest-api.md §4.3), the listing's "state".
enum class DeviceState : uint8_t {
  kFree = 0,        // Offered to any claim.
  kAllocated = 1,   // A claim holds it ("claim" names it).
  kUnhealthy = 2,   // Unhealthy or in no IOMMU group.
  kReturning = 3,   // "ReturningToHost": a Delete-policy claim was deleted;
                    // offered again once erased and back on its host driver.
  kReleased = 4,    // A Retain-policy claim was deleted ("releasedFrom").
};
std::string_view ToString(DeviceState state);

// A reported device with the claim whose status holds it.
struct DeviceListing {
  std::string node;
  Device device;
  std::optional<ClaimKey> claim;  // Free: none.
  DeviceState state = DeviceState::kFree;
  std::optional<ClaimKey> released_from;  // Released: the deleted claim.

  bool operator==(const DeviceListing&) const = default;
};
// GET /v1/nodes/{node}: the node and each of its devices.
struct NodeDetail {
  NodeSummary node;
  std::vector<DeviceListing> devices;

  bool operator==(const NodeDetail&) const = default;
};

// What the server lists, from its view of the nodes and the claims.
NodeSummary SummaryOf(const NodeView& node);
// Every device of `nodes` in their order, each with the claim of `claims`
// whose status names it on that node.
std::vector<DeviceListing> ListDevices(const std::vector<NodeView>& nodes,
                                       const std::vector<Claim>& claims);

// {"items": [{"name", "reporting", "lastReport", "devices": <count>}]}
std::string WriteNodeList(const std::vector<NodeSummary>& nodes);
absl::StatusOr<std::vector<NodeSummary>> ParseNodeList(std::string_view body);
// {"name", "reporting", "lastReport", "devices": [{<device>, "claim",
// "state", "releasedFrom"}]}. A listing without "state" (a server before
// states) reads as Allocated with a claim, else Free or Unhealthy.
std::string WriteNodeDetail(const NodeDetail& detail);
absl::StatusOr<NodeDetail> ParseNodeDetail(std::string_view body);
// {"items": [{"node", <device>, "claim", "state", "releasedFrom"}]};
// "claim" and "releasedFrom" are "namespace/name" or null.
std::string WriteDeviceList(const std::vector<DeviceListing>& devices);
absl::StatusOr<std::vector<DeviceListing>> ParseDeviceList(std::string_view body);

}  // namespace pdc::api

#endif  // PDC_API_NODE_VIEW_JSON_H_
