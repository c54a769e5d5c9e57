#include "driver/deviceplugin/kubelet_registrar.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/strings.h"
#include "driver/deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::deviceplugin {
namespace {

// Inode of a socket file, 0 when it does not exist.
ino_t InodeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_ino;
}

}  // namespace

PluginEndpoint::PluginEndpoint(ResourcePlugin* plugin, EndpointOptions options)
    : plugin_(plugin), options_(std::move(options)) {}

PluginEndpoint::~PluginEndpoint() { Stop(); }

std::string PluginEndpoint::socket_path() const {
  return absl::StrCat(options_.plugin_dir, "/", PluginSocketName(plugin_->resource_name()));
}

std::string PluginEndpoint::kubelet_socket_path() const {
  return absl::StrCat(options_.plugin_dir, "/", Sv(kKubeletSocketName));
}

absl::Status PluginEndpoint::StartServer() {
  const std::string path = socket_path();
  struct stat st;
  if (::stat(options_.plugin_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    // Checked here so that gRPC does not log a failed bind every interval.
    return absl::FailedPreconditionError(
        absl::StrCat("device plugin directory ", options_.plugin_dir, " does not exist (yet)"));
  }
  // A socket file left by an earlier pdc-node would make bind() fail.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the old socket ", path, ": ", std::strerror(errno)));
  }
  service_ = plugin_->NewService();
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) {
    server_.reset();
    service_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve the device plugin for ", plugin_->resource_name(), " on ",
                     path, " (is the directory there and writable?)"));
  }
  socket_inode_ = InodeOf(path);
  registered_ = false;
  ++server_starts_;
  spdlog::info("device plugin for {} serving on {}", plugin_->resource_name(), path);
  return absl::OkStatus();
}

void PluginEndpoint::StopServer() {
  if (server_ == nullptr) return;
  service_->Stop();  // ListAndWatch streams return now.
  server_->Shutdown(absl::ToChronoTime(RealClock()->Deadline(absl::Seconds(2))));
  server_->Wait();
  server_.reset();
  service_.reset();
  // Only our own socket: kubelet may have put someone else's file there.
  if (socket_inode_ != 0 && InodeOf(socket_path()) == socket_inode_) {
    ::unlink(socket_path().c_str());
  }
  socket_inode_ = 0;
  registered_ = false;
}

void PluginEndpoint::Stop() { StopServer(); }

absl::Status PluginEndpoint::Register() {
  const std::string kubelet = kubelet_socket_path();
  const ino_t kubelet_inode = InodeOf(kubelet);
  if (kubelet_inode == 0) {
    return absl::UnavailableError(
        absl::StrCat("kubelet's registration socket ", kubelet, " does not exist (yet)"));
  }
  auto channel = grpc::CreateChannel("unix:" + kubelet, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(std::string(kApiVersion));
  request.set_endpoint(PluginSocketName(plugin_->resource_name()));
  request.set_resource_name(plugin_->resource_name());
  *request.mutable_options() = PluginOptions();
  grpc::ClientContext context;
  // gRPC deadlines are wall-clock instants.
  context.set_deadline(absl::ToChronoTime(RealClock()->Deadline(options_.register_timeout)));
  context.set_wait_for_ready(true);  // kubelet may be just starting.
  v1beta1::Empty response;
  grpc::Status s = stub->Register(&context, request, &response);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("registering ", plugin_->resource_name(),
                                               " with kubelet at ", kubelet, ": ",
                                               s.error_message()));
  }
  registered_ = true;
  registered_kubelet_inode_ = kubelet_inode;
  if (options_.metrics) options_.metrics->plugin_registrations->Increment();
  {
    absl::MutexLock lock(&registrations_mu_);
    ++registrations_;
  }
  spdlog::info("device plugin for {} registered with kubelet as {}", plugin_->resource_name(),
               request.endpoint());
  return absl::OkStatus();
}

uint64_t PluginEndpoint::registrations() const {
  absl::MutexLock lock(&registrations_mu_);
  return registrations_;
}

bool PluginEndpoint::WaitForRegistrations(uint64_t n, absl::Duration timeout) const {
  absl::MutexLock lock(&registrations_mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registrations_mu_) {
    return registrations_ >= n;
  };
  return registrations_mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

absl::Status PluginEndpoint::Ensure() {
  const ino_t own = InodeOf(socket_path());
  if (server_ == nullptr || own != socket_inode_) {
    if (server_ != nullptr) {
      spdlog::info("socket {} was removed (kubelet restarted?): serving and registering again",
                   socket_path());
    }
    StopServer();
    if (absl::Status s = StartServer(); !s.ok()) return s;
  }
  const ino_t kubelet = InodeOf(kubelet_socket_path());
  if (registered_ && kubelet == registered_kubelet_inode_) return absl::OkStatus();
  if (registered_) {
    spdlog::info("kubelet's socket {} was recreated: registering {} again", kubelet_socket_path(),
                 plugin_->resource_name());
  }
  registered_ = false;
  return Register();
}

}  // namespace pdc::driver::deviceplugin
