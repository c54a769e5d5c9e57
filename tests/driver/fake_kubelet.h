// FakeKubelet: a kubelet double for the device plugin tests. No kubelet can
// run here, so this speaks kubelet's side of the real device plugin gRPC
// protocol (v1beta1) over real unix sockets in a temporary directory: it
// serves Registration on <dir>/kubelet.sock and records each RegisterRequest,
// then, like kubelet's device manager, dials <dir>/<endpoint>, asks
// GetDevicePluginOptions and keeps a ListAndWatch stream open, remembering
// the newest device list per resource. Admit() performs the device manager's
// allocation for one container: the healthy devices not in use, in the
// order the test asks for, GetPreferredAllocation when the plugin offers it
// and there is a choice, the preferred IDs that are available (else the
// first ones), then Allocate with the devices kubelet chose. Restart() does what a
// restarting kubelet does to the directory: every socket in it is removed
// and kubelet.sock is created anew. kubelet's other socket, the pod
// resources endpoint, is FakePodResources (fake_pod_resources.h, in the same
// library).
// Thread-safety: thread-safe. Test-only.
#ifndef PDC_TESTS_DRIVER_FAKE_KUBELET_H_
#define PDC_TESTS_DRIVER_FAKE_KUBELET_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "driver/deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace pdc::driver::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  absl::Status Start();
  // Stops serving, drops the plugin connections, removes every socket in the
  // directory, serves again on a new kubelet.sock.
  absl::Status Restart();
  void Stop();

  std::vector<v1beta1::RegisterRequest> registrations() const;
  // Waits until at least `n` registrations arrived.
  bool WaitForRegistrations(size_t n, absl::Duration timeout = absl::Seconds(20)) const;

  // Waits until the newest ListAndWatch list of `resource` satisfies `pred`.
  using DevicesPredicate = std::function<bool(const std::vector<v1beta1::Device>&)>;
  bool WaitForDevices(const std::string& resource, const DevicesPredicate& pred,
                      absl::Duration timeout = absl::Seconds(20)) const;
  std::vector<v1beta1::Device> devices(const std::string& resource) const;
  // Options the plugin answered GetDevicePluginOptions with.
  std::optional<v1beta1::DevicePluginOptions> options(const std::string& resource) const;

  // Direct RPCs to the registered plugin of `resource`.
  absl::StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::string& resource, const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size);
  absl::StatusOr<v1beta1::ContainerAllocateResponse> Allocate(const std::string& resource,
                                                              const std::vector<std::string>& ids);

  // One container of pod `pod` asking for `count` devices of `resource`, as
  // the device manager does it. `reverse`: offer the available devices in
  // descending order; `ignore_preferred`: choose the first ones anyway.
  struct Admission {
    std::vector<std::string> preferred;  // What the plugin preferred.
    std::vector<std::string> chosen;     // What kubelet passed to Allocate.
    absl::StatusOr<v1beta1::ContainerAllocateResponse> response;
  };
  Admission Admit(const std::string& pod, const std::string& resource, int count, bool reverse,
                  bool ignore_preferred = false);
  // The pod ended: its devices are free again for kubelet.
  void Release(const std::string& pod);

 private:
  class RegistrationService;
  struct Endpoint {
    std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
    std::unique_ptr<grpc::ClientContext> stream_context;
    std::thread reader;
  };
  void OnRegister(const v1beta1::RegisterRequest& request);
  void Connect(const v1beta1::RegisterRequest& request);
  void ConnectLoop();
  absl::Status Serve();
  void Shutdown();
  v1beta1::DevicePlugin::Stub* StubFor(const std::string& resource);

  const std::string dir_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  std::vector<v1beta1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::deque<v1beta1::RegisterRequest> to_connect_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::vector<v1beta1::Device>> devices_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1beta1::DevicePluginOptions> options_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> in_use_ ABSL_GUARDED_BY(mu_);  // pod -> ids
  // Endpoints are touched by the connect thread and by Shutdown only.
  absl::Mutex endpoints_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(endpoints_mu_);
  std::thread connect_thread_;
  absl::Mutex admit_mu_;  // kubelet admits one pod at a time.
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_KUBELET_H_
