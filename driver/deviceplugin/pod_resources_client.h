// PodResourcesClient: kubelet's pod resources API (List of
// podresources/v1/api.proto on <kubelet root>/pod-resources/kubelet.sock)
// as pdc-node reads it: which pod holds which device IDs of a resource
// name. kubelet fills it from its device manager's checkpoint, so it
// survives pdc-node restarts, unlike anything pdc-node keeps in memory.
// Thread-safety: thread-safe (one call at a time is enough for its user).
#ifndef PDC_DRIVER_DEVICEPLUGIN_POD_RESOURCES_CLIENT_H_
#define PDC_DRIVER_DEVICEPLUGIN_POD_RESOURCES_CLIENT_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pdc::driver::deviceplugin {

inline constexpr char kDefaultPodResourcesSocket[] =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

// The device IDs of one resource name a pod's containers hold, together.
struct PodDevices {
  std::string ns;
  std::string name;
  std::string resource_name;
  std::vector<std::string> device_ids;  // Sorted, distinct.

  bool operator==(const PodDevices&) const = default;
};

class PodResourcesClient {
 public:
  PodResourcesClient(std::string socket_path, absl::Duration timeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {}

  const std::string& socket_path() const { return socket_path_; }

  // kubelet's List, keeping the entries of `resources`, sorted by
  // namespace, name, resource name.
  //   NotFound     the socket does not exist (an older kubelet, or the
  //                endpoint is off): asking again will not help
  //   Unavailable  kubelet did not answer within the timeout, or failed
  absl::StatusOr<std::vector<PodDevices>> List(const std::set<std::string>& resources) const;

 private:
  const std::string socket_path_;
  const absl::Duration timeout_;
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_POD_RESOURCES_CLIENT_H_
