// NodeHoldsObjects: the holds of each node (devices to return to their
// host driver, devices Released by a deleted Retain claim) as KubeApiStore
// records them, a ConfigMap per node in pdc-extender's namespace,
// `pdc-holds-<hash of the node name>` (HoldsConfigMapName). Written with the
// ConfigMap's UID and resourceVersion; one changed under us is read again
// and the write repeated, one gone is created again.
// Thread-safety: none; KubeApiStore's one writer (its write_mu_) calls it.
#ifndef PDC_EXTENDER_NODE_HOLDS_OBJECTS_H_
#define PDC_EXTENDER_NODE_HOLDS_OBJECTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "extender/kube_store_calls.h"
#include "model/types.h"

namespace pdc::extender {

// The name of the ConfigMap holding `node`'s holds.
std::string HoldsConfigMapName(std::string_view node);

struct NodeHolds {
  std::vector<PciAddress> return_to_host;
  std::vector<ReleasedDevice> released;
  bool operator==(const NodeHolds&) const = default;
  bool empty() const { return return_to_host.empty() && released.empty(); }
};

class NodeHoldsObjects {
 public:
  // `calls` must outlive this.
  NodeHoldsObjects(const StoreCalls* calls, std::string ns) : calls_(calls), ns_(std::move(ns)) {}

  // Lists pdc's holds ConfigMaps into `out` (by node) and remembers them.
  // One pdc cannot read, or one named for another node, is DataLoss: holds
  // keep devices from other claims.
  absl::Status List(absl::flat_hash_map<std::string, NodeHolds>* out);
  // The holds of `node` as the API has them (as last written or listed).
  NodeHolds Persisted(const std::string& node) const;
  // Makes the API hold `holds` for `node` (deletes its ConfigMap when empty).
  absl::Status Write(const std::string& node, const NodeHolds& holds);

  // Of `devices`, those `holds` return to their host driver.
  static std::vector<PciAddress> Returning(const std::vector<PciAddress>& devices,
                                           const NodeHolds& holds);

 private:
  struct HoldsObject {
    std::string uid;
    std::string resource_version;
    NodeHolds holds;
  };

  const StoreCalls* const calls_;
  const std::string ns_;
  absl::flat_hash_map<std::string, HoldsObject> holds_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_NODE_HOLDS_OBJECTS_H_
