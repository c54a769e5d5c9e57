// GET /v1/dra/claims (docs/rest-api.md §3.7): the resource.k8s.io
// ResourceClaims pdc-extender's DRA claim keeper follows, each with its
// allocated devices matched to pdc's inventory, the VirtualMachine it is
// kept for and whether that is persisted in its status.reservedFor. The
// REST codecs' conventions: api/rest_json.h.
// Thread-safety: pure functions.
#ifndef PDC_API_DRA_CLAIMS_JSON_H_
#define PDC_API_DRA_CLAIMS_JSON_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/types.h"

namespace pdc::api {

// One device of a claim's allocation (status.allocation.devices.results[]).
struct DraClaimDevice {
  std::string request;
  std::string driver;
  std::string pool;    // pdc-node's pools are named after their node.
  std::string device;  // The device name in the ResourceSlice.
  // From pdc's inventory of node `pool`, when a device there has the
  // serial `device` is named from; "" and none otherwise.
  std::string serial;
  std::optional<PciAddress> address;

  bool operator==(const DraClaimDevice&) const = default;
};

// A pod or VirtualMachine: name and UID.
struct DraConsumerRef {
  std::string name;
  std::string uid;

  bool operator==(const DraConsumerRef&) const = default;
};

struct DraClaimView {
  std::string ns;
  std::string name;
  std::string uid;
  bool allocated = false;
  std::vector<DraClaimDevice> devices;
  std::optional<DraConsumerRef> vm;  // The VM it is kept for; none.
  bool persisted = false;            // `vm` is in status.reservedFor.
  std::vector<DraConsumerRef> pods;  // The pod entries of status.reservedFor.

  bool operator==(const DraClaimView&) const = default;
};

// {"keeper": bool, "synced": bool, "note": string (may be absent),
//  "items": [{"namespace", "name", "uid", "allocated", "devices": [{"request",
//  "driver", "pool", "device", "serial", "address" (or null)}], "vm": {"name",
//  "uid"} or null, "persisted", "pods": [{"name", "uid"}]}]}
struct DraClaimList {
  bool keeper = false;  // extender.dra.keeper.enabled on this replica.
  bool synced = false;  // Its watches listed; it reconciles.
  std::string note;     // Why the list is empty or partial; "" none.
  std::vector<DraClaimView> items;

  bool operator==(const DraClaimList&) const = default;
};

std::string WriteDraClaimList(const DraClaimList& list);
// Errors name the field ("items[2].devices[0].address").
absl::StatusOr<DraClaimList> ParseDraClaimList(std::string_view body);

}  // namespace pdc::api

#endif  // PDC_API_DRA_CLAIMS_JSON_H_
