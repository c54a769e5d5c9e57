// ExtenderApi: what pdc-node needs from pdc-extender (docs/rest-api.md §4.1,
// §4.5, §5.1): report the inventory (also the heartbeat), learn the node's
// allocations by long-poll, and confirm a device hand-off to a VM pod
// (docs/design.md §6.4). HttpExtenderApi speaks it through PdcClient (the
// api/ codecs); tests use a fake.
// Thread-safety: implementations are thread-safe (HttpExtenderApi
// serialises requests on its one connection).
#ifndef PDC_DRIVER_NODE_EXTENDER_API_H_
#define PDC_DRIVER_NODE_EXTENDER_API_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/allocations.h"
#include "model/pci_address.h"
#include "model/types.h"
#include "net/http_client.h"
#include "net/pdc_client.h"

namespace pdc::driver {

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

class HttpExtenderApi : public ExtenderApi {
 public:
  // `client` is owned; the long-poll's request timeout is set per call to
  // wait + 10 s.
  explicit HttpExtenderApi(std::unique_ptr<HttpClient> client) : client_(std::move(client)) {}

  absl::StatusOr<uint64_t> PutInventory(const NodeInventory& inventory) override;
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view node, uint64_t since,
                                                 absl::Duration wait) override;
  absl::Status ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                              std::string_view resource_name,
                              absl::Span<const PciAddress> devices) override;

 private:
  PdcClient client_;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_EXTENDER_API_H_
