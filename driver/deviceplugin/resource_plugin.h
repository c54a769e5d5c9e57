// ResourcePlugin: pdc-node's kubelet device plugin for one managed resource
// name (e.g. devices.kubevirt.io/nvme). It advertises every device of the
// resource on this node (kubelet's capacity: kube-scheduler counts them), and
// answers kubelet for the one VM pod pdc says is waiting for its devices
// (HandoffBook), whatever device IDs kubelet chose:
//   GetPreferredAllocation  the pending pod's claimed devices
//   Allocate                env PCI_RESOURCE_<NAME>=<addresses> and the
//                           /dev/vfio device nodes of those devices, or a
//                           refusal that says why (nobody waiting, more than
//                           one waiting, count mismatch, device not on
//                           vfio-pci or unhealthy). Never another VM's device.
// Before answering, the hand-off is marked done locally and journaled
// (fsynced, so a restart confirms it again); it is confirmed to
// pdc-extender in the background (HandoffConfirmer).
// The gRPC side lives in Service() objects, one per server generation (a
// server restarts when kubelet does); the state is here.
// Thread-safety: thread-safe; gRPC calls arrive on gRPC's threads,
// SetDevices from the reconcile loop.
#ifndef PDC_DRIVER_DEVICEPLUGIN_RESOURCE_PLUGIN_H_
#define PDC_DRIVER_DEVICEPLUGIN_RESOURCE_PLUGIN_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/types.h"
#include "common/clock.h"
#include "driver/deviceplugin/handoff_book.h"
#include "driver/deviceplugin/handoff_confirmer.h"
#include "driver/deviceplugin/v1beta1/api.grpc.pb.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"
#include "driver/sysfs.h"

namespace pdc::driver::deviceplugin {

struct ResourcePluginOptions {
  std::string resource_name;
  // How long Allocate waits for a claimed device to reach vfio-pci (the
  // reconcile loop binds it) before refusing, and how often it looks.
  absl::Duration vfio_wait = absl::Seconds(10);
  absl::Duration vfio_poll = absl::Milliseconds(200);
  // Looks and sleeps between looks run on the plugin's Clock.
  NodeMetrics* metrics = nullptr;  // Optional.
};

// The Allocate answer for one pod, before it is put in gRPC form.
struct Handoff {
  PendingPod pod;
  std::vector<int32_t> iommu_groups;  // Distinct, sorted.
};

class ResourcePlugin {
 public:
  // Pointers must outlive the plugin. `api` is used for one synchronous
  // allocations refresh when nothing is pending in the book.
  ResourcePlugin(Sysfs* sys, ExtenderApi* api, HandoffBook* book, HandoffConfirmer* confirmer,
                 const Clock* clock, ResourcePluginOptions options);

  const std::string& resource_name() const { return options_.resource_name; }

  // The devices of this resource on the node (from discovery). Streams an
  // update to every ListAndWatch when the set or a health changed.
  void SetDevices(std::vector<Device> devices);

  // The gRPC service for one server generation. Stop() ends its open
  // ListAndWatch streams (before the server is shut down).
  class Service;
  std::unique_ptr<Service> NewService();

  // The logic behind the RPCs, without gRPC types (also for tests).
  absl::StatusOr<std::vector<std::string>> Preferred(const std::vector<std::string>& available,
                                                     const std::vector<std::string>& must_include,
                                                     int size);
  absl::StatusOr<Handoff> Allocate(const std::vector<std::string>& kubelet_ids);

 private:
  friend class Service;
  absl::StatusOr<PendingPod> PendingOrRefresh();
  // Allocate without the outcome count; `outcome` names a refusal.
  absl::StatusOr<Handoff> AllocateLocked(const std::vector<std::string>& kubelet_ids,
                                         const char** outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(allocate_mu_);
  absl::Status DeviceReady(PciAddress address, int32_t* group);
  absl::Status WaitReady(const PendingPod& pod, std::vector<int32_t>* groups);
  // Waits until the device list changed from `*seen` or `*stopped`, up
  // to `timeout`; fills `out` when it changed.
  bool WaitForDevices(uint64_t* seen, const std::atomic<bool>* stopped, absl::Duration timeout,
                      v1beta1::ListAndWatchResponse* out);
  void Poke();

  Sysfs* const sys_;
  ExtenderApi* const api_;
  HandoffBook* const book_;
  HandoffConfirmer* const confirmer_;
  const Clock* const clock_;
  const ResourcePluginOptions options_;

  absl::Mutex allocate_mu_;  // One hand-off at a time for this resource.
  mutable absl::Mutex mu_;
  std::map<PciAddress, Device> devices_ ABSL_GUARDED_BY(mu_);
  uint64_t devices_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pokes_ ABSL_GUARDED_BY(mu_) = 0;
};

class ResourcePlugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(ResourcePlugin* plugin) : plugin_(plugin) {}
  void Stop();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* context,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* context,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  ResourcePlugin* const plugin_;
  std::atomic<bool> stopped_{false};
};

// The options pdc registers with: GetPreferredAllocation available, no
// PreStartContainer.
v1beta1::DevicePluginOptions PluginOptions();

}  // namespace pdc::driver::deviceplugin

#endif  // PDC_DRIVER_DEVICEPLUGIN_RESOURCE_PLUGIN_H_
