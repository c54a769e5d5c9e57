#include "tests/driver/fake_pod_resources.h"

#include <utility>

namespace pdc::driver::testing {

class FakePodResources::Service final : public v1::PodResourcesLister::Service {
 public:
  explicit Service(FakePodResources* owner) : owner_(owner) {}
  grpc::Status List(grpc::ServerContext* context, const v1::ListPodResourcesRequest* request,
                    v1::ListPodResourcesResponse* response) override {
    return owner_->List(response);
  }

 private:
  FakePodResources* const owner_;
};

FakePodResources::FakePodResources(std::string socket_path)
    : socket_path_(std::move(socket_path)), service_(std::make_unique<Service>(this)) {}

FakePodResources::~FakePodResources() { Stop(); }

absl::Status FakePodResources::Start() {
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) return absl::UnavailableError("cannot serve " + socket_path_);
  return absl::OkStatus();
}

void FakePodResources::Stop() {
  if (server_ != nullptr) server_->Shutdown();
  server_.reset();
}

void FakePodResources::AddPod(const std::string& ns, const std::string& name,
                              const std::string& container, const std::string& resource,
                              const std::vector<std::string>& ids) {
  absl::MutexLock lock(&mu_);
  v1::PodResources* pod = pods_.add_pod_resources();
  pod->set_namespace_(ns);
  pod->set_name(name);
  v1::ContainerResources* c = pod->add_containers();
  c->set_name(container);
  v1::ContainerDevices* d = c->add_devices();
  d->set_resource_name(resource);
  for (const std::string& id : ids) d->add_device_ids(id);
}

void FakePodResources::Fail(int calls) {
  absl::MutexLock lock(&mu_);
  failing_ = calls;
}

int FakePodResources::lists() const {
  absl::MutexLock lock(&mu_);
  return lists_;
}

grpc::Status FakePodResources::List(v1::ListPodResourcesResponse* response) {
  absl::MutexLock lock(&mu_);
  ++lists_;
  if (failing_ > 0) {
    --failing_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is starting");
  }
  *response = pods_;
  return grpc::Status::OK;
}

}  // namespace pdc::driver::testing
