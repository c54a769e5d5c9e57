#include "driver/dra/registrar.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "driver/dra/names.h"
#include "driver/dra/pluginregistration/v1/api.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::dra {

namespace {

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace

class Registrar::Service : public pluginregistration::Registration::Service {
 public:
  explicit Service(Registrar* r) : r_(r) {}
  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* info) override {
    info->set_type(std::string(kDraPluginType));
    info->set_name(r_->options_.driver_name);
    info->set_endpoint(r_->options_.service_endpoint);
    for (const std::string& s : r_->options_.supported_services) info->add_supported_versions(s);
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*,
                                        const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    r_->OnStatus(status->plugin_registered(), status->error());
    return grpc::Status::OK;
  }

 private:
  Registrar* const r_;
};

Registrar::Registrar(RegistrarOptions options)
    : options_([&] {
        RegistrarOptions o = std::move(options);
        if (o.supported_services.empty()) {
          o.supported_services = {std::string(kServiceV1), std::string(kServiceV1beta1)};
        }
        return o;
      }()) {}

Registrar::~Registrar() { Stop(); }

std::string Registrar::socket_path() const {
  return RegistrationSocketPath(options_.registry_dir, options_.driver_name);
}

void Registrar::OnStatus(bool registered, const std::string& error) {
  absl::MutexLock lock(&mu_);
  if (registered) {
    ++accepted_;
    spdlog::info("DRA {}: kubelet registered the driver (service {})", options_.driver_name,
                 options_.service_endpoint);
    return;
  }
  ++refused_;
  last_error_ = error;
  serve_anew_ = true;
  spdlog::error("DRA {}: kubelet refused the registration: {}; registering again",
                options_.driver_name, error);
}

absl::Status Registrar::Ensure() {
  bool anew = false;
  {
    absl::MutexLock lock(&mu_);
    anew = serve_anew_;
    serve_anew_ = false;
  }
  if (server_ != nullptr && !anew && InodeOf(socket_path()) == socket_inode_) {
    return absl::OkStatus();
  }
  StopServer();
  absl::Status s = MakeDirectories(options_.registry_dir);
  if (!s.ok()) return s;
  const std::string path = socket_path();
  ::unlink(path.c_str());  // A previous pdc-node's socket.
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound == 0) {
    server_.reset();
    service_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve the DRA registration of ", options_.driver_name, " on ", path));
  }
  socket_inode_ = InodeOf(path);
  {
    absl::MutexLock lock(&mu_);
    ++server_starts_;
  }
  spdlog::info("DRA {}: registration socket {}", options_.driver_name, path);
  return absl::OkStatus();
}

void Registrar::StopServer() {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(RealClock()->Deadline(absl::Seconds(2))));
  server_->Wait();
  server_.reset();
  service_.reset();
  // Only our own socket: kubelet may have put someone else's file there.
  if (socket_inode_ != 0 && InodeOf(socket_path()) == socket_inode_) {
    ::unlink(socket_path().c_str());
  }
  socket_inode_ = 0;
}

void Registrar::Stop() { StopServer(); }

uint64_t Registrar::accepted() const {
  absl::MutexLock lock(&mu_);
  return accepted_;
}
uint64_t Registrar::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}
std::string Registrar::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}
uint64_t Registrar::server_starts() const {
  absl::MutexLock lock(&mu_);
  return server_starts_;
}

bool Registrar::WaitForVerdicts(uint64_t n, uint64_t r, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return accepted_ >= n || refused_ >= r; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

}  // namespace pdc::driver::dra
