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
std::string WriteInventoryAccepted(std::string_view node, size_t devices,
                                   uint64_t version);

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
void WriteClaimObject(json::Writer& w, const Claim& c);
std::string WriteClaim(const Claim& c);
std::string WriteClaimList(const std::vector<Claim>& claims);
absl::StatusOr<Claim> ParseClaim(const json::Value& v);
// One claim object (a create, get or release answer).
absl::StatusOr<Claim> ParseClaim(std::string_view body);
// {"items": [claim, ...]}; a wrong item is named by its index.
absl::StatusOr<std::vector<Claim>> ParseClaimList(std::string_view body);

// --- Nodes and devices -----------------------------------------------------
// RFC 3339 in UTC, or JSON null for InfinitePast.
void WriteTime(json::Writer& w, absl::Time t);
// `claims` maps device address to claim "ns/name" for this node.
std::string WriteNodeList(const std::vector<NodeView>& nodes);
std::string WriteNodeDetail(const NodeView& node,
                            const std::vector<Claim>& claims);
std::string WriteDeviceList(const std::vector<NodeView>& nodes,
                            const std::vector<Claim>& claims);

}  // namespace pdc::api

#endif  // PDC_API_REST_JSON_H_
