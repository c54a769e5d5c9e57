#include "driver/deviceplugin/pod_resources_client.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "driver/deviceplugin/podresources/v1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace pdc::driver::deviceplugin {

absl::StatusOr<std::vector<PodDevices>> PodResourcesClient::List(
    const std::set<std::string>& resources) const {
  struct stat st;
  if (::stat(socket_path_.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat("kubelet's pod resources socket ", socket_path_,
                                            " does not exist"));
  }
  auto channel = grpc::CreateChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  // gRPC deadlines are wall-clock instants.
  context.set_deadline(absl::ToChronoTime(RealClock()->Deadline(timeout_)));
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  grpc::Status s = stub->List(&context, request, &response);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("listing pod resources at ", socket_path_, ": ",
                                               s.error_message(), " (gRPC code ",
                                               static_cast<int>(s.error_code()), ")"));
  }
  // (namespace, name, resource) -> device IDs of all the pod's containers.
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>> held;
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        if (!resources.contains(d.resource_name())) continue;
        auto& ids = held[{pod.namespace_(), pod.name(), d.resource_name()}];
        ids.insert(d.device_ids().begin(), d.device_ids().end());
      }
    }
  }
  std::vector<PodDevices> out;
  for (const auto& [key, ids] : held) {
    out.push_back(PodDevices{std::get<0>(key), std::get<1>(key), std::get<2>(key),
                             std::vector<std::string>(ids.begin(), ids.end())});
  }
  return out;
}

}  // namespace pdc::driver::deviceplugin
