// The node driver's wire (docs/rest-api.md §4.1, §4.5): a device, the
// inventory pdc-node reports and the allocations it reads back. The REST
// codecs' conventions: api/rest_json.h.
// Thread-safety: pure functions.
#ifndef PDC_API_DEVICE_JSON_H_
#define PDC_API_DEVICE_JSON_H_

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

// --- Inventory (PUT /v1/nodes/{node}/inventory) ---------------------------
// `path_node` is {node} from the URL; the body's "node" must equal it.
absl::StatusOr<NodeInventory> ParseInventory(std::string_view body,
                                             std::string_view path_node);
std::string WriteInventory(const NodeInventory& inv);
void WriteDeviceFields(json::Writer& w, const Device& d);
// One device object of an inventory or a listing; errors name `at`.
absl::StatusOr<Device> ParseDevice(const json::Value& v, std::string_view at);
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

}  // namespace pdc::api

#endif  // PDC_API_DEVICE_JSON_H_
