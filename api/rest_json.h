// JSON codecs of the pdc REST API (docs/rest-api.md, the wire format shared
// by the extender, the node driver, pdcctl and the simulator).
// Writers produce the exact documented shapes with keys in a fixed order;
// readers validate every field and name it in errors (TypeError -> 400 for a
// wrong JSON type, FieldError -> 422 for a bad value).
// One codec per wire type: the server, its clients (pdc-node, pdcctl) and
// pdc-sim all decode with these, so they read what the server writes.
// Thread-safety: pure functions.
#ifndef PDC_API_REST_JSON_H_
#define PDC_API_REST_JSON_H_

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

// A PCI address field; FieldError (422) naming `field` when malformed.
absl::StatusOr<PciAddress> ParseAddress(std::string_view s, std::string_view field);

// --- Inventory (PUT /v1/nodes/{node}/inventory) ---------------------------
// `path_node` is {node} from the URL; the body's "node" must equal it.
absl::StatusOr<NodeInventory> ParseInventory(std::string_view body,
                                             std::string_view path_node);
std::string WriteInventory(const NodeInventory& inv);
void WriteDeviceFields(json::Writer& w, const Device& d);
// The answer: {"node", "devices": <how many matched a device class>,
// "version": <the node's allocations version>}.
struct InventoryAccepted {
  std::string node;
  uint64_t devices = 0;
  uint64_t version = 0;  // Absent (servers before versions): 0.

  bool operator==(const InventoryAccepted&) const = default;
};
std::string WriteInventoryAccepted(const InventoryAccepted& accepted);
absl::StatusOr<InventoryAccepted> ParseInventoryAccepted(std::string_view body);

// --- Allocations (GET /v1/nodes/{node}/allocations) -----------------------
std::string WriteNodeAllocations(std::string_view node,
                                 const NodeAllocations& a);
struct NodeAllocationsReply {
  std::string node;
  NodeAllocations allocations;
};
// Reads keys as every codec here does (exact, then ASCII case-insensitive);
// an entry without `handedOff` is handed off (an extender from before
// hand-offs), as is one with `handedOff` null. `claimed` and `returnToHost`
// come back sorted by address whatever the order on the wire.
absl::StatusOr<NodeAllocationsReply> ParseNodeAllocations(std::string_view body);

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

// "namespace/name"; FieldError naming `field` when either part is missing
// or is not a valid namespace / object name (so at most 63 + 1 + 253 bytes).
absl::StatusOr<ClaimKey> ParseClaimKey(std::string_view s, std::string_view field);

// The body of POST /v1/nodes/{node}/devices/{address}/handover:
// {"claim": "<namespace>/<name>"}, the claim a Released device goes to.
absl::StatusOr<ClaimKey> ParseDeviceHandOver(std::string_view body);
std::string WriteDeviceHandOver(const ClaimKey& to);

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

#endif  // PDC_API_REST_JSON_H_
