#include "driver/dra/dra_service.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::dra {

namespace drabeta = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

drapb::NodePrepareResourcesResponse PrepareClaims(ClaimPreparer& preparer,
                                                  const drapb::NodePrepareResourcesRequest& req) {
  drapb::NodePrepareResourcesResponse response;
  for (const drapb::Claim& claim : req.claims()) {
    drapb::NodePrepareResourceResponse& out = (*response.mutable_claims())[claim.uid()];
    absl::StatusOr<std::vector<PreparedDeviceAnswer>> devices =
        preparer.Prepare(claim.namespace_(), claim.name(), claim.uid());
    if (!devices.ok()) {
      spdlog::warn("DRA {}: prepare failed: {}", preparer.options().driver_name,
                   std::string(devices.status().message()));
      out.set_error(std::string(devices.status().message()));
      continue;
    }
    for (const PreparedDeviceAnswer& d : *devices) {
      drapb::Device* device = out.add_devices();
      device->add_request_names(d.request);
      device->set_pool_name(d.pool);
      device->set_device_name(d.device);
      device->add_cdi_device_ids(d.cdi_device_id);
    }
    spdlog::info("DRA {}: prepared claim {}/{} ({}), {} device(s)", preparer.options().driver_name,
                 claim.namespace_(), claim.name(), claim.uid(), devices->size());
  }
  return response;
}

drapb::NodeUnprepareResourcesResponse UnprepareClaims(
    ClaimPreparer& preparer, const drapb::NodeUnprepareResourcesRequest& req) {
  drapb::NodeUnprepareResourcesResponse response;
  for (const drapb::Claim& claim : req.claims()) {
    drapb::NodeUnprepareResourceResponse& out = (*response.mutable_claims())[claim.uid()];
    absl::Status s = preparer.Unprepare(claim.namespace_(), claim.name(), claim.uid());
    if (!s.ok()) {
      spdlog::warn("DRA {}: unprepare failed: {}", preparer.options().driver_name,
                   std::string(s.message()));
      out.set_error(std::string(s.message()));
    }
  }
  return response;
}

// One service class for both API versions: v1beta1's messages are v1's field
// for field, only the gRPC service name differs.
template <typename Service>
class DraService : public Service {
 public:
  explicit DraService(ClaimPreparer* p) : p_(p) {}
  grpc::Status NodePrepareResources(
      grpc::ServerContext*, const drapb::NodePrepareResourcesRequest* req,
      drapb::NodePrepareResourcesResponse* resp) override {
    *resp = PrepareClaims(*p_, *req);
    return grpc::Status::OK;
  }
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext*, const drapb::NodeUnprepareResourcesRequest* req,
      drapb::NodeUnprepareResourcesResponse* resp) override {
    *resp = UnprepareClaims(*p_, *req);
    return grpc::Status::OK;
  }

 private:
  ClaimPreparer* const p_;
};

class DraServer::V1 : public DraService<drapb::DRAPlugin::Service> {
  using DraService::DraService;
};
class DraServer::V1beta1 : public DraService<drabeta::DRAPlugin::Service> {
  using DraService::DraService;
};

DraServer::DraServer(ClaimPreparer* preparer, std::string socket_path)
    : preparer_(preparer), socket_path_(std::move(socket_path)) {}

DraServer::~DraServer() { Stop(); }

absl::Status DraServer::Start() {
  if (server_ != nullptr) return absl::OkStatus();
  const size_t slash = socket_path_.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status s = MakeDirectories(socket_path_.substr(0, slash));
    if (!s.ok()) return s;
  }
  ::unlink(socket_path_.c_str());  // A previous pdc-node's socket.
  v1_ = std::make_unique<V1>(preparer_);
  v1beta1_ = std::make_unique<V1beta1>(preparer_);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(v1_.get());
  builder.RegisterService(v1beta1_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot serve the DRA service of ",
                                               preparer_->options().driver_name, " on ",
                                               socket_path_));
  }
  spdlog::info("DRA {}: serving on {}", preparer_->options().driver_name, socket_path_);
  return absl::OkStatus();
}

void DraServer::Stop() {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(RealClock()->Deadline(absl::Seconds(2))));
  server_->Wait();
  server_.reset();
  ::unlink(socket_path_.c_str());
}

}  // namespace pdc::driver::dra
