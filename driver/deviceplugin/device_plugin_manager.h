// DevicePluginManager: pdc-node as the kubelet device plugin for every
// managed resource name (docs/design.md §6.3). One ResourcePlugin and one
// PluginEndpoint per resource name of the configured device classes; one
// HandoffBook and HandoffConfirmer shared by them, and the HandoffRecovery
// that confirms at start what a restart left unconfirmed (with the hand-off
// journal in `confirmer.journal`, which Start marks answered in the book
// and confirms again). The reconcile loop feeds
// it (OnInventory, OnAllocations); a watcher thread keeps every endpoint
// served and registered, also across kubelet restarts.
// Thread-safety: Start/Stop from one thread; On* from the reconcile loop;
// accessors from any thread.
#ifndef PDC_DRIVER_DEVICEPLUGIN_DEVICE_PLUGIN_MANAGER_H_
#define PDC_DRIVER_DEVICEPLUGIN_DEVICE_PLUGIN_MANAGER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "model/types.h"
#include "common/clock.h"
#include "driver/deviceplugin/handoff_book.h"
#include "driver/deviceplugin/handoff_confirmer.h"
#include "driver/deviceplugin/handoff_recovery.h"
#include "driver/deviceplugin/kubelet_registrar.h"
#include "driver/deviceplugin/names.h"
#include "driver/deviceplugin/resource_plugin.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"
#include "driver/sysfs.h"

namespace pdc::driver::deviceplugin {

struct DevicePluginManagerOptions {
  std::string node;
  std::string plugin_dir{kDefaultPluginDir};
  std::vector<DeviceClass> classes;
  // How often the endpoints are checked (kubelet restarted? registration
  // failed earlier?).
  absl::Duration watch_interval = absl::Seconds(1);
  absl::Duration register_timeout = absl::Seconds(5);
  absl::Duration vfio_wait = absl::Seconds(10);
  absl::Duration vfio_poll = absl::Milliseconds(200);
  ConfirmerOptions confirmer;
  RecoveryOptions recovery;
  NodeMetrics* metrics = nullptr;  // Optional; must outlive the manager.
};

class DevicePluginManager {
 public:
  // Pointers must outlive the manager. `api` should have a connection of its
  // own: the reconcile loop's long-poll must not delay kubelet's Allocate.
  DevicePluginManager(Sysfs* sys, ExtenderApi* api, const Clock* clock,
                      DevicePluginManagerOptions options);
  ~DevicePluginManager();

  // Starts serving and registering; failures (no plugin directory or
  // kubelet yet) are logged and retried by the watcher. Always OK today.
  absl::Status Start();
  void Stop();

  void OnInventory(const NodeInventory& inventory);
  void OnAllocations(const NodeAllocations& allocations);

  // Checks every endpoint once now (the watcher does this every interval).
  absl::Status CheckEndpoints();

  std::vector<std::string> resource_names() const;  // Sorted.
  ResourcePlugin* plugin(const std::string& resource_name) const;
  PluginEndpoint* endpoint(const std::string& resource_name) const;
  HandoffBook& book() { return book_; }
  HandoffConfirmer& confirmer() { return confirmer_; }
  HandoffRecovery& recovery() { return *recovery_; }

 private:
  void Watch();

  Sysfs* const sys_;
  const DevicePluginManagerOptions options_;
  HandoffBook book_;
  HandoffConfirmer confirmer_;
  std::unique_ptr<HandoffRecovery> recovery_;
  std::map<std::string, std::unique_ptr<ResourcePlugin>> plugins_;
  std::map<std::string, std::unique_ptr<PluginEndpoint>> endpoints_;
  absl::Mutex endpoints_mu_;  // Ensure/Stop one at a time.
  std::map<std::string, std::string> last_error_;  // Watcher thread only.
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_DEVICE_PLUGIN_MANAGER_H_
