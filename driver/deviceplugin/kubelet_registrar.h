// PluginEndpoint: serves one ResourcePlugin on its unix socket in kubelet's
// device plugin directory (<dir>/pdc-<resource>.sock) and registers it with
// kubelet through <dir>/kubelet.sock (Register: version v1beta1, endpoint =
// the socket's base name, the resource name, GetPreferredAllocation
// available). kubelet restarts by removing every plugin socket and creating
// kubelet.sock anew; Ensure() notices either (the socket's inode changed or
// vanished) and restarts the server and registers again. The manager calls
// Ensure() periodically.
// Thread-safety: Ensure/Stop from one thread at a time (the manager's
// watcher); counters from any.
#ifndef PDC_DRIVER_DEVICEPLUGIN_KUBELET_REGISTRAR_H_
#define PDC_DRIVER_DEVICEPLUGIN_KUBELET_REGISTRAR_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "driver/deviceplugin/names.h"
#include "driver/deviceplugin/resource_plugin.h"
#include "driver/node_metrics.h"
#include "grpcpp/server.h"

namespace pdc::driver::deviceplugin {

struct EndpointOptions {
  std::string plugin_dir{kDefaultPluginDir};
  absl::Duration register_timeout = absl::Seconds(5);
  NodeMetrics* metrics = nullptr;
};

class PluginEndpoint {
 public:
  // `plugin` must outlive the endpoint.
  PluginEndpoint(ResourcePlugin* plugin, EndpointOptions options);
  ~PluginEndpoint();

  // Serving and registered with the kubelet behind the current kubelet.sock
  // afterwards, or an error saying what is missing (retried next time).
  absl::Status Ensure();
  // Ends open streams, stops the server, removes the socket.
  void Stop();

  std::string socket_path() const;
  std::string kubelet_socket_path() const;
  uint64_t registrations() const;
  // Waits until at least `n` registrations succeeded; false on timeout.
  bool WaitForRegistrations(uint64_t n, absl::Duration timeout) const;
  uint64_t server_starts() const { return server_starts_.load(); }

 private:
  absl::Status StartServer();
  void StopServer();
  absl::Status Register();

  ResourcePlugin* const plugin_;
  const EndpointOptions options_;
  std::unique_ptr<ResourcePlugin::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  ino_t socket_inode_ = 0;
  bool registered_ = false;
  ino_t registered_kubelet_inode_ = 0;
  mutable absl::Mutex registrations_mu_;
  uint64_t registrations_ ABSL_GUARDED_BY(registrations_mu_) = 0;
  std::atomic<uint64_t> server_starts_{0};
};

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_KUBELET_REGISTRAR_H_
