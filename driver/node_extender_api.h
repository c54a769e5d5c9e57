// ExtenderApi: what pdc-node needs from pdc-extender (rest-api.md, node
// driver endpoints): report the inventory (also the heartbeat) and learn the
// node's allocations by long-poll. HttpExtenderApi speaks it over the shared
// HTTP client; tests use a fake. JSON encoding and decoding are exposed for
// tests.
// Thread-safety: implementations are thread-safe (HttpExtenderApi
// serialises requests on its one connection).
#ifndef PDC_DRIVER_NODE_EXTENDER_API_H_
#define PDC_DRIVER_NODE_EXTENDER_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "allocator/types.h"
#include "common/pci_address.h"
#include "extender/client/http_client.h"

namespace pdc::driver {

struct ClaimedDevice {
  PciAddress address;
  std::string claim;  // "namespace/name"
  std::string resource_name;
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;
  bool reserved = false;  // A VM (pod) is using it right now.

  bool operator==(const ClaimedDevice&) const = default;
};

struct NodeAllocations {
  uint64_t version = 0;
  std::vector<ClaimedDevice> claimed;      // Keep on vfio-pci.
  std::vector<PciAddress> return_to_host;  // Give back to the host driver.

  bool operator==(const NodeAllocations&) const = default;
};

class ExtenderApi {
 public:
  virtual ~ExtenderApi() = default;
  // PUT /v1/nodes/<node>/inventory. Returns the allocations version.
  virtual absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) = 0;
  // GET /v1/nodes/<node>/allocations?since=&wait=.
  virtual absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t since,
                                                         absl::Duration wait) = 0;
};

// {"node": ..., "devices": [...]} as rest-api.md specifies.
std::string EncodeInventory(const NodeInventory& inventory);
// The allocations answer; InvalidArgument naming the field when malformed.
absl::StatusOr<NodeAllocations> DecodeAllocations(std::string_view json);

class HttpExtenderApi : public ExtenderApi {
 public:
  // `client` is owned; its timeout must exceed the longest long-poll wait
  // (the request timeout is set per call to wait + 10 s).
  explicit HttpExtenderApi(std::unique_ptr<HttpClient> client) : client_(std::move(client)) {}

  absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) override;
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t since,
                                                 absl::Duration wait) override;

 private:
  std::unique_ptr<HttpClient> client_;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_EXTENDER_API_H_
