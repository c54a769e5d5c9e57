// FakePodResources: kubelet's pod resources endpoint for the hand-off
// recovery tests. No kubelet can run here, so this serves the real gRPC
// service v1.PodResourcesLister (driver/deviceplugin/podresources/v1/
// api.proto, kubelet's k8s.io/kubelet/pkg/apis/podresources/v1/api.proto)
// on a real unix socket, answering List the way kubelet's v1 server does
// (kubernetes/kubernetes pkg/kubelet/apis/podresources/server_v1.go): every
// active pod with, per container, the device IDs of each resource name it
// was allocated. Fail(n) answers the next n calls UNAVAILABLE.
// Thread-safety: thread-safe. Test-only.
#ifndef PDC_TESTS_DRIVER_FAKE_POD_RESOURCES_H_
#define PDC_TESTS_DRIVER_FAKE_POD_RESOURCES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "driver/deviceplugin/podresources/v1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace pdc::driver::testing {

class FakePodResources {
 public:
  explicit FakePodResources(std::string socket_path);
  ~FakePodResources();

  absl::Status Start();
  void Stop();

  // A pod whose container `container` holds `ids` of `resource`.
  void AddPod(const std::string& ns, const std::string& name, const std::string& container,
              const std::string& resource, const std::vector<std::string>& ids);
  void Fail(int calls);
  int lists() const;

 private:
  class Service;
  grpc::Status List(v1::ListPodResourcesResponse* response);

  const std::string socket_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  v1::ListPodResourcesResponse pods_ ABSL_GUARDED_BY(mu_);
  int failing_ ABSL_GUARDED_BY(mu_) = 0;
  int lists_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_POD_RESOURCES_H_
