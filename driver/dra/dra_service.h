// DraService: kubelet's DRAPlugin gRPC service (k8s.io.kubelet.pkg.apis.dra
// v1, and v1beta1 for kubelet 1.32/1.33) over a ClaimPreparer, served on a
// unix socket by DraServer. Each claim of a request gets its own answer,
// keyed by UID as kubelet requires (pkg/kubelet/cm/dra/manager.go reads the
// response per claim UID and fails a claim that has no entry): a claim that
// fails carries its error and never fails the others; the RPC itself fails
// only on a malformed request.
// Thread-safety: thread-safe (gRPC calls it from its threads).
#ifndef PDC_DRIVER_DRA_DRA_SERVICE_H_
#define PDC_DRIVER_DRA_DRA_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "driver/dra/claim_preparer.h"
#include "driver/dra/v1/api.grpc.pb.h"
#include "driver/dra/v1beta1/api.grpc.pb.h"
#include "grpcpp/server.h"

namespace pdc::driver::dra {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

// The answers, apart from gRPC (tests call these directly too).
drapb::NodePrepareResourcesResponse PrepareClaims(ClaimPreparer& preparer,
                                                  const drapb::NodePrepareResourcesRequest& req);
drapb::NodeUnprepareResourcesResponse UnprepareClaims(
    ClaimPreparer& preparer, const drapb::NodeUnprepareResourcesRequest& req);

// Serves v1.DRAPlugin and v1beta1.DRAPlugin on one unix socket.
class DraServer {
 public:
  // `preparer` must outlive the server.
  DraServer(ClaimPreparer* preparer, std::string socket_path);
  ~DraServer();

  // Creates the socket's directory, removes a stale socket and serves.
  absl::Status Start();
  void Stop();
  const std::string& socket_path() const { return socket_path_; }

 private:
  class V1;
  class V1beta1;
  ClaimPreparer* const preparer_;
  const std::string socket_path_;
  std::unique_ptr<V1> v1_;
  std::unique_ptr<V1beta1> v1beta1_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_DRA_SERVICE_H_
