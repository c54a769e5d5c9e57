// ExtenderApi: what pdc-node needs from pdc-extender (docs/rest-api.md §4.1,
// §4.5, §5.1): report the inventory (also the heartbeat), learn the node's
// allocations by long-poll, and confirm a device hand-off to a VM pod
// (docs/design.md §6.4). HttpExtenderApi speaks it over the shared HTTP
// client; tests use a fake. JSON encoding and decoding are exposed for tests.
// Thread-safety: implementations are thread-safe (HttpExtenderApi
// serialises requests on its one connection).
#ifndef PDC_DRIVER_NODE_EXTENDER_API_H_
#define PDC_DRIVER_NODE_EXTENDER_API_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/types.h"
#include "model/pci_address.h"
#include "net/http_client.h"

namespace pdc::driver {

// The VM pod a claim is reserved for (`reservedFor` of a claimed entry).
struct PodReservation {
  std::string vm;
  std::string pod_name;
  std::string pod_uid;

  bool operator==(const PodReservation&) const = default;
};

struct ClaimedDevice {
  PciAddress address;
  std::string claim;  // "namespace/name"
  std::string resource_name;
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kRetain;
  bool reserved = false;  // A VM (pod) is using it right now.
  // Set when `reserved`.
  std::optional<PodReservation> reserved_for;
  // kubelet already handed the device to `reserved_for` (or nothing is
  // reserved). Reserved and not handed off: that pod waits for its devices.
  bool handed_off = true;

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
  // POST /v1/nodes/<node>/handoffs: kubelet's Allocate answered with
  // `devices` (sorted) for pod `pod_uid`. NotFound when that pod has nothing
  // pending there any more; FailedPrecondition when the devices differ from
  // its claimed ones; Unavailable when the extender cannot be reached.
  // The default says Unimplemented (fakes that do not model hand-offs).
  virtual absl::Status ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                                      std::string_view resource_name,
                                      absl::Span<const PciAddress> devices);
};

// {"node": ..., "devices": [...]} as docs/rest-api.md §4.1 specifies.
std::string EncodeInventory(const NodeInventory& inventory);
// The allocations answer; InvalidArgument naming the field when malformed.
absl::StatusOr<NodeAllocations> DecodeAllocations(std::string_view json);
// {"podUid": ..., "resourceName": ..., "devices": [...]}, as
// docs/rest-api.md §5.1 specifies.
std::string EncodeHandoff(std::string_view pod_uid, std::string_view resource_name,
                          absl::Span<const PciAddress> devices);

class HttpExtenderApi : public ExtenderApi {
 public:
  // `client` is owned; its timeout must exceed the longest long-poll wait
  // (the request timeout is set per call to wait + 10 s).
  explicit HttpExtenderApi(std::unique_ptr<HttpClient> client) : client_(std::move(client)) {}

  absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) override;
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t since,
                                                 absl::Duration wait) override;
  absl::Status ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                              std::string_view resource_name,
                              absl::Span<const PciAddress> devices) override;

 private:
  std::unique_ptr<HttpClient> client_;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_EXTENDER_API_H_
